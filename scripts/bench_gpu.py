"""Benchmark on one GPU: our layers vs PyG's, every strategy's epoch, and what determinism costs.

1. Layers. Single-process full-graph training epochs (forward, loss, backward, Adam step) of
   our GCN, GraphSAGE, GAT and GCNII against the same architectures built from PyG's layers
   (``scripts/bench.py``'s ``pyg_model``), on a synthetic graph of ``--nodes`` nodes (2M by
   default), in one process on the GPU. PyG runs two ways: over the ``edge_index`` (its
   message passing, scatter on the GPU) and, for the layers that take one (GCN, GraphSAGE,
   GCNII), over a sparse CSR ``adj_t`` (cuSPARSE); a way that runs out of memory is reported as
   such. Epochs alternate ours / PyG's ways, ``--epochs`` of each after ``--warmup``; each is
   timed with CUDA events and its peak device memory (allocated and reserved) is read.
2. Strategies. Every registered strategy's job on 2 gloo ranks sharing the GPU (every device
   path of a multi-rank job), on a graph of ``--strategy-nodes`` nodes: mean epoch time over
   the epochs after the first, its spread, exposed communication, peak device memory.
3. Determinism. ``strategy=vanilla`` with ``cluster.deterministic`` off and on, interleaved
   ``--repeats`` times: the ratio of the median epoch times.

Timings are medians with their range (min-max) over the timed epochs or repeats. Results go to
``results/bench_gpu.json`` with the card's name; ``make gpu-check`` runs this after the CUDA
tests. Usage: ``python scripts/bench_gpu.py [--nodes N] ...``; ``--device cpu`` with small sizes
tries the script itself on a machine without a GPU (its figures mean nothing there).
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.utils import to_torch_csr_tensor

from bench import pyg_model
from gnntrain.timing.clock import clock_of
from gnntrain.data.graph_data import GraphData
from gnntrain.data.synthetic import generate
from gnntrain.engine.peak_memory import peak_memory_mb, reset_peak_memory
from gnntrain.data.local_graph import build_local_graph
from gnntrain.models import build_model, model_spec
from gnntrain.strategies import METHODS
from gnntrain.repro.jobs import git_commit, run_job

RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench_gpu.json"
CSR_LAYERS = ("gcn", "sage", "gcnii")
"""The models whose PyG layers take a sparse adjacency instead of an ``edge_index``."""


def spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def timed_step(step: Callable[[], None], device: torch.device) -> tuple[float, float, float]:
    """One training step: seconds on the device, peak MiB allocated and reserved during it."""
    clock = clock_of(device)
    reset_peak_memory(device)
    clock.anchor()
    start = clock.mark()
    step()
    seconds = clock.seconds(start, clock.mark())
    return (seconds, *peak_memory_mb(device))


def free_cached(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()


def training_step(model: nn.Module, forward: Callable[[], torch.Tensor], y: torch.Tensor, rows: torch.Tensor):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(forward()[rows], y[rows]).backward()
        optimizer.step()

    return step


def layer_rows(args, device: torch.device) -> dict:
    torch.manual_seed(0)
    data = generate(args.nodes, args.avg_degree, args.classes, args.features, homophily=0.8)
    print(f"[1] synthetic graph: {data.num_nodes} nodes, {data.num_edges} edges, {data.num_features} features; "
          f"{args.layers} layers x {args.hidden}", flush=True)
    return compare_layers(data, args, device)


def compare_layers(data: GraphData, args, device: torch.device) -> dict:
    """Our model and PyG's ways (``args.pyg_ways``) for each of ``args.models`` on ``data``, epochs
    alternating (the module docstring's section 1); ``args`` gives the models' sizes, epochs and
    warm-up."""
    local = build_local_graph(data, torch.zeros(data.num_nodes, dtype=torch.long), 0, 1).to(device)
    x, y, edge_index = data.x.to(device), data.y.to(device), data.edge_index.to(device)
    rows = data.train_mask.nonzero().view(-1).to(device)
    adj_t = to_torch_csr_tensor(edge_index.flip(0), size=(data.num_nodes, data.num_nodes))
    no_halo = lambda h, layer: h.new_zeros(0, h.shape[1])  # noqa: E731 - one part, no halo
    dims = [data.num_features] + [args.hidden] * (args.layers - 1) + [data.num_classes]
    result = {"graph": {"nodes": data.num_nodes, "edges": data.num_edges, "features": data.num_features}}
    for name in args.models:
        layers = args.gcnii_layers if name == "gcnii" else args.layers
        own = {"gat": {"heads": args.heads, "out_heads": 1, "att_dropout": 0.0}, "gcnii": {"alpha": 0.1, "theta": 0.5}}
        config = model_spec(name).config(name=name, hidden=args.hidden, layers=layers, dropout=0.0, norm="none",
                                         **own.get(name, {}))
        ours = build_model(config, data.num_features, data.num_classes).to(device)
        ways = {"ours": training_step(ours, lambda: ours(x, local, no_halo), y, rows)}
        pyg = pyg_model(name, dims, args).to(device)
        # a model of its own per way: a cached GCN layer keeps the first adjacency it was given
        pyg_csr = copy.deepcopy(pyg)
        if "edge_index" in args.pyg_ways:
            ways["pyg_edge_index"] = training_step(pyg, lambda: pyg(x, edge_index), y, rows)
        if name in CSR_LAYERS and "csr" in args.pyg_ways:
            ways["pyg_csr"] = training_step(pyg_csr, lambda: pyg_csr(x, adj_t), y, rows)
        runs: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
        failed: dict[str, str] = {}
        for epoch in range(args.warmup + args.epochs):
            for way, step in ways.items():
                if way in failed:
                    continue
                try:
                    measured = timed_step(step, device)
                except torch.OutOfMemoryError:
                    failed[way] = "out of memory"
                except RuntimeError as exc:
                    failed[way] = " ".join(str(exc).split())[:200]
                else:
                    if epoch >= args.warmup:
                        runs[way].append(measured)
        row: dict = {"layers": layers}
        for way, measured in runs.items():
            if way in failed:
                row[way] = {"failed": failed[way]}
            else:
                row[way] = {"epoch_s": spread([m[0] for m in measured]), "peak_allocated_mb": max(m[1] for m in measured),
                            "peak_reserved_mb": max(m[2] for m in measured)}
        timed = {w: row[w]["epoch_s"]["median"] for w in runs if "epoch_s" in row[w]}
        if "ours" in timed and len(timed) > 1:
            fastest = min((w for w in timed if w != "ours"), key=timed.get)
            row["ours_over_fastest_pyg"] = timed["ours"] / timed[fastest]
            row["fastest_pyg"] = fastest
        print(f"    {name:6s} " + "   ".join(
            f"{w} {row[w]['epoch_s']['median'] * 1e3:.1f} ms, {row[w]['peak_allocated_mb']:.0f} MiB"
            if "epoch_s" in row[w] else f"{w}: {row[w]['failed']}" for w in runs), flush=True)
        result[name] = row
        del ours, pyg, pyg_csr, ways
        free_cached(device)
    return result


STRATEGIES = "strategies_2_ranks_sharing_the_gpu"
SECTIONS = ["layers_vs_pyg", STRATEGIES, "determinism"]


def job_overrides(args, name: str) -> list[str]:
    epochs = args.strategy_epochs
    return ["dataset=synthetic", f"dataset.num_nodes={args.strategy_nodes}", f"dataset.avg_degree={args.avg_degree}",
            f"dataset.num_features={args.features}", "model=sage", f"model.hidden={args.hidden}", "model.layers=2",
            f"strategy={name}", f"cluster.device={args.device}", "cluster.backend=gloo", "cluster.world_size=2",
            f"train.epochs={epochs}", "train.warmup_epochs=1", f"train.eval_every={epochs}"]


def strategy_rows(args, keep: Callable[[dict], None]) -> dict:
    """Each strategy's row; ``keep`` receives the rows so far after each, so a stopped run keeps them."""
    print(f"[2] every strategy, 2 gloo ranks sharing the GPU, {args.strategy_nodes} nodes", flush=True)
    rows = {}
    for name in args.strategies:
        run = run_job(job_overrides(args, name))
        summary = run.summary
        steady = [r.epoch_time for r in run.records[1:]]
        rows[name] = {"epoch_s": spread(steady), "comm_s": summary.mean_comm_time,
                      "reduce_s": summary.mean_reduce_time, "peak_allocated_mb": summary.peak_mem_mb,
                      "peak_reserved_mb": summary.peak_mem_reserved_mb,
                      "comm_bytes_per_epoch": summary.mean_comm_bytes_per_epoch}
        print(f"    {name:14s} {statistics.median(steady) * 1e3:8.1f} ms/epoch (exposed comm "
              f"{summary.mean_comm_time * 1e3:.1f} ms), {summary.peak_mem_mb:.0f} MiB", flush=True)
        keep(rows)
    return rows


def determinism_cost(args) -> dict:
    print(f"[3] vanilla with cluster.deterministic off and on, interleaved {args.repeats} times", flush=True)
    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.repeats):
        for setting in times:
            summary = run_job(job_overrides(args, "vanilla") + [f"cluster.deterministic={setting == 'on'}"]).summary
            times[setting].append(summary.mean_epoch_time)
    ratio = statistics.median(times["on"]) / statistics.median(times["off"])
    print(f"    deterministic / default = {ratio:.3f}", flush=True)
    return {"epoch_s": {k: spread(v) for k, v in times.items()}, "ratio_on_over_off": ratio}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=8, help="GAT heads (hidden must be a multiple)")
    parser.add_argument("--gcnii-layers", type=int, default=4, help="GCNII convolutions")
    parser.add_argument("--epochs", type=int, default=4, help="timed epochs per model and way")
    parser.add_argument("--warmup", type=int, default=1, help="untimed epochs per model and way")
    parser.add_argument("--models", nargs="+", default=["gcn", "sage", "gat", "gcnii"])
    parser.add_argument("--pyg-ways", nargs="+", choices=["edge_index", "csr"], default=["edge_index", "csr"],
                        help="PyG's ways to run each model (csr: for the layers that take an adj_t)")
    parser.add_argument("--strategy-nodes", type=int, default=50_000)
    parser.add_argument("--strategy-epochs", type=int, default=4)
    parser.add_argument("--strategies", nargs="+", choices=list(METHODS), default=list(METHODS),
                        help="the strategies of section 2 (default: every registered one)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs of each determinism setting")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=SECTIONS,
                        help="sections to measure; the out file keeps the others' figures (same card only)")
    args = parser.parse_args()
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    result = {
        "card": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        "machine": {"cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
                    "cuda": torch.version.cuda},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    earlier = json.loads(args.out.read_text()) if args.out.exists() else {}
    if earlier.get("card") == result["card"]:
        result = {**earlier, **result}

    commit = git_commit()

    def keep(section: str, figures: dict) -> None:
        result[section] = figures
        result.setdefault("measured_at", {})[section] = commit
        args.out.write_text(json.dumps(result, indent=2) + "\n")

    measures = {"layers_vs_pyg": lambda: layer_rows(args, device),
                "strategies_2_ranks_sharing_the_gpu":
                    lambda: strategy_rows(args, lambda rows: keep(STRATEGIES, {**result.get(STRATEGIES, {}), **rows})),
                "determinism": lambda: determinism_cost(args)}
    for section in args.sections:  # written after each, so a stopped run keeps what it measured
        figures = measures[section]()
        keep(section, {**result.get(section, {}), **figures} if section == STRATEGIES else figures)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
