"""Benchmark: vanilla vs AdaQP (fixed 2/4/8 bits, uniform, adaptive; with and without the
central/marginal overlap), side by side on the same graph and partitions (AdaQP Tables 4-5 in
shape).

Every run trains the same GraphSAGE on the same synthetic graph with the same METIS partition
(computed once, cached). Printed per run: epoch time and its ratio to vanilla, halo bytes per
epoch and their ratio to vanilla, the mean bit-width, and for the adaptive run (reassigning
every ``--period`` epochs) the assignment time as a share of the run's epoch time. The overlap
rows (``+overlap``) compute central nodes while the halo is in flight; "32-bit" and "32-bit
+overlap" are vanilla's math through AdaQP's exchange without and with that schedule, so their
ratio is what the overlap saves.

Results go to ``results/bench_adaqp.json``. Usage: ``python scripts/bench_adaqp.py [--workers 4] ...``.
"""

from __future__ import annotations

from pathlib import Path

from gnntrain.engine.summary import RunSummary
from gnntrain.repro.jobs import bench_parser, compare_figures, epoch_figures, sweep, write_results

RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench_adaqp.json"


def row_of(name: str, summary: RunSummary) -> dict:
    extra = summary.mean_strategy_metrics
    if name == "vanilla":
        stats = summary.partition
        print(f"marginal nodes (inner nodes with a remote in-neighbour): "
              f"{sum(stats['marginal_nodes']) / sum(stats['inner_nodes']):.1%} of all", flush=True)
    return {"run": name, **epoch_figures(summary),
            "mean_bits": extra.get("mean_bits", 32.0),
            "assign_share": extra.get("assign_time", 0.0) / summary.mean_epoch_time,
            "test_at_best_val": summary.test_at_best_val}


def line_of(row: dict, base: dict) -> str:
    return (f"{row['run']:23s} {compare_figures(row, base, 'vanilla')}, mean "
            f"{row['mean_bits']:.2f} bits, assignment {100 * row['assign_share']:.1f}% of the epoch time")


def main() -> None:
    parser = bench_parser(__doc__, RESULTS, workers=4)
    parser.add_argument("--period", type=int, default=4, help="reassignment period of the adaptive run")
    args = parser.parse_args()
    runs = {"vanilla": ["strategy=vanilla"],
            **{f"adaqp {b}-bit": ["strategy=adaqp", "strategy.assign=fixed", f"strategy.bits={b}"] for b in (32, 2, 4, 8)},
            "adaqp uniform": ["strategy=adaqp", "strategy.assign=uniform"],
            "adaqp adaptive": ["strategy=adaqp", f"strategy.period={args.period}"],
            **{f"adaqp {b}-bit +overlap": ["strategy=adaqp", "strategy.assign=fixed", f"strategy.bits={b}",
                                           "strategy.overlap=true"] for b in (32, 2)},
            "adaqp adaptive +overlap": ["strategy=adaqp", f"strategy.period={args.period}", "strategy.overlap=true"]}
    runs = {name: [f"cluster.world_size={args.workers}", *overrides] for name, overrides in runs.items()}
    rows = sweep(args, runs, row_of, line_of)
    by_name = {row["run"]: row for row in rows}
    for plain in ("adaqp 32-bit", "adaqp 2-bit", "adaqp adaptive"):
        plain_row, overlapped = by_name[plain], by_name[f"{plain} +overlap"]
        print(f"overlap saves ({plain}): {_training_time(plain_row) / _training_time(overlapped):.2f}x speed "
              f"(assignment time left out), exposed comm {overlapped['exposed_comm_s'] / plain_row['exposed_comm_s']:.2f}x",
              flush=True)
    write_results(args, rows, workers=args.workers, period=args.period)


def _training_time(row: dict) -> float:
    """A run's epoch time without its bit-assignment share."""
    return row["epoch_time_s"] * (1.0 - row["assign_share"])


if __name__ == "__main__":
    main()
