"""Benchmark: our layers vs PyG's on one graph, and vanilla on 2 workers vs 1 process.

1. Single-process full-graph training epochs (forward, loss, backward, Adam step) of our GCN,
   GraphSAGE, GAT and GCNII (GCNII on a graph of ``--gcnii-nodes``, by default half the others',
   so that PyG's reference fits a 24 GiB machine) against the same architectures built from PyG's ``GCNConv``
   (``cached=True``), ``SAGEConv``, ``GATConv`` and ``GCN2Conv`` (``cached=True``) layers, which
   take the ``edge_index`` (PyG's message passing, as it runs without the optional sparse
   extensions). Epochs alternate ours/PyG so both see the same
   machine state; the ratio of median epoch times is printed.
2. ``strategy=vanilla`` with 2 local workers on the same graph: its mean epoch time divided
   by our single-process epoch time.

Both run with :func:`gnntrain.allocator.keep_freed_memory`, as every worker does by default; each
model's comparison runs in a process of its own.

Results go to ``results/bench.json``. Usage: ``python scripts/bench.py [--nodes N] ...``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv, GCN2Conv, GCNConv, SAGEConv

from gnntrain.allocator import keep_freed_memory
from gnntrain.data.synthetic import generate
from gnntrain.graph import build_local_graph
from gnntrain.models import build_model, model_spec

from jobs import run_job

RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench.json"


class PygStack(nn.Module):
    """PyG convolutions with the architecture of ``gnntrain.models.GNN`` (no norm, no dropout)."""

    def __init__(self, make_conv, dims: list[int], activation=F.relu) -> None:
        super().__init__()
        last = len(dims) - 2
        self.convs = nn.ModuleList(make_conv(a, b, i == last) for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])))
        self.activation = activation

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = self.activation(x)
        return x


class PygGCNII(nn.Module):
    """PyG's GCN2Conv with the architecture of ``gnntrain.models.gcnii.GCNII`` (no dropout)."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int) -> None:
        super().__init__()
        self.lin_in, self.lin_out = nn.Linear(in_dim, hidden), nn.Linear(hidden, out_dim)
        self.convs = nn.ModuleList(GCN2Conv(hidden, 0.1, 0.5, layer, cached=True) for layer in range(1, layers + 1))

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = h0 = F.relu(self.lin_in(x))
        for conv in self.convs:
            h = F.relu(conv(h, h0, edge_index))
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


def timed_epoch(step) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def training_step(model: nn.Module, forward, y: torch.Tensor, mask: torch.Tensor):
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(forward()[mask], y[mask]).backward()
        optimizer.step()

    return step


def graph(args, nodes: int):
    """The benchmark's synthetic graph of ``nodes`` nodes (the same in every process: seed 0)."""
    torch.manual_seed(0)
    return generate(nodes, args.avg_degree, args.classes, args.features, homophily=0.8)


def compare_model(args, name: str) -> dict:
    """One model's row: our layers' and PyG's training epochs, alternating, in this process."""
    keep_freed_memory()  # as in every worker (cluster.keep_freed_memory)
    nodes = args.gcnii_nodes if name == "gcnii" else args.nodes
    data = graph(args, nodes)
    local = build_local_graph(data, torch.zeros(data.num_nodes, dtype=torch.long), 0, 1)
    no_halo = lambda h, layer: h.new_zeros(0, h.shape[1])  # noqa: E731 - one part, no halo
    dims = [data.num_features] + [args.hidden] * (args.layers - 1) + [data.num_classes]
    layers = args.gcnii_layers if name == "gcnii" else args.layers
    own = {"gat": {"heads": args.heads, "out_heads": 1, "att_dropout": 0.0}, "gcnii": {"alpha": 0.1, "theta": 0.5}}
    config = model_spec(name).config(name=name, hidden=args.hidden, layers=layers, dropout=0.0, norm="none",
                                     **own.get(name, {}))
    ours = build_model(config, data.num_features, data.num_classes)
    pyg = pyg_model(name, dims, args)
    steps = {
        "ours": training_step(ours, lambda: ours(data.x, local, no_halo), data.y, data.train_mask),
        "pyg": training_step(pyg, lambda: pyg(data.x, data.edge_index), data.y, data.train_mask),
    }
    times: dict[str, list[float]] = {"ours": [], "pyg": []}
    for epoch in range(args.warmup + args.epochs):
        for which, step in steps.items():
            t = timed_epoch(step)
            if epoch >= args.warmup:
                times[which].append(t)
    ours_s, pyg_s = statistics.median(times["ours"]), statistics.median(times["pyg"])
    print(f"{name:6s} single process: ours {ours_s * 1e3:8.1f} ms/epoch   PyG {pyg_s * 1e3:8.1f} ms/epoch   "
          f"ours/PyG = {ours_s / pyg_s:.3f}" + (f"   ({nodes} nodes)" if nodes != args.nodes else ""), flush=True)
    return {"nodes": nodes, "layers": layers, "ours_epoch_s": ours_s, "pyg_epoch_s": pyg_s, "ratio_ours_over_pyg": ours_s / pyg_s}


def compare_layers(args) -> dict:
    """Every model's row, each in a fresh process: a model's freed memory, kept in the heap for
    reuse, never adds to the next one's peak."""
    context = multiprocessing.get_context("spawn")
    rows = {}
    for name in args.models:
        with context.Pool(1) as pool:
            rows[name] = pool.apply(compare_model, (args, name))
    return rows


def vanilla_two_workers(args, single: dict) -> dict:
    """``strategy=vanilla`` on 2 workers with the first model, on the graph of its row ``single``."""
    single_epoch_s = single["ours_epoch_s"]
    summary = run_job(["dataset=synthetic", f"dataset.num_nodes={single['nodes']}", f"dataset.avg_degree={args.avg_degree}",
                       f"dataset.num_features={args.features}", f"dataset.num_classes={args.classes}",
                       f"model={args.models[0]}", f"model.hidden={args.hidden}", f"model.layers={single['layers']}",
                       "model.dropout=0", "cluster.world_size=2", f"train.epochs={args.warmup + args.epochs}",
                       f"train.warmup_epochs={args.warmup}", f"train.eval_every={args.warmup + args.epochs}"])
    ratio = summary["mean_epoch_time"] / single_epoch_s
    print(f"vanilla {args.models[0]}, 2 workers: {summary['mean_epoch_time'] * 1e3:.1f} ms/epoch "
          f"(comm {summary['mean_comm_time'] * 1e3:.1f} ms, {summary['mean_comm_bytes_per_epoch'] / 2**20:.1f} MB); "
          f"2 workers / 1 process = {ratio:.3f}", flush=True)
    return {"epoch_s": summary["mean_epoch_time"], "comm_s": summary["mean_comm_time"],
            "comm_bytes_per_epoch": summary["mean_comm_bytes_per_epoch"], "ratio_over_single_process": ratio,
            "partition": summary["partition"]}


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
    parser.add_argument("--gcnii-nodes", type=int, default=50_000,
                        help="nodes of GCNII's graph (same degree): PyG's GCN2Conv keeps every layer's per-edge "
                             "messages for the backward pass, 18-24 GB at 100k nodes and 8 layers")
    parser.add_argument("--models", nargs="+", default=["gcn", "sage", "gat", "gcnii"])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    kept = keep_freed_memory()  # as in every worker (cluster.keep_freed_memory)

    data = graph(args, args.nodes)
    print(f"synthetic graph: {data.num_nodes} nodes, {data.num_edges} edges, {data.num_features} features; "
          f"{args.layers} layers x {args.hidden}; {torch.get_num_threads()} threads", flush=True)
    layers = compare_layers(args)
    vanilla = vanilla_two_workers(args, layers[args.models[0]])
    result = {
        "graph": {"nodes": data.num_nodes, "edges": data.num_edges, "features": data.num_features,
                  "classes": data.num_classes},
        "model": {"layers": args.layers, "hidden": args.hidden},
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                    "torch": torch.__version__, "keep_freed_memory": kept},
        "epochs_timed": args.epochs,
        "layers_vs_pyg": layers,
        "vanilla_2_workers": vanilla,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
