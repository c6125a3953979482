"""Benchmark: vanilla vs PipeGCN, side by side on the same graph and partitions.

For each worker count, both strategies train the same GraphSAGE on the same synthetic graph
(the METIS partition is computed once and cached, so both use the same parts). Printed per
worker count: epochs per second of each and their ratio (throughput, PipeGCN / vanilla), and
the exposed communication (seconds per epoch spent waiting on halo exchanges) of each and its
ratio (PipeGCN / vanilla), beside the exchanges' total in-flight time and bytes.

Results go to ``results/bench_pipegcn.json``. Usage: ``python scripts/bench_pipegcn.py [--workers 2 4] ...``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from jobs import add_bench_args, bench_overrides, bench_setting, describe_bench, run_job

RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench_pipegcn.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_bench_args(parser)
    parser.add_argument("--workers", nargs="+", type=int, default=[2, 4])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    common = bench_overrides(args)
    print(f"{describe_bench(args)}; {torch.get_num_threads()} threads in this process", flush=True)
    rows = []
    for workers in args.workers:
        runs = {s: run_job([*common, f"strategy={s}", f"cluster.world_size={workers}"]) for s in ("vanilla", "pipegcn")}
        row = {"workers": workers, "partition": runs["vanilla"]["partition"]}
        for strategy, summary in runs.items():
            row[strategy] = {"epochs_per_s": 1.0 / summary["mean_epoch_time"],
                             "exposed_comm_s": summary["mean_comm_time"],
                             "comm_total_s": summary["mean_comm_total_time"],
                             "comm_bytes_per_epoch": summary["mean_comm_bytes_per_epoch"],
                             "test_at_best_val": summary["test_at_best_val"]}
        v, p = row["vanilla"], row["pipegcn"]
        row["throughput_ratio"] = p["epochs_per_s"] / v["epochs_per_s"]
        row["exposed_comm_ratio"] = p["exposed_comm_s"] / v["exposed_comm_s"]
        rows.append(row)
        print(f"{workers} workers: vanilla {v['epochs_per_s']:.2f} epochs/s (exposed comm "
              f"{v['exposed_comm_s'] * 1e3:.1f} ms of {v['comm_total_s'] * 1e3:.1f} ms in flight), pipegcn "
              f"{p['epochs_per_s']:.2f} epochs/s (exposed {p['exposed_comm_s'] * 1e3:.1f} ms of "
              f"{p['comm_total_s'] * 1e3:.1f} ms); throughput ratio {row['throughput_ratio']:.2f}, exposed-comm "
              f"ratio {row['exposed_comm_ratio']:.3f}; {v['comm_bytes_per_epoch'] / 2**20:.1f} vs "
              f"{p['comm_bytes_per_epoch'] / 2**20:.1f} MB/epoch", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**bench_setting(args), "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
