"""Benchmark: vanilla vs PipeGCN, side by side on the same graph and partitions.

For each worker count, both strategies train the same GraphSAGE on the same synthetic graph
(the METIS partition is computed once and cached, so both use the same parts). Printed per
run: epochs per second and exposed communication (seconds per epoch spent waiting on halo
exchanges) beside the exchanges' total in-flight time and bytes; then per worker count the
ratios PipeGCN / vanilla of throughput and of exposed communication.

Results go to ``results/bench_pipegcn.json``. Usage: ``python scripts/bench_pipegcn.py [--workers 2 4] ...``.
"""

from __future__ import annotations

from pathlib import Path

from gnntrain.engine.summary import RunSummary
from gnntrain.repro.jobs import bench_parser, sweep, write_results

RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench_pipegcn.json"
STRATEGIES = ("vanilla", "pipegcn")


def row_of(name: str, summary: RunSummary) -> dict:
    strategy, workers = name.split()
    return {"strategy": strategy, "workers": int(workers), "partition": summary.partition,
            "epochs_per_s": 1.0 / summary.mean_epoch_time,
            "exposed_comm_s": summary.mean_comm_time,
            "comm_total_s": summary.mean_comm_total_time,
            "comm_bytes_per_epoch": summary.mean_comm_bytes_per_epoch,
            "test_at_best_val": summary.test_at_best_val}


def line_of(row: dict, base: dict) -> str:
    return (f"{row['workers']} workers, {row['strategy']:8s} {row['epochs_per_s']:.2f} epochs/s (exposed comm "
            f"{row['exposed_comm_s'] * 1e3:.1f} ms of {row['comm_total_s'] * 1e3:.1f} ms in flight), "
            f"{row['comm_bytes_per_epoch'] / 2**20:.1f} MiB/epoch")


def main() -> None:
    args = bench_parser(__doc__, RESULTS, workers=[2, 4]).parse_args()
    runs = {f"{s} {w}": [f"strategy={s}", f"cluster.world_size={w}"] for w in args.workers for s in STRATEGIES}
    rows = sweep(args, runs, row_of, line_of)
    pairs = []
    for vanilla, pipegcn in zip(rows[::2], rows[1::2]):
        pair = {"workers": vanilla["workers"], "partition": vanilla.pop("partition"),
                "throughput_ratio": pipegcn["epochs_per_s"] / vanilla["epochs_per_s"],
                "exposed_comm_ratio": pipegcn["exposed_comm_s"] / vanilla["exposed_comm_s"]}
        pipegcn.pop("partition")
        pairs.append({**pair, "vanilla": vanilla, "pipegcn": pipegcn})
        print(f"{pair['workers']} workers: throughput ratio {pair['throughput_ratio']:.2f}, exposed-comm ratio "
              f"{pair['exposed_comm_ratio']:.3f} (pipegcn / vanilla)", flush=True)
    write_results(args, pairs)


if __name__ == "__main__":
    main()
