"""The virtual clock validated on measured cluster descriptions (``make virtual-check``,
docs/testing.md): five checks, each against its own reference, results in
``results/virtual_clock.json`` (written after every section).

The descriptions are ``make measure-links``' (``conf/network/measured_*.yaml``: bandwidth, latency
and the host's per-message cost ``o``, measured over torch.distributed by ping-pong and streams,
committed before this runs; nothing here is fitted to it).

* ``uncontended``: 2 ranks x 1 thread on this 2-core host, every strategy: the virtual clock on
  the measured loopback (``network=measured_loopback``) against the wall clock on the loopback
  itself (``network=none``).
* ``contended``: 4 ranks on 2 cores, every strategy, on the measured loopback: each rank's
  compute as its thread's CPU time (``cluster.virtual_compute=thread``) against the same ranks
  taking turns with the host (``alone``); the tables run there.
* ``tcp``: 2 ranks at 0.2 and 1 Gbit/s, the rows of vanilla, PipeGCN, AdaQP, GNNPipe and HopGNN:
  the virtual clock on the measured description of the link (``network=measured_tcp_*``) against
  real TCP over the kernel-shaped link (``network.mode=kernel``, wall clock). Needs root and
  iproute2; skipped (and said so) without them.
* ``two_level``: vanilla on 2 nodes x 2 ranks (``gpus_per_node=2``, 1 Gbit/s between the nodes,
  the nodes' loopback within), likewise.
* ``busy``: vanilla's virtual epoch (2 ranks, measured loopback) alone against beside two busy
  processes spinning on this host's cores, within 3%.
* ``host``: what a message costs this host when its cores are busy, as they are while ranks
  compute: the loopback's half round trip (``gnntrain-measure-link``'s ping-pong) idle and beside
  two spinning processes, interleaved. Not a check of the model and not fed to it: a measurement
  of the cause the wall-clock references carry and the descriptions, measured idle, do not.

Every pair of runs is repeated, interleaved (reference, virtual, reference, ...); a row gives
the mean of the per-repeat ratios (virtual / reference epoch) with its 95% Student-t interval.
A row is decided where the interval's half-width is under :data:`HALF_WIDTH` of the mean: met
where the mean is within its target (:data:`TARGET`, 10%; ``busy`` 3%), missed where not; more
repeats run (to ``--max-repeats``) while it is not decided, and a row still not decided is
``undecided``. A row that misses names its cause: of the epoch's difference, the part in compute
and the part in exposed communication (each run's own accounting), the larger named. Every figure
names its clock.

Usage: ``python scripts/virtual_clock_check.py [--sections ...] [--repeats 3] [--max-repeats 8]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Callable

from gnntrain.job import api
from gnntrain.report.runs import Run
from gnntrain.report.stats import interval
from gnntrain.repro.jobs import bench_overrides, bench_parser, bench_setting, describe_bench, git_commit, run_job
from gnntrain.strategies import METHODS
from gnntrain.timing.cluster import Topology
from gnntrain.timing.links import ring_completion

RESULTS = Path(__file__).resolve().parents[1] / "results" / "virtual_clock.json"
TARGET = 0.10
BUSY_TARGET = 0.03
HALF_WIDTH = 0.05
TCP = ("vanilla", "pipegcn", "adaqp", "gnnpipe", "hopgnn")
LINKS = {0.2: "measured_tcp_0g2", 1.0: "measured_tcp_1g"}
LOOPBACK = "network=measured_loopback"
OWN = {"gnnpipe": lambda workers: [f"strategy.graph_parallel={max(workers // 2, 1)}"],
       "bns": lambda workers: ["strategy.p=0.1"],
       "adaqp": lambda workers: ["strategy.assign=fixed", "strategy.bits=4"],
       "hopgnn": lambda workers: ["strategy.merge=false"]}
"""A strategy's own overrides on ``workers`` ranks: GNNPipe in two stages, BNS-GCN at its paper's
p=0.1. AdaQP (its widths from profiled link speeds) and HopGNN (its merge count from timed
iterations) decide on timings, which differ between the two clocks of a pair: fixed 4-bit widths
and no merging here, so both runs of a pair do the same work."""
SECTIONS = ("uncontended", "contended", "tcp", "two_level", "busy", "host")


def own(strategy: str, workers: int) -> list[str]:
    return [f"strategy={strategy}", *OWN.get(strategy, lambda w: [])(workers)]


def figures(run: Run) -> dict:
    """A run's mean epoch, compute and exposed communication, in all and per kind (its clock's,
    its own accounting)."""
    s = run.summary
    kinds = sorted(set(s.mean_comm_wait_time_by_kind) | set(s.mean_comm_transfer_time_by_kind))
    return {"epoch_s": s.mean_epoch_time, "compute_s": s.mean_compute_time,
            "exposed_s": s.mean_epoch_time - s.mean_compute_time, "clock": s.clock,
            "exposed_by_kind_s": {k: s.mean_comm_wait_time_by_kind.get(k, 0.0) + s.mean_comm_transfer_time_by_kind.get(k, 0.0)
                                  for k in kinds}}


def verdict(ratios: list[float], target: float) -> dict:
    mean, half = interval(ratios)
    decided = half is not None and half < HALF_WIDTH * mean
    state = ("met" if abs(mean - 1) <= target else "missed") if decided else "undecided"
    return {"ratios": ratios, "mean": mean, "ci95": half, "target": target, "verdict": state}


def settled(reference: Callable[[], Run], measured: Callable[[], Run], args, target: float = TARGET) -> dict:
    """Interleaved pairs (reference, measured) until the ratio of their epochs is decided or
    ``--max-repeats`` pairs ran; the row, with the cause of a miss."""
    pairs: list[tuple[dict, dict]] = []
    while True:
        pairs.append((figures(reference()), figures(measured())))
        ratios = [m["epoch_s"] / r["epoch_s"] for r, m in pairs]
        row = verdict(ratios, target)
        if len(pairs) >= args.repeats and (row["verdict"] != "undecided" or len(pairs) >= args.max_repeats):
            break
    row["reference"] = [r for r, _ in pairs]
    row["virtual"] = [m for _, m in pairs]
    if row["verdict"] != "met":
        terms = {part: statistics.fmean(m[f"{part}_s"] - r[f"{part}_s"] for r, m in pairs)
                 for part in ("compute", "exposed")}
        cause = max(terms, key=lambda t: abs(terms[t]))
        kinds = sorted({k for r, m in pairs for k in (*r["exposed_by_kind_s"], *m["exposed_by_kind_s"])})
        by_kind = {k: statistics.fmean(m["exposed_by_kind_s"].get(k, 0.0) - r["exposed_by_kind_s"].get(k, 0.0)
                                       for r, m in pairs) for k in kinds}
        said = (f"{'compute' if cause == 'compute' else 'exposed communication'} {terms[cause] * 1e3:+.2f} ms of "
                f"the epoch's {sum(terms.values()) * 1e3:+.2f} ms (virtual less reference)")
        if cause == "exposed" and by_kind:
            kind = max(by_kind, key=lambda k: abs(by_kind[k]))
            said += f", most of it {kind} {by_kind[kind] * 1e3:+.2f} ms"
        row["cause"] = {"difference_s": terms, "exposed_by_kind_difference_s": by_kind, "larger": cause,
                        "said": said}
    return row


def line(name: str, row: dict) -> str:
    said = f"  {row['verdict'].upper()}" + (f": {row['cause']['said']}" if "cause" in row else "")
    return (f"{name:34s} virtual/{row['reference'][0]['clock']} epoch {row['mean']:.3f} ± {row['ci95'] or 0:.3f} "
            f"({len(row['ratios'])} pairs){'' if row['verdict'] == 'met' else said}")


def uncontended(args, base: list[str]) -> list[dict]:
    rows = []
    for strategy in args.strategies or sorted(METHODS):
        common = [*base, *own(strategy, 2), "cluster.world_size=2", "cluster.threads_per_worker=1"]
        row = {"strategy": strategy, **settled(lambda: run_job([*common, "network=none"]),
                                                lambda: run_job([*common, LOOPBACK]), args)}
        rows.append(row)
        print(line(f"uncontended {strategy}", row), flush=True)
    return rows


def contended(args, base: list[str]) -> list[dict]:
    rows = []
    for strategy in args.strategies or sorted(METHODS):
        common = [*base, *own(strategy, 4), "cluster.world_size=4", LOOPBACK]
        row = {"strategy": strategy, **settled(lambda: run_job([*common, "cluster.virtual_compute=alone"]),
                                                lambda: run_job([*common, "cluster.virtual_compute=thread"]), args)}
        rows.append(row)
        print(line(f"contended {strategy}", row), flush=True)
    return rows


def kernel_available() -> bool:
    return os.geteuid() == 0 and all(shutil.which(p) for p in ("ip", "tc", "unshare", "nsenter"))


def tcp(args, base: list[str]) -> list[dict] | str:
    if not kernel_available():
        return "skipped: needs root and iproute2 (network namespaces)"
    rows = []
    for strategy in args.strategies or TCP:
        for speed, preset in LINKS.items():
            common = [*base, *own(strategy, 2), "cluster.world_size=2"]
            kernel = [*common, "network.mode=kernel", f"network.bandwidth_gbps={speed}", "network.latency_us=0"]
            row = {"strategy": strategy, "bandwidth_gbps": speed, "description": preset,
                   **settled(lambda: run_job(kernel), lambda: run_job([*common, f"network={preset}"]), args)}
            rows.append(row)
            print(line(f"tcp {strategy} {speed:g} Gbit/s", row), flush=True)
    return rows


def two_level(args, base: list[str]) -> list[dict] | str:
    if not kernel_available():
        return "skipped: needs root and iproute2 (network namespaces)"
    common = [*base, "strategy=vanilla", "cluster.world_size=4"]
    kernel = [*common, "network.mode=kernel", "network.bandwidth_gbps=1", "network.latency_us=0",
              "network.gpus_per_node=2"]
    row = {"strategy": "vanilla", "nodes": 2, "ranks_per_node": 2, "bandwidth_gbps": 1.0,
           "description": "measured_tcp_two_level",
           **settled(lambda: run_job(kernel), lambda: run_job([*common, "network=measured_tcp_two_level"]), args)}
    print(line("two-level vanilla 2 x 2", row), flush=True)
    return [row]


def busy(args, base: list[str]) -> list[dict]:
    """Two processes spinning beside a virtual run (2 ranks on 2 cores: each core shared)."""
    common = [*base, "strategy=vanilla", "cluster.world_size=2", LOOPBACK]

    row = {"strategy": "vanilla", "spinners": 2,
           **settled(lambda: run_job(common), lambda: spinning(lambda: run_job(common)), args, BUSY_TARGET)}
    print(line("busy vanilla beside 2 spinners", row), flush=True)
    return [row]


def spinning(work: Callable[[], object], processes: int = 2):
    """``work()`` beside ``processes`` processes spinning on this host's cores."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        return work()
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def host(args, base: list[str]) -> list[dict]:
    """The loopback's half round trip of 64-byte messages idle and beside two spinners (median of
    2000 round trips each, ``--repeats`` interleaved pairs); and gloo's all-reduce of 100 KB and
    1 MB over it between two idle ranks against the ring the measured loopback describes."""
    from gnntrain.commands.measure_link import _measured

    settings = argparse.Namespace(rounds=2000, streams=3, seconds=0.1)
    link = ["network=none", "cluster.world_size=2", "cluster.threads_per_worker=1"]
    idle, loaded = [], []
    for _ in range(args.repeats):
        idle.append(_measured(link, settings)[1]["inter"]["half_round_trip_s"])
        loaded.append(spinning(lambda: _measured(link, settings)[1]["inter"]["half_round_trip_s"]))
    row = {"idle_half_round_trip_s": idle, "loaded_half_round_trip_s": loaded,
           "ratio": statistics.fmean(loaded) / statistics.fmean(idle)}
    print(f"host: loopback half round trip idle {statistics.fmean(idle) * 1e6:.0f} us, beside two spinners "
          f"{statistics.fmean(loaded) * 1e6:.0f} us ({row['ratio']:.1f}x; wall clock)", flush=True)
    rows = [row]
    topology = Topology.of(api.check(api.compose([LOOPBACK])).network)
    with tempfile.TemporaryDirectory() as folder:
        api.run(api.check(api.compose([*link, "dataset.num_nodes=64"], run_dir=folder)),
                partial(all_reduces, sizes=ALL_REDUCE_BYTES))
        measured = json.loads((Path(folder) / "all_reduce.json").read_text())
    for nbytes in ALL_REDUCE_BYTES:
        model = ring_completion(topology, "inter", 2, [topology.occupancy("inter", nbytes)])
        rows.append({"all_reduce_bytes": nbytes, "gloo_s": measured[str(nbytes)], "model_s": model,
                     "ratio": measured[str(nbytes)] / model})
        print(f"host: gloo all-reduce of {nbytes / 1e3:.0f} KB on 2 idle ranks {measured[str(nbytes)] * 1e3:.3f} ms "
              f"(median of 50, wall clock) against {model * 1e3:.3f} ms the measured loopback's ring", flush=True)
    return rows


ALL_REDUCE_BYTES = (100_000, 1_000_000)


def all_reduces(run, ctx, job, *, sizes: tuple[int, ...]) -> None:
    """Each rank: all-reduces of ``sizes`` bytes after a barrier each; rank 0 writes the medians."""
    import torch
    import torch.distributed as dist

    medians = {}
    for nbytes in sizes:
        t, times = torch.ones(nbytes // 4), []
        for i in range(60):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            times.append(time.perf_counter() - start)
        medians[str(nbytes)] = statistics.median(times[10:])
    if ctx.rank == 0:
        (Path(run.run_dir) / "all_reduce.json").write_text(json.dumps(medians))


def main() -> None:
    parser = bench_parser(__doc__, RESULTS, 2, layers=2)
    parser.set_defaults(nodes=10_000, features=64, hidden=64, epochs=20, warmup=2)
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-repeats", type=int, default=8)
    parser.add_argument("--strategies", nargs="+", default=None, help="only these (default: each section's own)")
    args = parser.parse_args()
    base = bench_overrides(args)
    print(f"{describe_bench(args)}; at least {args.repeats} interleaved pairs per row, at most {args.max_repeats}",
          flush=True)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results = {k: v for k, v in results.items() if k in SECTIONS}
    results.update({**bench_setting(args), "repeats": args.repeats, "max_repeats": args.max_repeats,
                    "target": TARGET, "busy_target": BUSY_TARGET, "half_width": HALF_WIDTH})
    for section in args.sections:
        start = time.monotonic()
        rows = globals()[section](args, base)
        results[section] = {"rows": rows, "commit": git_commit(), "wall_s": round(time.monotonic() - start)}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"{section}: {results[section]['wall_s']} s; wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
