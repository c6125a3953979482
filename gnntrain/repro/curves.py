"""The share as a curve: each paper's headline speed-up over its baseline at several link speeds.

A table calibrates the link so that the baseline spends the paper's communication share ``s``
of its epoch communicating, and that share fixes what a method can gain: hiding all
communication gives at most ``1 / max(s, 1 - s)``, removing it all ``1 / (1 - s)``. One
calibrated point says little about where the paper's figure sits; so ``make repro-<paper>``
also runs the baseline and the method under links calibrated to each of its shares (:data:`SHARES`
unless :attr:`Curve.shares` says otherwise, :mod:`gnntrain.repro.paper`)
(``curve_<percent>_base`` and ``_method`` sweeps, in the interleaved rounds of every speed
sweep; the method runs under exactly the link its baseline's run of the same round had, so that
each round's ratio compares one link, :func:`link_sources`), and :func:`curve_section` plots the speed-up (median of the rounds, with its 95%
interval) against the share the baseline's runs reached, both bounds, and the paper's own point
(its share and speed-up, each quoted with its source). Where the headline table is calibrated to
one of the curve's shares in its very setting (HopGNN's 0.6), that point reads the headline's
runs (:attr:`Curve.headline`) instead of running them twice.

A share may be out of reach on this machine: where the communication that no bandwidth changes
(latency, waits for slower peers) already takes more of the baseline's epoch, no link gives it
(``gnntrain.job.calibration``). Such a run fails with that reason; a curve sweep whose runs failed
only so does not stop the build (:func:`failed_errors`), and the curve states the point's reason
instead of a speed-up. Where the waits of a paper's setting put its floor near 0.3, its curve
starts higher; where its all-reduce, which slows with the link too, caps the data share below
0.9, it ends lower (:attr:`Curve.shares`).
"""

from __future__ import annotations

from pathlib import Path
from statistics import mean

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gnntrain.report import markdown  # noqa: E402
from gnntrain.report.runs import Run  # noqa: E402
from gnntrain.repro.paper import Curve  # noqa: E402
from gnntrain.repro.plan import run_summaries  # noqa: E402
from gnntrain.repro.tables import share, speedup, timed_from  # noqa: E402

UNREACHABLE = "is out of reach"
"""What the error of a run says where no link gives its share (``gnntrain.job.calibration``)."""


def curve_sweeps(curve: Curve) -> dict[str, list[str]]:
    """The sweeps of a paper's ``curve``: per share, the baseline's, calibrated to it, and the
    method's, whose link comes from the baseline's (:func:`link_sources`); none at the
    headline's share, whose sweeps the paper's table runs."""
    sweeps = {}
    for s in curve.shares:
        if curve.headline is not None and curve.headline[0] == s:
            continue
        base, method = curve.sweeps_at(s)
        sweeps[base] = [*curve.setting, f"network.calibrate_share={s}", *curve.base]
        sweeps[method] = [*curve.setting, *curve.method]
    return sweeps


def link_sources(curve: Curve) -> dict[str, str]:
    """Each curve method sweep and the baseline sweep whose run, in the same round, gives its link."""
    return dict(reversed(curve.sweeps_at(s)) for s in curve.shares
                if curve.headline is None or curve.headline[0] != s)


def failed_errors(sweep_dir: Path) -> list[str]:
    """The errors of the runs under ``sweep_dir`` that failed (their ``summary.json``)."""
    return [s.error or "no error recorded" for s in run_summaries(sweep_dir) if s.status == "failed"]


def curve_section(curve: Curve, runs: dict[str, list[Run]], out: Path, runs_root: Path) -> str:
    """The curve's plot (``share_curve.png``) and table, with a line for each share no link
    reached (its runs' reason, read under ``runs_root``); empty where its runs are missing."""
    points, unreached = [], []
    for s in curve.shares:
        names = curve.sweeps_at(s)
        base, method = (runs.get(name, []) for name in names)
        if base and method:
            points.append((s, base, method))
        errors = [e for name in names if (runs_root / name).is_dir() for e in failed_errors(runs_root / name)
                  if UNREACHABLE in e]
        if errors:
            unreached.append(f"- {s:.2f}: out of reach for {len(errors)} of the point's runs on this machine: "
                             f"{errors[0]}")
    if not points:
        return ""
    start = timed_from([r for _, base, method in points for r in base + method])
    rows, xs, ratios = [], [], []
    for s, base, method in points:
        reached = mean(share(r) for r in base)
        ratio = speedup(base, method, start)
        xs.append(reached)
        ratios.append(ratio)
        rows.append({"calibrated to": f"{s:.2f}", "baseline share reached": f"{reached:.2f}",
                     "speed-up": str(ratio), "hide-all bound 1/max(s,1-s)": f"{1 / max(reached, 1 - reached):.2f}x",
                     "remove-all bound 1/(1-s)": f"{1 / (1 - reached):.2f}x"})
    _plot(curve, xs, ratios, out / "share_curve.png")
    point = "the paper's point" if curve.paper_speedup is not None else "no point of the paper's"
    missed = ("\nShares no link reached (their runs failed calibrating, and the point is left out):\n\n"
              + "\n".join(unreached) + "\n") if unreached else ""
    return (f"## The share as a curve: {curve.label}\n\nThe baseline and the method under links calibrated to "
            f"baseline shares {', '.join(f'{s:.2f}' for s in curve.shares)} (same setting as the headline table, "
            f"epochs {start} on timed, interleaved rounds); the speed-up against the share the baseline's runs "
            f"reached, with both bounds and {point} ({curve.paper_source}).\n\n{markdown(rows)}\n"
            f"{missed}![share curve](share_curve.png)\n")


def _plot(curve: Curve, xs: list[float], ratios: list, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    lows = [r.median - (r.bounds[0] if r.bounds else r.median) for r in ratios]
    highs = [(r.bounds[1] if r.bounds else r.median) - r.median for r in ratios]
    ax.errorbar(xs, [r.median for r in ratios], yerr=[lows, highs], marker="o", capsize=3, label="ours (95% interval)")
    grid = [0.2 + i * 0.75 / 100 for i in range(101)]
    ax.plot(grid, [1 / max(s, 1 - s) for s in grid], "--", label="hide all: 1/max(s, 1-s)")
    ax.plot(grid, [1 / (1 - s) for s in grid], ":", label="remove all: 1/(1-s)")
    if curve.paper_speedup is not None:
        ax.plot([curve.paper_share], [curve.paper_speedup], "*", markersize=13, label="the paper")
    highest = max([curve.paper_speedup or 0.0, *(r.median + high for r, high in zip(ratios, highs))])
    ax.set_ylim(0.5, max(4.5, highest * 1.2))
    ax.set_xlabel("baseline communication share s")
    ax.set_ylabel("speed-up over the baseline")
    ax.set_title(curve.label, fontsize="medium")
    ax.legend(fontsize="small", loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
