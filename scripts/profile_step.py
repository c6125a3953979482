"""Where a training step's time goes as the graph grows: the profile ``make scale`` points to
where a cost per edge grows faster than the graph.

For each node count (the ladder's generator settings, ``scripts/scale.py``), one process holds
the whole graph and, keeping freed memory as workers do (:mod:`gnntrain.allocator`), runs
GraphSAGE training steps (forward, loss, backward, Adam); after one
step that builds the aggregation matrices, ``torch.profiler`` records the next. Each operator's
self CPU time is divided by the graph's directed edges, and the last graph's per-edge time is
set beside the first's: the operators whose ratio is large are what grows.

Results: ``results/scale_profile.json``. Usage: ``python scripts/profile_step.py [--nodes 100000
1000000]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from gnntrain.allocator import keep_freed_memory
from gnntrain.data.partition import carve_part
from gnntrain.data.synthetic import generate
from gnntrain.graph import local_graph_from_part
from gnntrain.models import build_model
from jobs import REPO, compose_config, git_commit
from scale import PRODUCTS


def step_profile(nodes: int, args: argparse.Namespace) -> dict:
    data = generate(nodes, args.avg_degree, PRODUCTS["classes"], PRODUCTS["features"], args.homophily)
    edges = data.num_edges
    graph = local_graph_from_part(carve_part(data, torch.zeros(nodes, dtype=torch.long), 0, 1))
    del data
    cfg = compose_config(["model=sage", f"model.hidden={args.hidden}", f"model.layers={args.layers}"])
    model = build_model(cfg["model"], PRODUCTS["features"], PRODUCTS["classes"])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def train_step() -> None:
        optimizer.zero_grad()
        out = model(graph.x, graph, lambda h, layer: h[:0])
        F.cross_entropy(out[graph.train_mask], graph.y[graph.train_mask]).backward()
        optimizer.step()

    train_step()  # builds the aggregation matrices
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        train_step()
    wall = time.perf_counter() - start
    ops = {e.key: e.self_cpu_time_total / 1e6 for e in prof.key_averages()}
    print(f"{nodes:>9} nodes, {edges:>11} edges: step {wall:6.2f} s ({wall / edges * 1e9:6.1f} ns per edge)", flush=True)
    return {"nodes": nodes, "edges": edges, "step_s": wall, "op_self_s": ops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--avg-degree", type=float, default=53.5)
    parser.add_argument("--homophily", type=float, default=0.97)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "scale_profile.json")
    args = parser.parse_args()
    keep_freed_memory()
    steps = [step_profile(nodes, args) for nodes in args.nodes]
    first, last = steps[0], steps[-1]
    heaviest = sorted(last["op_self_s"], key=last["op_self_s"].get, reverse=True)[: args.top]
    growth = {}
    print(f"{'operator':40s} {'ns/edge first':>14s} {'ns/edge last':>13s} {'growth':>7s} {'share of last':>14s}")
    for op in heaviest:
        before = first["op_self_s"].get(op, 0.0) / first["edges"]
        after = last["op_self_s"][op] / last["edges"]
        growth[op] = after / before if before else None
        print(f"{op[:40]:40s} {before * 1e9:14.2f} {after * 1e9:13.2f} "
              f"{growth[op] if growth[op] else float('nan'):7.2f} {last['op_self_s'][op] / last['step_s']:14.1%}")
    per_edge = (last["step_s"] / last["edges"]) / (first["step_s"] / first["edges"])
    print(f"step time per edge, last over first: {per_edge:.2f}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"commit": git_commit(), "setting": {**vars(args), "out": str(args.out)},
                                    "steps": steps, "growth_per_edge": growth, "step_growth_per_edge": per_edge},
                                   indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
