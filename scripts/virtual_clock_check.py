"""The virtual clock validated (``make virtual-check``, docs/testing.md): four checks, each against
its own reference, results in ``results/virtual_clock.json`` (written after every section).

* ``uncontended``: 2 ranks x 1 thread on this 2-core host, no emulated network: where the host
  does not get in the way, the virtual epoch should be the wall-clock epoch (within 10%), for
  every registered strategy. The virtual run's links are ideal (no time), the wall run pays the
  loopback transport (its exposed time is reported beside), so the rows also give the ratio of
  the compute alone (the virtual run's measured, the wall run's epoch less its exposed time),
  and of the virtual run's compute with the CPU time of its communication calls (which the wall
  run's compute includes and virtual time leaves out) to the wall run's compute.
* ``contended``: 4 ranks on 2 cores: each rank's virtual compute (its thread's CPU time) against
  the same rank's compute with the host to itself (``cluster.virtual_compute=alone``: the ranks
  take turns, one computing at a time), within 10%, for vanilla, pipegcn, bns, adaqp, gnnpipe and
  hopgnn. Beside it, against the thread CPU time of the turn-taking run's compute: where the
  two differ, the rank holding the host was not running for the difference (the other ranks'
  communication threads had its core).
* ``tcp``: the 2-rank rows of ``make network-check`` under the virtual clock against TCP over
  kernel-shaped links of the same rate (``network.mode=kernel``, wall clock), epoch times within
  10%. Needs root and iproute2; skipped (and said so) without them.
* ``bns_p0``: BNS-GCN with p=0 moves no halo row: its exposed transfer time should be the
  gradient all-reduce's link time alone (bytes on the wire over the bandwidth plus its latencies),
  within 10%; what it waits besides for the slower rank to reach the all-reduce (imbalance) is
  given apart.

Every pair of runs is repeated ``--repeats`` times, interleaved (reference, virtual, reference,
...), and each row gives the mean of the per-repeat ratios with a 95% Student-t interval; every
figure names its clock.

Usage: ``python scripts/virtual_clock_check.py [--sections uncontended contended tcp bns_p0]
[--repeats 3]``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import time
from pathlib import Path

from gnntrain.report.runs import Run
from gnntrain.report.stats import interval
from gnntrain.repro.jobs import bench_overrides, bench_parser, bench_setting, describe_bench, git_commit, run_job
from gnntrain.strategies import METHODS

RESULTS = Path(__file__).resolve().parents[1] / "results" / "virtual_clock.json"
TARGET = 0.10
CONTENDED = ("vanilla", "pipegcn", "bns", "adaqp", "gnnpipe", "hopgnn")
TCP = ("vanilla", "pipegcn", "adaqp", "gnnpipe", "hopgnn")
OWN = {"gnnpipe": lambda workers: [f"strategy.graph_parallel={max(workers // 2, 1)}"],
       "bns": lambda workers: ["strategy.p=0.1"],
       "adaqp": lambda workers: ["strategy.assign=fixed", "strategy.bits=4"],
       "hopgnn": lambda workers: ["strategy.merge=false"]}
"""A strategy's own overrides on ``workers`` ranks: GNNPipe in two stages (as ``make network-check``
runs it), BNS-GCN at its paper's p=0.1. AdaQP (its widths from profiled link speeds) and HopGNN
(its merge count from timed iterations) decide on timings, which differ between the two clocks
of a pair: fixed 4-bit widths and no merging here, so both runs of a pair do the same work."""
SECTIONS = ("uncontended", "contended", "tcp", "bns_p0")


def steady(run: Run, figure: str) -> list[float]:
    """Per rank, the mean of a ``per_rank`` figure over the run's steady epochs."""
    records = [r for r in run.records if r.epoch > run.summary.warmup_epochs_excluded]
    return [statistics.fmean(r.per_rank[figure][rank] for r in records) for rank in range(run.summary.world_size)]


def ratio(values: list[float]) -> dict:
    mean, half = interval(values)
    return {"ratios": values, "mean": mean, "ci95": half,
            "within_target": mean is not None and abs(mean - 1) <= TARGET}


def line(name: str, row: dict, what: str) -> str:
    r = row["ratio"]
    flag = "" if r["within_target"] else "  OUTSIDE 10%"
    return f"{name:34s} {what} {r['mean']:.3f} ± {r['ci95'] or 0:.3f}{flag}"


def paired(common: list[str], reference: list[str], virtual: list[str], repeats: int) -> list[tuple[Run, Run]]:
    """``repeats`` interleaved pairs of runs (reference, virtual) on top of ``common``."""
    return [(run_job([*common, *reference]), run_job([*common, *virtual])) for _ in range(repeats)]


def uncontended(args, base: list[str]) -> list[dict]:
    rows = []
    for strategy in args.strategies or sorted(METHODS):
        common = [*base, f"strategy={strategy}", "cluster.world_size=2", "cluster.threads_per_worker=1",
                  *OWN.get(strategy, lambda w: [])(2)]
        pairs = paired(common, [], ["cluster.clock=virtual"], args.repeats)
        row = {"strategy": strategy, "wall_epoch_s": [w.summary.mean_epoch_time for w, _ in pairs],
               "virtual_epoch_s": [v.summary.mean_epoch_time for _, v in pairs],
               "wall_exposed_s": [w.summary.mean_epoch_time - w.summary.mean_compute_time for w, _ in pairs],
               "ratio": ratio([v.summary.mean_epoch_time / w.summary.mean_epoch_time for w, v in pairs]),
               "compute_ratio": ratio([v.summary.mean_compute_time / w.summary.mean_compute_time for w, v in pairs]),
               "virtual_call_s": [statistics.fmean(steady(v, "comm_call_time")) for _, v in pairs]}
        row["compute_and_calls_ratio"] = ratio([(v.summary.mean_compute_time + calls) / w.summary.mean_compute_time
                                                for (w, v), calls in zip(pairs, row["virtual_call_s"])])
        rows.append(row)
        print(line(f"uncontended {strategy}", row, "virtual/wall epoch") +
              f"; compute {row['compute_ratio']['mean']:.3f} ± {row['compute_ratio']['ci95'] or 0:.3f}"
              f", with the calls {row['compute_and_calls_ratio']['mean']:.3f}; wall exposed "
              f"{statistics.fmean(row['wall_exposed_s']) * 1e3:.1f} ms of "
              f"{statistics.fmean(row['wall_epoch_s']) * 1e3:.1f}", flush=True)
    return rows


def contended(args, base: list[str]) -> list[dict]:
    rows = []
    for strategy in args.strategies or CONTENDED:
        common = [*base, f"strategy={strategy}", "cluster.world_size=4", "cluster.clock=virtual",
                  *OWN.get(strategy, lambda w: [])(4)]
        pairs = paired(common, ["cluster.virtual_compute=alone"], [], args.repeats)
        per_rank = [[t / a for t, a in zip(steady(thread, "compute_time"), steady(alone, "compute_time"))]
                    for alone, thread in pairs]
        row = {"strategy": strategy, "alone_compute_s": [steady(a, "compute_time") for a, _ in pairs],
               "alone_compute_cpu_s": [steady(a, "compute_cpu_time") for a, _ in pairs],
               "thread_compute_s": [steady(t, "compute_time") for _, t in pairs],
               "per_rank_ratio": [ratio([repeat[rank] for repeat in per_rank]) for rank in range(4)],
               "ratio": ratio([x for repeat in per_rank for x in repeat]),
               "cpu_ratio": ratio([t / a for alone, thread in pairs for t, a in
                                   zip(steady(thread, "compute_time"), steady(alone, "compute_cpu_time"))])}
        row["within_target"] = all(r["within_target"] for r in row["per_rank_ratio"])
        rows.append(row)
        worst = max(row["per_rank_ratio"], key=lambda r: abs(r["mean"] - 1))
        print(line(f"contended {strategy}", row, "thread/alone compute, all ranks") +
              f"; worst rank {worst['mean']:.3f}; thread/alone's own CPU time {row['cpu_ratio']['mean']:.3f}",
              flush=True)
    return rows


def tcp(args, base: list[str]) -> list[dict] | str:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return "skipped: needs root and iproute2 (network namespaces)"
    rows = []
    for strategy in args.strategies or TCP:
        for speed in args.speeds:
            common = [*base, f"strategy={strategy}", "cluster.world_size=2", f"network.bandwidth_gbps={speed}",
                      "network.latency_us=0", *OWN.get(strategy, lambda w: [])(2)]
            pairs = paired(common, ["network.mode=kernel"], ["cluster.clock=virtual"], args.repeats)
            row = {"strategy": strategy, "bandwidth_gbps": speed,
                   "kernel_wall_epoch_s": [k.summary.mean_epoch_time for k, _ in pairs],
                   "virtual_epoch_s": [v.summary.mean_epoch_time for _, v in pairs],
                   "ratio": ratio([v.summary.mean_epoch_time / k.summary.mean_epoch_time for k, v in pairs])}
            rows.append(row)
            print(line(f"tcp {strategy} {speed:g} Gbit/s", row, "virtual/kernel epoch"), flush=True)
    return rows


def bns_p0(args, base: list[str]) -> list[dict]:
    common = [*base, "strategy=bns", "strategy.p=0", "cluster.world_size=2", "cluster.clock=virtual",
              "network=eth10g", f"network.bandwidth_gbps={min(args.speeds)}"]
    runs = [run_job(common) for _ in range(args.repeats)]
    parts = [{name: sum(getattr(r.summary, f"mean_comm_{name}_time_by_category").values()) for name in ("wait", "transfer")}
             for r in runs]
    link = [r.summary.mean_link_busy_time_by_category["sync"] + r.summary.mean_link_latency_time for r in runs]
    row = {"halo_bytes": [r.summary.mean_comm_bytes_by_kind.get("halo_fwd", 0) for r in runs],
           "exposed_s": [p["wait"] + p["transfer"] for p in parts], "wait_s": [p["wait"] for p in parts],
           "transfer_s": [p["transfer"] for p in parts], "allreduce_link_s": link,
           "ratio": ratio([p["transfer"] / t for p, t in zip(parts, link)])}
    print(line("bns p=0", row, "exposed transfer/all-reduce link time") +
          f"; waiting for the slower rank besides: {statistics.fmean(row['wait_s']) * 1e3:.2f} ms", flush=True)
    return [row]


def main() -> None:
    parser = bench_parser(__doc__, RESULTS, 2, layers=2)
    parser.set_defaults(nodes=10_000, features=64, hidden=64, epochs=6, warmup=2)
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--speeds", nargs="+", type=float, default=[0.2, 1.0], help="tcp's link speeds, Gbit/s")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--strategies", nargs="+", default=None, help="only these (default: each section's own)")
    args = parser.parse_args()
    base = bench_overrides(args)
    print(f"{describe_bench(args)}; {args.repeats} interleaved repeats per row", flush=True)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.update({**bench_setting(args), "repeats": args.repeats, "target": TARGET})
    results.pop("commit", None)
    for section in args.sections:
        start = time.monotonic()
        rows = globals()[section](args, base)
        results[section] = {"rows": rows, "commit": git_commit(), "wall_s": round(time.monotonic() - start)}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"{section}: {results[section]['wall_s']} s; wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
