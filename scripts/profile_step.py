"""Where the costs ``make scale`` finds growing faster than the graph go: generating the graph,
partitioning it with METIS, and a training step.

For each node count (the ladder's generator settings, ``scripts/scale.py``), one process

1. generates the graph under ``cProfile`` (each Python function's and each library call's own
   time: torch's draws and searches, numpy's sort in the coalescing);
2. partitions it into 4 parts with METIS under ``cProfile`` (the CSR handed over, then
   ``pymetis.part_graph``: METIS's own code is one call);
3. holds the whole graph and, keeping freed memory as workers do (:mod:`gnntrain.job.launch.allocator`),
   runs GraphSAGE training steps (forward, loss, backward, Adam); after one step that builds the
   aggregation matrices, ``torch.profiler`` records the next (each operator's self CPU time).

Each part's time is divided by the graph's directed edges and the last graph's per-edge time is
set beside the first's: the parts whose ratio is large are what grows.

Results: ``results/scale_profile.json``. Usage: ``python scripts/profile_step.py [--nodes 100000
1000000]``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from gnntrain.job.launch.allocator import keep_freed_memory
from gnntrain.data.partition import carve_part, metis_partition
from gnntrain.data.synthetic import generate
from gnntrain.data.local_graph import local_graph_from_part
from gnntrain.models import build_model
from gnntrain.repro import CHECKOUT as REPO
from gnntrain.repro.jobs import compose_config, git_commit
from scale import PRODUCTS


def call_profile(fn, *args, **kwargs) -> tuple[object, dict]:
    """``fn(*args, **kwargs)`` under cProfile: its result, and its wall time and each callable's
    own time (``file:function`` or the library call's name)."""
    profiler = cProfile.Profile()
    start = time.perf_counter()
    result = profiler.runcall(fn, *args, **kwargs)
    wall = time.perf_counter() - start
    own: dict[str, float] = {}
    for (file, _, name), (_, _, tottime, _, _) in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        key = name if file == "~" else f"{Path(file).name}:{name}"
        own[key] = own.get(key, 0.0) + tottime
    return result, {"s": wall, "own_s": own}


def step_profile(graph, args: argparse.Namespace) -> dict:
    """One whole-graph GraphSAGE training step under ``torch.profiler``: wall time and each
    operator's self CPU time."""
    run = compose_config(["model=sage", f"model.hidden={args.hidden}", f"model.layers={args.layers}"])
    model = build_model(run.model, PRODUCTS["features"], PRODUCTS["classes"])
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
    return {"s": wall, "own_s": {e.key: e.self_cpu_time_total / 1e6 for e in prof.key_averages()}}


def profile_size(nodes: int, args: argparse.Namespace) -> dict:
    """The three profiles (module docstring) of the ladder's graph of ``nodes`` nodes."""
    data, generate_profile = call_profile(generate, nodes, args.avg_degree, PRODUCTS["classes"], PRODUCTS["features"],
                                          args.homophily)
    edges = data.num_edges
    with tempfile.TemporaryDirectory() as spill:
        _, partition_profile = call_profile(metis_partition, data, 4, 0, spill_dir=Path(spill))
    graph = local_graph_from_part(carve_part(data, torch.zeros(nodes, dtype=torch.long), 0, 1))
    del data
    profiles = {"generate": generate_profile, "partition": partition_profile, "step": step_profile(graph, args)}
    print(f"{nodes:>9} nodes, {edges:>11} edges: " + ", ".join(
        f"{name} {p['s']:6.2f} s ({p['s'] / edges * 1e9:5.1f} ns per edge)" for name, p in profiles.items()), flush=True)
    return {"nodes": nodes, "edges": edges, **profiles}


def growth(name: str, first: dict, last: dict, top: int) -> dict:
    """Per-edge time of the ``top`` heaviest parts of profile ``name`` at the last size over the
    first, printed as a table; and the whole profile's."""
    before, after = first[name]["own_s"], last[name]["own_s"]
    heaviest = sorted(after, key=after.get, reverse=True)[:top]
    ratios = {}
    print(f"\n{name}: {'part':46s} {'ns/edge first':>14s} {'ns/edge last':>13s} {'growth':>7s} {'share of last':>14s}")
    for key in heaviest:
        small, large = before.get(key, 0.0) / first["edges"], after[key] / last["edges"]
        ratios[key] = large / small if small else None
        print(f"{'':{len(name) + 2}s}{key[:46]:46s} {small * 1e9:14.2f} {large * 1e9:13.2f} "
              f"{ratios[key] or float('nan'):7.2f} {after[key] / last[name]['s']:14.1%}")
    whole = (last[name]["s"] / last["edges"]) / (first[name]["s"] / first["edges"])
    print(f"{name} time per edge, last over first: {whole:.2f}", flush=True)
    return {"parts": ratios, "whole": whole}


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
    sizes = [profile_size(nodes, args) for nodes in args.nodes]
    growth_per_edge = {name: growth(name, sizes[0], sizes[-1], args.top) for name in ("generate", "partition", "step")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"commit": git_commit(), "setting": {**vars(args), "out": str(args.out)},
                                    "sizes": sizes, "growth_per_edge": growth_per_edge}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
