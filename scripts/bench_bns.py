"""Benchmark: BNS-GCN at p in {1, 0.1, 0.01, 0}, and its edge-sampling baselines, side by side
on the same graph and partitions (BNS-GCN Tables 9 and 12, Fig. 6 in shape).

Every run trains the same GraphSAGE on the same synthetic graph with the same METIS partition
(computed once, cached). Printed per run: epoch time and the speed relative to p = 1,
exposed communication, halo bytes per epoch and their ratio to p = 1, the keep-mask bytes
(``sample_index``), peak memory (the slowest rank; on CPU the per-epoch peak RSS of the
process) and the sampling time as a share of the epoch time.

Results go to ``results/bench_bns.json``. Usage: ``python scripts/bench_bns.py [--workers 4] ...``.
"""

from __future__ import annotations

from pathlib import Path

from gnntrain.engine.summary import RunSummary
from gnntrain.repro.jobs import bench_parser, compare_figures, epoch_figures, sweep, write_results

RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench_bns.json"
RUNS = [("bns", 1.0), ("bns", 0.1), ("bns", 0.01), ("bns", 0.0), ("bes", 0.1), ("dropedge", 0.1)]


def row_of(name: str, summary: RunSummary) -> dict:
    method, p = name.split()
    extra = summary.mean_strategy_metrics
    return {"strategy": method, "p": float(p), **epoch_figures(summary),
            "sample_index_bytes_per_epoch": summary.mean_comm_bytes_by_kind.get("sample_index", 0),
            "peak_mem_mb": summary.peak_mem_mb,
            "sampling_share": extra.get("sampling_time", 0.0) / summary.mean_epoch_time,
            "dropped_edges": extra.get("dropped_edges", 0.0),
            "partition": summary.partition}


def line_of(row: dict, base: dict) -> str:
    return (f"{row['strategy']:8s} p={row['p']:<5} {compare_figures(row, base, 'p=1')}, masks "
            f"{row['sample_index_bytes_per_epoch'] / 2**10:.1f} KB, peak mem {row['peak_mem_mb']:.0f} MiB "
            f"({row['peak_mem_mb'] / base['peak_mem_mb']:.2f}x p=1), sampling {100 * row['sampling_share']:.1f}% "
            f"of the epoch, {row['dropped_edges']:.0f} edges dropped")


def main() -> None:
    args = bench_parser(__doc__, RESULTS, workers=4).parse_args()
    runs = {f"{method} {p}": [f"cluster.world_size={args.workers}", f"strategy={method}", f"strategy.p={p}"]
            for method, p in RUNS}
    write_results(args, sweep(args, runs, row_of, line_of), workers=args.workers)


if __name__ == "__main__":
    main()
