"""Convergence of PipeGCN and its smoothed variants against vanilla (PipeGCN paper, Table 4 /
Fig. 4 in shape): the same model, epochs, partitions and seeds; test accuracy at the best
validation epoch, mean over seeds, and each variant's difference from vanilla in points.

Results go to ``results/pipegcn_convergence.json``.
Usage: ``python scripts/pipegcn_convergence.py [--datasets cora synthetic] [--seeds 0 1 2]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from jobs import run_job

RESULTS = Path(__file__).resolve().parents[1] / "results" / "pipegcn_convergence.json"
VARIANTS = {"vanilla": ["strategy=vanilla"], "pipegcn": ["strategy=pipegcn"],
            "pipegcn-g": ["strategy=pipegcn", "strategy.smooth=g"],
            "pipegcn-f": ["strategy=pipegcn", "strategy.smooth=f"],
            "pipegcn-gf": ["strategy=pipegcn", "strategy.smooth=gf"]}
DATASETS = {"cora": ["dataset=cora", "train.epochs=200", "train.weight_decay=5e-4"],
            "synthetic": ["dataset=synthetic", "train.epochs=100"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--model", nargs="*", default=["model=sage", "model.hidden=64", "model.norm=layer"])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = {"model": args.model, "workers": args.workers, "seeds": args.seeds, "datasets": {}}
    for dataset in args.datasets:
        scores = {}
        for name, overrides in VARIANTS.items():
            scores[name] = [run_job([*DATASETS[dataset], *args.model, *overrides, f"seed={seed}",
                                     f"cluster.world_size={args.workers}"])["test_at_best_val"]
                            for seed in args.seeds]
        base = statistics.mean(scores["vanilla"])
        table = {name: {"test_at_best_val": s, "mean": statistics.mean(s),
                        "points_vs_vanilla": 100 * (statistics.mean(s) - base)} for name, s in scores.items()}
        result["datasets"][dataset] = table
        for name, row in table.items():
            print(f"{dataset:10s} {name:11s} test {row['mean']:.4f} ({', '.join(f'{x:.3f}' for x in row['test_at_best_val'])}) "
                  f"{row['points_vs_vanilla']:+.2f} points vs vanilla", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
