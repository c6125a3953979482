"""What ``gnntrain-replay`` (:mod:`gnntrain.commands.replay`) does with its parsed arguments: the
run's trace read and checked, timed under each network asked for, printed, plotted and written."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from gnntrain.commands.replay import bandwidths
from gnntrain.timing.cluster import at_bandwidth, describe, label
from gnntrain.errors import GnntrainError, command_errors
from gnntrain.job.api import network_of
from gnntrain.report.traced import Traced
from gnntrain.timing import trace
from gnntrain.data.phases import phase
from gnntrain.storage.files import figure_format, save_figure, write_atomically


def sweep(run: Traced, overrides: list[str], points: np.ndarray, baseline: Traced | None) -> list[dict]:
    """The run (and the baseline) replayed at each bandwidth of ``points`` (Gbit/s, every level
    scaled alike where the network has two: the intra-node link keeps its ratio to the other)."""
    rows = []
    base_net = network_of(run.summary.network, overrides)
    with phase(f"replay {run.summary.strategy} at {len(points)} bandwidths", total=len(points)) as shown:
        for gbps in points:
            rows.append(_point(run, base_net, float(gbps), baseline))
            shown.advance()
    return rows


def _point(run: Traced, base_net, gbps: float, baseline: Traced | None) -> dict:
    """The run (and the baseline) replayed at ``gbps``."""
    network = at_bandwidth(base_net, gbps)
    epoch = run.steady(run.under(network))
    row = {"bandwidth_gbps": gbps, "epoch_s": epoch.epoch_time, "comm_share": epoch.share(),
           "exposed_share": epoch.exposed_time / epoch.epoch_time if epoch.epoch_time > 0 else 0.0}
    if baseline is not None:
        base = baseline.steady(baseline.under(network)).epoch_time
        row.update(baseline_epoch_s=base, speedup=base / row["epoch_s"])
    return row


def _plot(rows: list[dict], run: Traced, baseline: Traced | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (times, shares) = plt.subplots(1, 2, figsize=(10, 4))
    x = [r["bandwidth_gbps"] for r in rows]
    times.plot(x, [r["epoch_s"] * 1e3 for r in rows], marker=".", label=run.summary.strategy)
    if baseline is not None:
        times.plot(x, [r["baseline_epoch_s"] * 1e3 for r in rows], marker=".", label=baseline.summary.strategy)
    times.set(xscale="log", yscale="log", xlabel="link bandwidth (Gbit/s)", ylabel="epoch (ms, virtual clock)")
    times.legend()
    shares.plot(x, [r["comm_share"] for r in rows], marker=".", label="halo exchanges (data): the papers' share")
    shares.plot(x, [r["exposed_share"] for r in rows], marker=".", linestyle="--",
                label="all training communication, waiting included")
    shares.set(xscale="log", xlabel="link bandwidth (Gbit/s)", ylabel=f"{run.summary.strategy}: exposed share of epoch",
               ylim=(0, 1))
    shares.legend(fontsize="small")
    against = f" against {baseline.summary.strategy}" if baseline is not None else ""
    fig.suptitle(f"{run.summary.strategy}{against} replayed across bandwidths\n{run.summary.dataset} "
                 f"({run.summary.num_nodes:,} nodes), {run.summary.model}, {run.summary.world_size} workers, virtual "
                 "clock", fontsize="medium")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def replay(args: argparse.Namespace) -> None:
    """Replay the run ``args`` names and print (plot, write) its figures."""
    with command_errors("gnntrain-replay"):
        bad = [o for o in args.overrides if o.split("=", 1)[0].lstrip("+~") != "network"
               and not o.lstrip("+~").startswith("network.")]
        if bad:
            raise GnntrainError(f"override {bad[0]}: replay changes the network only; valid: network=<preset> and "
                                "network.<key>=<value>")
        real = [o for o in args.overrides if o.split("=", 1)[0] in ("network.mode", "network.calibrate_share",
                                                                    "network.calibrate_against", "network.loss")]
        if real:
            raise GnntrainError(f"override {real[0]}: replay times a trace on a described cluster; valid: "
                                "network=<preset> and the link keys (network.bandwidth_gbps, latency_us, "
                                "send_overhead_us, recv_overhead_us, gpus_per_node, intra_*)")
        alone = [name for name, value in (("--plot", args.plot), ("--baseline", args.baseline)) if value is not None]
        if alone and args.bandwidths is None:
            raise GnntrainError(f"{alone[0]} draws or compares a bandwidth sweep; valid: with --bandwidths LO:HI:N")
        if args.plot is not None:
            figure_format(args.plot)
        run = Traced(args.run)
        if args.chrome is not None:
            write_atomically(args.chrome, json.dumps(trace.chrome(run.ranks)))
            print(f"trace for Perfetto or chrome://tracing: {args.chrome}")
        if args.bandwidths is None:
            network = network_of(run.summary.network, args.overrides)
            as_run = run.steady(run.under(network_of(run.summary.network, [])))
            replayed = run.steady(run.under(network))
            figures = {"run": as_run.to_dict(), "replayed": replayed.to_dict()}
            print(f"{run.run_dir} ({run.summary.strategy}, virtual clock)")
            print(f"  as run,   {label(run.summary.network)}: {as_run.breakdown()}")
            print(f"  replayed, {label(describe(network))}: {replayed.breakdown()}")
            phases = trace.phase_times(run.ranks)
            if phases:
                print("  compute by phase (ms per epoch, mean over ranks; every epoch the trace holds): "
                      + ", ".join(f"{name} {seconds * 1e3:.2f}" for name, seconds in phases.items()))
                figures["compute_by_phase_s"] = phases
        else:
            baseline = Traced(args.baseline) if args.baseline is not None else None
            rows = sweep(run, args.overrides, bandwidths(args.bandwidths), baseline)
            figures = {"sweep": rows}
            versus = f"  speed-up over {baseline.summary.strategy}" if baseline else ""
            print(f"{'Gbit/s':>9}  {'epoch ms':>9}  {'comm share':>10}  {'exposed share':>13}{versus}")
            for row in rows:
                extra = f"  {row['speedup']:>{len(versus) - 2}.3f}" if baseline else ""
                print(f"{row['bandwidth_gbps']:>9.4g}  {row['epoch_s'] * 1e3:>9.3f}  {row['comm_share']:>10.3f}  "
                      f"{row['exposed_share']:>13.3f}{extra}")
            if args.plot is not None:
                _plot(rows, run, baseline, args.plot)
                print(f"plot: {args.plot}")
        if args.json is not None:
            write_atomically(args.json, json.dumps(figures, indent=1))

