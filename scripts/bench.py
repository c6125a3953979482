"""Benchmark: our layers vs PyG's fastest CPU path, and vanilla on 2 workers vs 1 process.

1. Single-process full-graph training epochs (forward, loss, backward, Adam step) of our GCN,
   GraphSAGE, GAT and GCNII against the same architectures built from PyG's ``GCNConv``
   (``cached=True``), ``SAGEConv``, ``GATConv`` and ``GCN2Conv`` (``cached=True``) layers, each
   on PyG's fastest CPU path for it (:data:`PYG_PATH`): the sparse ``adj_t`` (a CSR tensor from
   ``torch_geometric.utils.to_torch_csr_tensor``, run by torch's CSR kernels) where the layer
   accepts one, the ``edge_index`` (message passing) for ``GATConv``. Each side runs in a
   process of its own (so its peak is its own), ``--repeats`` times, the sides alternating
   (ours first in even repeats, PyG first in odd ones) so both see the same machine states. A
   side's figures: median epoch time, the process's peak resident memory, and the bytes one
   step keeps for its backward (tensor level, :class:`~gnntrain.parallel.activation_memory.SavedActivations`).
   A row gives the median of the repeats' ratios ours / PyG with their range, and the commit it
   was measured at (``measured_at``): ``--models`` measures some rows again and keeps the others
   as ``--out`` has them (on the same graph and repeats only).
2. ``strategy=vanilla`` with 2 local workers on the same graph: its mean epoch time divided
   by our single-process epoch time (measured in a run of every model only).

Every process runs with :func:`gnntrain.job.launch.allocator.keep_freed_memory`, as every worker does by
default. Results go to ``results/bench.json``. Usage: ``python scripts/bench.py [--nodes N]
[--repeats R] ...``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import resource
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv, GCN2Conv, GCNConv, SAGEConv
from torch_geometric.utils import to_torch_csr_tensor

from gnntrain.job.launch.allocator import keep_freed_memory
from gnntrain.data.synthetic import generate
from gnntrain.data.local_graph import build_local_graph
from gnntrain.models import build_model, model_spec
from gnntrain.parallel.activation_memory import SavedActivations

from gnntrain.repro.jobs import git_commit, run_job

RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench.json"
MODELS = ["gcn", "sage", "gat", "gcnii"]
PYG_PATH = {"gcn": "csr", "sage": "csr", "gcnii": "csr", "gat": "edge_index"}
"""PyG's fastest CPU path per model: the CSR ``adj_t`` where its layer accepts one, else the
``edge_index``."""


class PygStack(nn.Module):
    """PyG convolutions with the architecture of ``gnntrain.models.GNN`` (no norm, no dropout)."""

    def __init__(self, make_conv, dims: list[int], activation=F.relu) -> None:
        super().__init__()
        last = len(dims) - 2
        self.convs = nn.ModuleList(make_conv(a, b, i == last) for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])))
        self.activation = activation

    def forward(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(x, adjacency)
            if i < len(self.convs) - 1:
                x = self.activation(x)
        return x


class PygGCNII(nn.Module):
    """PyG's GCN2Conv with the architecture of ``gnntrain.models.gcnii.GCNII`` (no dropout)."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int) -> None:
        super().__init__()
        self.lin_in, self.lin_out = nn.Linear(in_dim, hidden), nn.Linear(hidden, out_dim)
        self.convs = nn.ModuleList(GCN2Conv(hidden, 0.1, 0.5, layer, cached=True) for layer in range(1, layers + 1))

    def forward(self, x: torch.Tensor, adjacency: torch.Tensor) -> torch.Tensor:
        h = h0 = F.relu(self.lin_in(x))
        for conv in self.convs:
            h = F.relu(conv(h, h0, adjacency))
        return self.lin_out(h)


def pyg_model(name: str, dims: list[int], args) -> nn.Module:
    if name == "gcn":
        return PygStack(lambda a, b, last: GCNConv(a, b, cached=True), dims)
    if name == "sage":
        return PygStack(lambda a, b, last: SAGEConv(a, b, aggr="mean"), dims)
    if name == "gat":
        return PygStack(lambda a, b, last: GATConv(a, b, heads=1, concat=False) if last
                        else GATConv(a, b // args.heads, heads=args.heads), dims, activation=F.elu)
    return PygGCNII(dims[0], args.hidden, dims[-1], args.gcnii_layers)


PHASES = ("forward", "backward", "optimizer")
"""The parts of a training step timed apart: forward and loss; backward; zeroing the gradients
and Adam's step."""


def training_step(model: nn.Module, forward, y: torch.Tensor, mask: torch.Tensor):
    """A training step that returns the seconds of each of :data:`PHASES` (host clock: CPU
    only, where every op has finished when it returns)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def step() -> dict[str, float]:
        start = time.perf_counter()
        loss = F.cross_entropy(forward()[mask], y[mask])
        forward_end = time.perf_counter()
        loss.backward()
        backward_end = time.perf_counter()
        optimizer.step()
        optimizer.zero_grad()
        return {"forward": forward_end - start, "backward": backward_end - forward_end,
                "optimizer": time.perf_counter() - backward_end}

    return step


def graph(args, nodes: int):
    """The benchmark's synthetic graph of ``nodes`` nodes (the same in every process: seed 0)."""
    torch.manual_seed(0)
    return generate(nodes, args.avg_degree, args.classes, args.features, homophily=0.8)


def measure(args, name: str, side: str) -> dict:
    """One side's (``ours`` or ``pyg``) training epochs of model ``name``, in this fresh process:
    median epoch time, the process's peak resident memory, and the bytes one step keeps for its
    backward. Each side holds only what it trains on (ours its local graph, PyG the features and
    its adjacency)."""
    keep_freed_memory()  # as in every worker (cluster.keep_freed_memory)
    data = graph(args, args.nodes)
    layers = args.gcnii_layers if name == "gcnii" else args.layers
    if side == "ours":
        local = build_local_graph(data, torch.zeros(data.num_nodes, dtype=torch.long), 0, 1)
        x, y, mask, features, classes = local.x, local.y, local.train_mask, data.num_features, data.num_classes
        del data
        no_halo = lambda h, layer: h.new_zeros(0, h.shape[1])  # noqa: E731 - one part, no halo
        own = {"gat": {"heads": args.heads, "out_heads": 1, "att_dropout": 0.0}, "gcnii": {"alpha": 0.1, "theta": 0.5}}
        config = model_spec(name).config(name=name, hidden=args.hidden, layers=layers, dropout=0.0, norm="none",
                                         **own.get(name, {}))
        model = build_model(config, features, classes)
        forward = lambda: model(x, local, no_halo)  # noqa: E731
    else:
        x, y, mask = data.x, data.y, data.train_mask
        adjacency = data.edge_index if PYG_PATH[name] == "edge_index" else \
            to_torch_csr_tensor(data.edge_index.flip(0), size=(data.num_nodes, data.num_nodes))
        dims = [data.num_features] + [args.hidden] * (args.layers - 1) + [data.num_classes]
        del data
        model = pyg_model(name, dims, args)
        forward = lambda: model(x, adjacency)  # noqa: E731
    step = training_step(model, forward, y, mask)
    phases = [step() for _ in range(args.warmup + args.epochs)][args.warmup:]
    with SavedActivations(model.parameters()) as saved:
        forward()
    return {"epoch_s": statistics.median(sum(p.values()) for p in phases),
            **{f"{phase}_s": statistics.median(p[phase] for p in phases) for phase in PHASES},
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "saved_for_backward_mb": saved.nbytes / 2**20}


def _median_range(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def compare_model(args, name: str) -> dict:
    """One model's row: ``--repeats`` pairs of processes, ours and PyG's, alternating which runs
    first."""
    context = multiprocessing.get_context("spawn")
    runs: dict[str, list[dict]] = {"ours": [], "pyg": []}
    for repeat in range(args.repeats):
        for side in ("ours", "pyg") if repeat % 2 == 0 else ("pyg", "ours"):
            with context.Pool(1) as pool:
                runs[side].append(pool.apply(measure, (args, name, side)))
    ratio = _median_range([o["epoch_s"] / p["epoch_s"] for o, p in zip(runs["ours"], runs["pyg"])])
    memory = _median_range([o["peak_rss_mb"] / p["peak_rss_mb"] for o, p in zip(runs["ours"], runs["pyg"])])
    row = {"nodes": args.nodes, "layers": args.gcnii_layers if name == "gcnii" else args.layers,
           "pyg_path": PYG_PATH[name], "runs": runs,
           "ours_epoch_s": statistics.median(r["epoch_s"] for r in runs["ours"]),
           "pyg_epoch_s": statistics.median(r["epoch_s"] for r in runs["pyg"]),
           "ratio_ours_over_pyg": ratio["median"], "ratio_range": [ratio["min"], ratio["max"]],
           "peak_rss_ours_over_pyg": memory["median"], "peak_rss_range": [memory["min"], memory["max"]],
           "saved_for_backward_mb": {side: statistics.median(r["saved_for_backward_mb"] for r in rs)
                                     for side, rs in runs.items()},
           "phase_s": {side: {phase: statistics.median(r[f"{phase}_s"] for r in rs) for phase in PHASES}
                       for side, rs in runs.items()}}
    print(f"{name:6s} vs PyG {PYG_PATH[name]:10s}: ours {row['ours_epoch_s'] * 1e3:8.1f} ms/epoch, PyG "
          f"{row['pyg_epoch_s'] * 1e3:8.1f}; ours/PyG {ratio['median']:.3f} [{ratio['min']:.3f}, {ratio['max']:.3f}]; "
          f"peak RSS ours/PyG {memory['median']:.2f} [{memory['min']:.2f}, {memory['max']:.2f}]; kept for backward "
          f"{row['saved_for_backward_mb']['ours']:.0f} / {row['saved_for_backward_mb']['pyg']:.0f} MiB", flush=True)
    for side, phases in row["phase_s"].items():
        print(f"       {side:4s} " + ", ".join(f"{phase} {s * 1e3:.1f} ms" for phase, s in phases.items()), flush=True)
    return row


def compare_layers(args) -> dict:
    """Every model's row."""
    return {name: compare_model(args, name) for name in args.models}


def vanilla_two_workers(args, single: dict) -> dict:
    """``strategy=vanilla`` on 2 workers with the first model, on the graph of its row ``single``."""
    single_epoch_s = single["ours_epoch_s"]
    summary = run_job(["dataset=synthetic", f"dataset.num_nodes={single['nodes']}", f"dataset.avg_degree={args.avg_degree}",
                       f"dataset.num_features={args.features}", f"dataset.num_classes={args.classes}",
                       f"model={args.models[0]}", f"model.hidden={args.hidden}", f"model.layers={single['layers']}",
                       "model.dropout=0", "cluster.world_size=2", f"train.epochs={args.warmup + args.epochs}",
                       f"train.warmup_epochs={args.warmup}", f"train.eval_every={args.warmup + args.epochs}"]).summary
    ratio = summary.mean_epoch_time / single_epoch_s
    print(f"vanilla {args.models[0]}, 2 workers: {summary.mean_epoch_time * 1e3:.1f} ms/epoch "
          f"(comm {summary.mean_comm_time * 1e3:.1f} ms, {summary.mean_comm_bytes_per_epoch / 2**20:.1f} MiB); "
          f"2 workers / 1 process = {ratio:.3f}", flush=True)
    return {"epoch_s": summary.mean_epoch_time, "comm_s": summary.mean_comm_time,
            "comm_bytes_per_epoch": summary.mean_comm_bytes_per_epoch, "ratio_over_single_process": ratio,
            "partition": summary.partition}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--avg-degree", type=float, default=24.0)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5, help="timed epochs per model")
    parser.add_argument("--warmup", type=int, default=1, help="untimed epochs per model")
    parser.add_argument("--heads", type=int, default=8, help="GAT heads (hidden must be a multiple)")
    parser.add_argument("--gcnii-layers", type=int, default=8, help="GCNII convolutions")
    parser.add_argument("--repeats", type=int, default=5, help="processes per side and model, alternating")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=MODELS,
                        help="the rows to measure (default: all); the others are kept as --out has them")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    kept_freed = keep_freed_memory()  # as in every worker (cluster.keep_freed_memory)

    data = graph(args, args.nodes)
    print(f"synthetic graph: {data.num_nodes} nodes, {data.num_edges} edges, {data.num_features} features; "
          f"{args.layers} layers x {args.hidden}; {torch.get_num_threads()} threads", flush=True)
    setting = {
        "graph": {"nodes": data.num_nodes, "edges": data.num_edges, "features": data.num_features,
                  "classes": data.num_classes},
        "model": {"layers": args.layers, "hidden": args.hidden},
        "epochs_timed": args.epochs,
        "repeats": args.repeats,
    }
    every_row = sorted(args.models) == sorted(MODELS)
    kept = {} if every_row or not args.out.exists() else json.loads(args.out.read_text())
    if kept and any(kept.get(key) != value for key, value in setting.items()):
        raise SystemExit(f"bench.py: error: {args.out} was measured on another graph or with other repeats; "
                         f"measure every model (no --models) to replace it")
    commit = git_commit()
    layers = kept.get("layers_vs_pyg", {})
    for name, row in compare_layers(args).items():
        layers[name] = {**row, "measured_at": commit}
    result = {
        **setting,
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                    "torch": torch.__version__, "keep_freed_memory": kept_freed},
        "layers_vs_pyg": layers,
        "vanilla_2_workers": vanilla_two_workers(args, layers[args.models[0]]) if every_row
        else kept.get("vanilla_2_workers"),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
