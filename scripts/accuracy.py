"""Accuracy of a method's variants against its baseline (PipeGCN Table 4 / Fig. 4, BNS-GCN
Tables 4 and 9, AdaQP Tables 4 and 6 in shape): the same model, epochs, partitions and seeds; test accuracy at the
best validation epoch, mean over seeds, and each variant's difference from the baseline (the
first variant) in points; each run's mean strategy metrics (e.g. AdaQP's mean bit-width, BNS's
sampling time) are kept beside its score.

Results go to ``results/accuracy_<study>.json``.
Usage: ``python scripts/accuracy.py pipegcn|bns|adaqp [--datasets cora synthetic] [--seeds 0 1 2]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from gnntrain.repro.jobs import run_job

RESULTS = Path(__file__).resolve().parents[1] / "results"
STUDIES = {
    "pipegcn": {"vanilla": ["strategy=vanilla"], "pipegcn": ["strategy=pipegcn"],
                "pipegcn-g": ["strategy=pipegcn", "strategy.smooth=g"],
                "pipegcn-f": ["strategy=pipegcn", "strategy.smooth=f"],
                "pipegcn-gf": ["strategy=pipegcn", "strategy.smooth=gf"]},
    "bns": {"bns p=1": ["strategy=bns", "strategy.p=1"], "bns p=0.1": ["strategy=bns", "strategy.p=0.1"],
            "bns p=0.01": ["strategy=bns", "strategy.p=0.01"], "bns p=0": ["strategy=bns", "strategy.p=0"],
            "bes p=0.1": ["strategy=bes", "strategy.p=0.1"], "dropedge p=0.1": ["strategy=dropedge", "strategy.p=0.1"]},
    "adaqp": {"vanilla": ["strategy=vanilla"], "adaqp adaptive": ["strategy=adaqp"],
              "adaqp uniform": ["strategy=adaqp", "strategy.assign=uniform"],
              "adaqp 2-bit": ["strategy=adaqp", "strategy.assign=fixed", "strategy.bits=2"],
              "pipegcn 4-bit": ["strategy=pipegcn", "strategy.bits=4"]},
}
DATASETS = {"cora": ["dataset=cora", "train.epochs=200", "train.weight_decay=5e-4"],
            "synthetic": ["dataset=synthetic", "train.epochs=100"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=list(STUDIES))
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", help="a subset of the study's variants (the first is the baseline)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--model", nargs="*", default=["model=sage", "model.hidden=64", "model.norm=layer"])
    parser.add_argument("--extra", nargs="*", default=[], help="overrides added to every run")
    parser.add_argument("--out", type=Path, help="default: results/accuracy_<study>.json")
    args = parser.parse_args()
    variants = STUDIES[args.study]
    if args.variants:
        unknown = sorted(set(args.variants) - set(variants))
        if unknown:
            parser.error(f"unknown variants {unknown}; valid: {', '.join(variants)}")
        variants = {name: variants[name] for name in args.variants}
    out = args.out or RESULTS / f"accuracy_{args.study}.json"
    result = {"model": args.model, "extra": args.extra, "workers": args.workers, "seeds": args.seeds, "datasets": {}}
    for dataset in args.datasets:
        summaries = {name: [run_job([*DATASETS[dataset], *args.model, *overrides, *args.extra, f"seed={seed}",
                                     f"cluster.world_size={args.workers}"]).summary for seed in args.seeds]
                     for name, overrides in variants.items()}
        scores = {name: [s.test_at_best_val for s in runs] for name, runs in summaries.items()}
        base = statistics.mean(next(iter(scores.values())))
        table = {name: {"test_at_best_val": s, "mean": statistics.mean(s),
                        "points_vs_baseline": 100 * (statistics.mean(s) - base),
                        "strategy_metrics": [run.mean_strategy_metrics for run in summaries[name]]}
                 for name, s in scores.items()}
        result["datasets"][dataset] = table
        for name, row in table.items():
            print(f"{dataset:10s} {name:15s} test {row['mean']:.4f} ({', '.join(f'{x:.3f}' for x in row['test_at_best_val'])}) "
                  f"{row['points_vs_baseline']:+.2f} points", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
