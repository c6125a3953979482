"""Benchmark: the peak memory of a rank that loads only its part (``gnntrain-partition``) against
one process that holds the whole graph, on a synthetic graph of millions of nodes.

The graph is generated once and saved as a dataset file (``dataset.source=file``), so every job
loads it from disk as a user's graph is loaded. Each step is its own ``gnntrain`` process tree,
measured as its largest process (the peak RSS ``wait4`` reports for the tree):

1. ``gnntrain-partition`` into ``--parts`` parts (METIS): its time and peak, also per directed
   edge, which is what bounds the graphs one METIS call can partition here;
2. vanilla on 1 worker holding the whole graph (the single-process peak);
3. vanilla on ``--parts`` workers, each loading its part file (the per-rank peak);
4. vanilla on ``--parts`` workers carving their parts from the whole graph, as before per-part
   loading existed (its losses must equal step 3's).

Results go to ``results/bench_parted.json``. Usage: ``python scripts/bench_parted.py [--nodes N] ...``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

from gnntrain.data.synthetic import generate
from gnntrain.engine.summary import RunSummary
from gnntrain.repro.jobs import measured_process

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def measured(command: list[str], cwd: Path) -> tuple[float, float]:
    """Run ``command``; its wall time (s) and the peak RSS (MiB) of its largest process."""
    result = measured_process(command, cwd)
    if result.returncode != 0:
        raise SystemExit(f"bench_parted: {' '.join(command)} failed with exit code {result.returncode}:\n"
                         f"{result.output[-2000:]}")
    return result.wall_s, result.peak_mb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2_000_000)
    parser.add_argument("--avg-degree", type=float, default=10.0)
    parser.add_argument("--features", type=int, default=64)
    parser.add_argument("--classes", type=int, default=16)
    parser.add_argument("--homophily", type=float, default=0.97)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "bench_parted.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        start = time.perf_counter()
        data = generate(args.nodes, args.avg_degree, args.classes, args.features, args.homophily)
        graph_file = tmp / "graph.pt"
        torch.save({"x": data.x, "y": data.y, "edge_index": data.edge_index, "train_mask": data.train_mask,
                    "val_mask": data.val_mask, "test_mask": data.test_mask}, graph_file)
        graph = {"nodes": data.num_nodes, "edges": data.num_edges, "features": args.features,
                 "classes": args.classes, "homophily": args.homophily,
                 "file_mb": graph_file.stat().st_size / 2**20}
        del data
        print(f"graph: {graph['nodes']} nodes, {graph['edges']} directed edges, {args.features} features "
              f"({graph['file_mb']:.0f} MiB file), generated in {time.perf_counter() - start:.0f} s", flush=True)

        common = ["dataset=synthetic", "dataset.source=file", f"dataset.file={graph_file}", "dataset.name=bench",
                  f"partition.cache_dir={tmp / 'cache'}", "model=sage", f"model.hidden={args.hidden}",
                  f"train.epochs={args.epochs}", f"train.eval_every={args.epochs}", "train.warmup_epochs=0"]
        parted = [f"partition.dir={tmp / 'parted'}"]
        steps: dict[str, dict] = {}

        def step(name: str, command: list[str]) -> dict:
            run_dir = tmp / "runs" / name.replace(" ", "_").replace(",", "")
            wall, peak = measured([*command, f"hydra.run.dir={run_dir}"], tmp)
            records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()] \
                if (run_dir / "metrics.jsonl").exists() else []
            steps[name] = {"wall_s": wall, "peak_rss_mb": peak, "losses": [r["loss"] for r in records]}
            if (run_dir / "summary.json").exists():
                stats = RunSummary.read(run_dir).partition
                steps[name]["partition"] = {k: stats[k] for k in ("inner_nodes", "boundary_nodes",
                                                                  "replication_factor")}
            print(f"{name:28s} {wall:7.1f} s, largest process {peak:8.0f} MiB", flush=True)
            return steps[name]

        partition = step("partition", [str(BIN / "gnntrain-partition"), *common, *parted,
                                        f"partition.parts={args.parts}"])
        partition["bytes_per_edge"] = partition["peak_rss_mb"] * 2**20 / graph["edges"]
        whole = step("whole graph, 1 worker", [str(BIN / "gnntrain"), *common, "cluster.world_size=1"])
        parts = step(f"parts, {args.parts} workers", [str(BIN / "gnntrain"), *common, *parted,
                                                     f"cluster.world_size={args.parts}"])
        carved = step(f"carved, {args.parts} workers", [str(BIN / "gnntrain"), *common,
                                                       f"cluster.world_size={args.parts}"])
        shutil.rmtree(tmp / "runs")

    ratio = parts["peak_rss_mb"] / whole["peak_rss_mb"]
    same = parts["losses"] == carved["losses"]
    print(f"replication factor of the {args.parts} parts: {parts['partition']['replication_factor']:.3f}", flush=True)
    print(f"per-rank peak with {args.parts} parts / single-process peak: {ratio:.3f} (target <= 0.35); "
          f"carving from the whole graph instead: {carved['peak_rss_mb'] / whole['peak_rss_mb']:.3f}; "
          f"METIS: {partition['bytes_per_edge']:.0f} bytes per directed edge at peak; "
          f"losses of part loading and carving identical: {same}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"graph": graph, "model": {"name": "sage", "hidden": args.hidden, "layers": 2},
                                    "parts": args.parts, "epochs": args.epochs, "steps": steps,
                                    "per_rank_over_single": ratio, "identical_losses": same}, indent=2) + "\n")
    print(f"wrote {args.out}")
    if not same:
        raise SystemExit("bench_parted: ranks loading their parts trained differently from ranks carving them")


if __name__ == "__main__":
    main()
