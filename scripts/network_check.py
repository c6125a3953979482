"""The emulated link checked against the kernel-shaped one (``make network-check``, docs/testing.md).

Each row is one strategy (vanilla, pipegcn, adaqp, gnnpipe in two stages, hopgnn) on 2 or 4 ranks over links
of one speed. Each row's job runs ``--repeats`` times under ``network.mode=emulated`` and as
often under ``network.mode=kernel`` at the same bandwidth, interleaved (emulated, kernel,
emulated, ...), so that the machine's load changes both alike. Latency is 0 on both: the kernel
here has no ``netem`` to delay packets (:mod:`gnntrain.comm.namespaces`).

For each repeat it takes the ratio kernel / emulated of the mean epoch time and of the exposed
communication (``mean_comm_time``, both over the steady epochs). It reports the mean of the ratios
with a 95% Student-t interval. A row is within the target where the mean epoch time ratio is
within 15% of 1. The exposed communication is reported beside it, with its own interval: it
shows where the emulator's model of the link (``gnntrain/comm/network.py``) differs from TCP
over a shaped queue. Results go to ``results/network_check.json``.

Needs root and iproute2 (the kernel-shaped network); usage: ``python scripts/network_check.py
[--speeds 0.2 1] [--ranks 2 4] [--repeats 3]``.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from pathlib import Path

from gnntrain.report.runs import Run
from gnntrain.report.stats import interval
from gnntrain.repro.jobs import bench_overrides, bench_parser, bench_setting, describe_bench, git_commit, run_job

RESULTS = Path(__file__).resolve().parents[1] / "results" / "network_check.json"
STRATEGIES = ("vanilla", "pipegcn", "adaqp", "gnnpipe", "hopgnn")
TARGET = 0.15
"""How far the kernel-shaped epoch time may lie from the emulated one."""
OWN = {"gnnpipe": lambda workers: [f"strategy.graph_parallel={max(workers // 2, 1)}"]}
"""A strategy's own overrides on ``workers`` ranks: GNNPipe in two stages (the model's two layers)."""


def figures(run: Run) -> dict:
    return {"epoch_s": run.summary.mean_epoch_time, "exposed_comm_s": run.summary.mean_comm_time}


def ratio_row(pairs: list[tuple[dict, dict]]) -> dict:
    """Per figure: the emulated and kernel values of each repeat, and the ratios' mean and interval."""
    row: dict = {}
    for figure in ("epoch_s", "exposed_comm_s"):
        ratios = [kernel[figure] / emulated[figure] for emulated, kernel in pairs if emulated[figure] > 0]
        mean, half = interval(ratios)
        row[figure] = {"emulated": [e[figure] for e, _ in pairs], "kernel": [k[figure] for _, k in pairs],
                       "ratio_mean": mean, "ratio_ci95": half,
                       "ratio_median": statistics.median(ratios) if ratios else None}
    epoch = row["epoch_s"]["ratio_mean"]
    row["within_target"] = epoch is not None and abs(epoch - 1) <= TARGET
    return row


def main() -> None:
    parser = bench_parser(__doc__, RESULTS, [2, 4], layers=2)
    parser.set_defaults(nodes=10_000, features=64, hidden=64, epochs=6, warmup=2)
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    parser.add_argument("--speeds", nargs="+", type=float, default=[0.2, 1.0], help="link speeds, Gbit/s")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{describe_bench(args)}; emulated against kernel-shaped links, {args.repeats} interleaved repeats",
          flush=True)
    rows, start = [], time.monotonic()
    for strategy, workers, speed in itertools.product(args.strategies, args.workers, args.speeds):
        common = [*bench_overrides(args), f"strategy={strategy}", f"cluster.world_size={workers}",
                  f"network.bandwidth_gbps={speed}", "network.latency_us=0", *OWN.get(strategy, lambda w: [])(workers)]
        pairs = [(figures(run_job([*common, "network.mode=emulated"])), figures(run_job([*common, "network.mode=kernel"])))
                 for _ in range(args.repeats)]
        row = {"strategy": strategy, "workers": workers, "bandwidth_gbps": speed, **ratio_row(pairs)}
        rows.append(row)
        epoch, comm = row["epoch_s"], row["exposed_comm_s"]
        print(f"{strategy:8s} {workers} ranks {speed:g} Gbit/s: epoch kernel/emulated {epoch['ratio_mean']:.3f} "
              f"± {epoch['ratio_ci95'] or 0:.3f} (emulated {statistics.median(epoch['emulated']) * 1e3:.1f} ms), "
              f"exposed comm {comm['ratio_mean'] or float('nan'):.3f} ± {comm['ratio_ci95'] or 0:.3f}"
              f"{'' if row['within_target'] else '  OUTSIDE 15%'}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**bench_setting(args), "commit": git_commit(), "repeats": args.repeats,
                                    "target": TARGET, "latency_us": 0, "wall_s": round(time.monotonic() - start),
                                    "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
