"""Benchmark: BNS-GCN at p in {1, 0.1, 0.01, 0}, and its edge-sampling baselines, side by side
on the same graph and partitions (BNS-GCN Tables 9 and 12, Fig. 6 in shape).

Every run trains the same GraphSAGE on the same synthetic graph with the same METIS partition
(computed once, cached). Printed per run: epoch time and its ratio to p = 1, halo bytes per
epoch and their ratio to p = 1, the keep-mask bytes (``sample_index``), peak memory (the
slowest rank; on CPU the per-epoch peak RSS of the process) and the sampling time as a share
of the epoch time.

Results go to ``results/bench_bns.json``. Usage: ``python scripts/bench_bns.py [--workers 4] ...``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from jobs import add_bench_args, bench_overrides, bench_setting, describe_bench, run_job

RESULTS = Path(__file__).resolve().parents[1] / "results" / "bench_bns.json"
RUNS = [("bns", 1.0), ("bns", 0.1), ("bns", 0.01), ("bns", 0.0), ("bes", 0.1), ("dropedge", 0.1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_bench_args(parser)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    common = [*bench_overrides(args), f"cluster.world_size={args.workers}"]
    print(f"{describe_bench(args)}; {args.workers} workers; {torch.get_num_threads()} threads in this process",
          flush=True)
    rows = []
    for method, p in RUNS:
        summary = run_job([*common, f"strategy={method}", f"strategy.p={p}"])
        by_kind = summary["mean_comm_bytes_by_kind"]
        rows.append({"strategy": method, "p": p,
                     "epoch_time_s": summary["mean_epoch_time"],
                     "exposed_comm_s": summary["mean_comm_time"],
                     "halo_bytes_per_epoch": by_kind.get("halo_fwd", 0) + by_kind.get("halo_bwd", 0),
                     "sample_index_bytes_per_epoch": by_kind.get("sample_index", 0),
                     "peak_mem_mb": summary["peak_mem_mb"],
                     "sampling_share": summary["mean_strategy_metrics"].get("sampling_time", 0.0)
                     / summary["mean_epoch_time"],
                     "dropped_edges": summary["mean_strategy_metrics"].get("dropped_edges", 0.0),
                     "partition": summary["partition"]})
        base, row = rows[0], rows[-1]
        print(f"{method:8s} p={p:<5} epoch {row['epoch_time_s'] * 1e3:7.1f} ms "
              f"({row['epoch_time_s'] / base['epoch_time_s']:.2f}x p=1), halo "
              f"{row['halo_bytes_per_epoch'] / 2**20:7.2f} MB/epoch "
              f"({row['halo_bytes_per_epoch'] / base['halo_bytes_per_epoch']:.3f}x p=1), masks "
              f"{row['sample_index_bytes_per_epoch'] / 2**10:.1f} KB, peak mem {row['peak_mem_mb']:.0f} MB "
              f"({row['peak_mem_mb'] / base['peak_mem_mb']:.2f}x p=1), sampling {100 * row['sampling_share']:.1f}% "
              f"of the epoch, {row['dropped_edges']:.0f} edges dropped", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**bench_setting(args), "workers": args.workers, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
