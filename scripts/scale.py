"""Benchmark: how the costs of a job grow with the graph, from ~100k nodes to ogbn-products'
size (2.45M nodes, ~124M directed edges, 100 features, 47 classes), on this machine.

Every step of the ladder is a synthetic graph of the same generator settings but its node
count (average degree ``--avg-degree`` before duplicates are dropped, homophily
``--homophily``, whose 4-part METIS replication each step states; 0.97 keeps it under 2, as
partitionable as real graphs). Per step, each its own ``gnntrain`` process tree measured by
``wait4`` (the peak of its largest process):

1. ``gnntrain-partition`` into 1, 2 and 4 parts: time and peak, the generate and partition
   phases' times from their lines (:mod:`gnntrain.data.phases`);
2. training with the part files: vanilla on 1, 2 and 4 workers, and pipegcn, bns and adaqp on
   2 and 4 workers (one method of each kind: stale halos, sampled halos, quantised halos):
   mean epoch time after the first, bytes per epoch, and the measured per-rank peak beside
   the estimate made before training (:mod:`gnntrain.job.memory`). A job the estimate
   stops as too large for this machine is recorded as such, with the estimate.

Each cost is also divided by the step's directed edges; ``growth`` is that cost per edge at the
largest step over the smallest (target <= 1.3). Results: ``results/scale.json`` and
``results/scale.png`` (each cost per edge against graph size), each step with the commit it was
measured on. Usage: ``python scripts/scale.py [--nodes 100000 300000 1000000 2450000] [--epochs
3] [--update] [--plot-only]`` (``--update`` measures only the steps named and keeps the file's
others; ``--plot-only`` draws ``results/scale.png`` again from the file and measures nothing).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from gnntrain.engine.metrics import read_records
from gnntrain.engine.summary import RunSummary
from gnntrain.repro import CHECKOUT as REPO
from gnntrain.repro.jobs import git_commit, measured_process

BIN = Path(sys.executable).parent
PRODUCTS = {"nodes": 2_449_029, "directed_edges": 123_718_280, "features": 100, "classes": 47}
"""ogbn-products (OGB's paper, Table 2), the ladder's top."""
TRAINING = [("vanilla", 1), ("vanilla", 2), ("vanilla", 4), ("pipegcn", 2), ("bns", 2), ("adaqp", 2),
            ("pipegcn", 4), ("bns", 4), ("adaqp", 4)]
PHASE = re.compile(r"^gnntrain: (generate dataset|partition) [^:]*: ([0-9.]+) s, peak ([0-9.]+) GiB")


def phase_times(output: str) -> dict:
    """The generate and partition phases' seconds and peaks from a job's stderr."""
    found = {}
    for line in output.splitlines():
        match = PHASE.match(line)
        if match:
            key = "generate" if match.group(1).startswith("generate") else "partition"
            found[f"{key}_s"], found[f"{key}_peak_gib"] = float(match.group(2)), float(match.group(3))
    return found


def run_step(nodes: int, args: argparse.Namespace, tmp: Path) -> dict:
    graph = [f"dataset.num_nodes={nodes}", f"dataset.avg_degree={args.avg_degree}",
             f"dataset.num_features={PRODUCTS['features']}", f"dataset.num_classes={PRODUCTS['classes']}",
             f"dataset.homophily={args.homophily}", f"partition.cache_dir={tmp / 'cache'}"]
    step: dict = {"nodes": nodes, "partitions": {}, "training": []}
    for parts in (1, 2, 4):
        result = measured_process([str(BIN / "gnntrain-partition"), *graph, f"partition.parts={parts}",
                                   f"hydra.run.dir={tmp / f'partition{parts}'}"], tmp)
        if result.returncode != 0:
            raise SystemExit(f"scale: partitioning {nodes} nodes into {parts} parts failed:\n{result.output[-2000:]}")
        manifest = json.loads(next((tmp / "cache" / "parted").glob(f"*-metis-{parts}-s0/manifest.json")).read_text())
        step["edges"] = manifest["graph"]["num_edges"]
        step["partitions"][parts] = {"wall_s": result.wall_s, "peak_gib": result.peak_mb / 1024,
                                     "replication": manifest["stats"]["replication_factor"],
                                     **phase_times(result.output)}
        print(f"{nodes:>9} nodes {step['edges']:>11} edges, {parts} parts: {result.wall_s:6.1f} s, peak "
              f"{result.peak_mb / 1024:5.2f} GiB, replication {manifest['stats']['replication_factor']:.3f}", flush=True)
    for strategy, workers in TRAINING:
        run_dir = tmp / "runs" / f"{strategy}{workers}"
        result = measured_process([str(BIN / "gnntrain"), *graph, f"strategy={strategy}", "model=sage",
                                   f"model.hidden={args.hidden}", f"model.layers={args.layers}",
                                   f"cluster.world_size={workers}", f"train.epochs={args.epochs}",
                                   f"train.eval_every={args.epochs}", "train.warmup_epochs=1",
                                   f"hydra.run.dir={run_dir}"], tmp)
        summary = RunSummary.read(run_dir) if (run_dir / "summary.json").exists() else None
        row = {"strategy": strategy, "workers": workers, "wall_s": result.wall_s}
        if result.returncode != 0 or summary is None or summary.status != "completed":
            row["failed"] = ((summary and summary.error) or result.output.strip().splitlines()[-1])[:400]
            print(f"{'':>9} {strategy:>8} on {workers}: did not run: {row['failed']}", flush=True)
        else:
            records = read_records(run_dir / "metrics.jsonl")
            row.update(epoch_time_s=summary.mean_epoch_time, first_epoch_s=records[0].epoch_time,
                       comm_bytes_per_epoch=summary.mean_comm_bytes_per_epoch,
                       peak_rank_gib=summary.peak_mem_mb / 1024,
                       estimated_peak_rank_gib=summary.estimated_peak_mem_mb / 1024,
                       estimate_over_measured=summary.estimated_peak_mem_mb / summary.peak_mem_mb,
                       estimate_parts_mb=summary.memory_estimate,
                       epoch_peaks_gib=[r.peak_mem_mb / 1024 for r in records])
            print(f"{'':>9} {strategy:>8} on {workers}: epoch {row['epoch_time_s']:7.2f} s (first "
                  f"{row['first_epoch_s']:.1f}), {row['comm_bytes_per_epoch'] / 2**20:8.1f} MiB/epoch, peak per rank "
                  f"{row['peak_rank_gib']:5.2f} GiB, estimated {row['estimated_peak_rank_gib']:5.2f} "
                  f"({row['estimate_over_measured']:.2f}x)", flush=True)
        step["training"].append(row)
        shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(tmp / "cache", ignore_errors=True)
    return step


def per_edge_costs(step: dict) -> dict:
    """The step's costs per directed edge (seconds, bytes, or bytes of peak per edge a rank holds)."""
    costs = {"generate_s": step["partitions"][4]["generate_s"],
             "partition_s": step["partitions"][4]["partition_s"],
             "partition_peak_bytes": step["partitions"][4]["peak_gib"] * 2**30}
    for row in step["training"]:
        if "failed" in row:
            continue
        name = f"{row['strategy']}{row['workers']}"
        costs[f"{name}_epoch_s"] = row["epoch_time_s"]
        costs[f"{name}_peak_bytes"] = row["peak_rank_gib"] * 2**30 * row["workers"]
        if row["workers"] > 1:
            costs[f"{name}_comm_bytes"] = row["comm_bytes_per_epoch"]
    return {key: value / step["edges"] for key, value in costs.items()}


def plot(steps: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = {"time (s)": "_s", "memory (bytes)": "_bytes"}
    fig, axes = plt.subplots(1, 2, figsize=(13, 6))
    for ax, (title, suffix) in zip(axes, groups.items()):
        keys = [k for k in steps[-1]["per_edge"] if k.endswith(suffix) and not k.endswith("comm_bytes")]
        for key in keys:
            points = [(s["edges"], s["per_edge"][key]) for s in steps if key in s["per_edge"]]
            ax.plot(*zip(*points), marker="o", label=key.removesuffix(suffix))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("directed edges")
        ax.set_ylabel(f"{title} per directed edge")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.suptitle("How each cost grows with the graph, per directed edge: synthetic graphs from "
                 f"{steps[0]['nodes']:,} to {steps[-1]['nodes']:,} nodes, this machine (times on the wall clock)",
                 fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000, PRODUCTS["nodes"]])
    parser.add_argument("--avg-degree", type=float, default=53.5,
                        help="requested average degree (53.5 gives ogbn-products' 124M directed edges at its size)")
    parser.add_argument("--homophily", type=float, default=0.97)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "scale.json")
    parser.add_argument("--plot-only", action="store_true",
                        help="draw results/scale.png again from --out's steps; measure nothing")
    parser.add_argument("--update", action="store_true",
                        help="measure only the steps of --nodes and keep the other steps of --out (each step "
                             "names the commit it was measured on)")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads(args.out.read_text())["steps"], args.out.with_suffix(".png"))
        return
    start = time.perf_counter()
    previous = json.loads(args.out.read_text()) if args.update and args.out.exists() else {"steps": []}
    steps = [{"commit": previous["commit"], **step} for step in previous["steps"] if step["nodes"] not in args.nodes]
    for nodes in args.nodes:
        with tempfile.TemporaryDirectory() as tmp:
            steps.append({**run_step(nodes, args, Path(tmp)), "commit": git_commit()})
        steps[-1]["per_edge"] = per_edge_costs(steps[-1])
        steps.sort(key=lambda step: step["nodes"])
        growth = {k: steps[-1]["per_edge"][k] / steps[0]["per_edge"][k] for k in steps[-1]["per_edge"]
                  if steps[0]["per_edge"].get(k)}
        result = {"commit": git_commit(), "setting": {**vars(args), "out": str(args.out), "model": "sage"},
                  "products": PRODUCTS, "steps": steps, "growth": growth,
                  "estimate_within_25pct": all(abs(row["estimate_over_measured"] - 1) <= 0.25
                                               for s in steps for row in s["training"] if "failed" not in row),
                  "wall_s": time.perf_counter() - start}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        plot(steps, args.out.with_suffix(".png"))
    print("cost per edge, largest step over smallest (target <= 1.3): "
          + ", ".join(f"{k} {v:.2f}" for k, v in growth.items()), flush=True)
    print(f"memory estimates within 25% on every run: {result['estimate_within_25pct']}; wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
