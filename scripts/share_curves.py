"""The share as a curve: each paper's headline speed-up over its baseline at several link speeds.

A table calibrates the link so that the baseline spends the paper's communication share ``s``
of its epoch communicating, and that share fixes what a method can gain: hiding all
communication gives at most ``1 / max(s, 1 - s)``, removing it all ``1 / (1 - s)``. One
calibrated point says little about where the paper's figure sits; so ``make repro-<paper>``
also runs the baseline and the method under links calibrated to each of its shares (:data:`SHARES`
unless :attr:`Curve.shares` says otherwise)
(``curve_<percent>_base`` and ``_method`` sweeps, in the interleaved rounds of every speed
sweep; the method runs under exactly the link its baseline's run of the same round had, so that
each round's ratio compares one link, :func:`link_sources`), and :func:`curve_section` plots the speed-up (median of the rounds, with its 95%
interval) against the share the baseline's runs reached, both bounds, and the paper's own point
(its share and speed-up, each quoted with its source). Where the headline table is calibrated to
one of the curve's shares in its very setting (HopGNN's 0.6), that point reads the headline's
runs (:attr:`Curve.headline`) instead of running them twice.

A share may be out of reach on this machine: where the communication that no bandwidth changes
(latency, waits for slower peers) already takes more of the baseline's epoch, no link gives it
(``gnntrain.calibration``). Such a run fails with that reason; a curve sweep whose runs failed
only so does not stop the build (:func:`failed_errors`), and the curve states the point's reason
instead of a speed-up. Where the waits of a paper's setting put its floor near 0.3, its curve
starts higher; where its all-reduce, which slows with the link too, caps the data share below
0.9, it ends lower (:attr:`Curve.shares`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import mean

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from repro_tables import share, speedup, timed_from  # noqa: E402
from sweep_plan import run_summaries  # noqa: E402

from gnntrain.report import Run, markdown  # noqa: E402

SHARES = (0.3, 0.45, 0.6, 0.75, 0.9)
"""The baseline communication shares the curve's links are calibrated to."""
UNREACHABLE = "is out of reach"
"""What the error of a run says where no link gives its share (``gnntrain.calibration``)."""


@dataclass(frozen=True)
class Curve:
    """One paper's headline comparison, run at each of its :attr:`shares`."""

    setting: tuple[str, ...]
    """Overrides of the setting (the headline table's preset and size)."""
    base: tuple[str, ...]
    """Overrides that make the baseline."""
    method: tuple[str, ...]
    """Overrides that make the method."""
    label: str
    """The method over the baseline, in words."""
    paper_share: float
    paper_speedup: float
    paper_source: str
    """Where the paper's share and speed-up are quoted from."""
    shares: tuple[float, ...] = SHARES
    """The baseline shares its links are calibrated to."""
    headline: tuple[float, str, str] | None = None
    """(share, baseline sweep, method sweep): the headline table's sweeps that are this curve's
    point at that share, overrides and rounds alike; None where the headline's share is none of
    :attr:`shares`."""

    def sweeps_at(self, s: float) -> tuple[str, str]:
        """The baseline's and the method's sweeps at share ``s``."""
        if self.headline is not None and self.headline[0] == s:
            return self.headline[1], self.headline[2]
        return f"curve_{percent(s)}_base", f"curve_{percent(s)}_method"


CURVES: dict[str, Curve] = {
    "pipegcn": Curve(("experiment=pipegcn_table4", "cluster.world_size=2"), ("strategy=vanilla",),
                     ("strategy=pipegcn",), "PipeGCN over vanilla, 2 partitions", 0.6583, 1.91,
                     "Reddit, 2 partitions: share 65.83% (Table 2), speed-up 1.91x (Table 4)"),
    # 4 workers on 2 cores: p=1 waits for its slowest peer ~0.28 of its epoch, so 0.3 lies at its
    # floor; its gradient all-reduce slows with the link as well, so its data share stays under
    # ~0.84 however slow the link (0.83 at 0.0059 Gbit/s, 9 s epochs), and 0.9 is out of reach
    "bns": Curve(("experiment=bns_table4",), ("strategy.p=1",), ("strategy.p=0.1",), "BNS-GCN p=0.1 over p=1",
                 0.67, 3.92, "Reddit: share up to 67% (Fig. 5, Sec. 4.2); speed-up 0.777 / 0.198 s = 3.92x at 8 "
                             "partitions (Table 11, computed here)", shares=(0.35, 0.45, 0.6, 0.7, 0.8)),
    "adaqp": Curve(("experiment=adaqp_table4",), ("strategy=vanilla",),
                   ("strategy=adaqp", "strategy.assign=adaptive", "strategy.bits=2", "strategy.overlap=true"),
                   "AdaQP adaptive over vanilla, 2 workers", 0.6678, 2.27,
                   "Reddit 2M-1D: share 66.78% (Table 1), speed-up 2.27x (Table 4)"),
    # 4 workers on 2 cores: graph parallelism's waits and latency take 324 of its 904 ms epoch at
    # the preset link (0.36), so no link gives 0.3
    "gnnpipe": Curve(("experiment=gnnpipe_table3", "model=gcn"), ("strategy=vanilla",),
                     ("strategy=gnnpipe", "strategy.graph_parallel=1"), "GNNPipe (pipeline) over graph parallelism, GCN",
                     0.665, 2.03, "share 66.5% on average (Fig. 8, Sec. 4.6), speed-up 2.03x on average "
                                  "(geometric mean, Sec. 4.2)", shares=(0.45, 0.55, 0.65, 0.75, 0.9)),
    "hopgnn": Curve(("experiment=hopgnn_fig13", "model=gat"), ("strategy=minibatch",),
                    ("strategy=hopgnn", "strategy.merge=true"), "HopGNN (All) over DGL, GAT", 0.503, 2.14,
                    "GAT on Products: share 50.3% (Sec. 7.2), speed-up up to 2.14x (Fig. 13, Sec. 7.3)",
                    headline=(0.6, "fig13_dgl", "fig13_all")),
}


def percent(s: float) -> int:
    return round(s * 100)


def curve_sweeps(paper: str) -> dict[str, list[str]]:
    """The sweeps of ``paper``'s curve: per share, the baseline's, calibrated to it, and the
    method's, whose link comes from the baseline's (:func:`link_sources`); none at the
    headline's share, whose sweeps the paper's table runs."""
    curve = CURVES[paper]
    sweeps = {}
    for s in curve.shares:
        if curve.headline is not None and curve.headline[0] == s:
            continue
        base, method = curve.sweeps_at(s)
        sweeps[base] = [*curve.setting, f"network.calibrate_share={s}", *curve.base]
        sweeps[method] = [*curve.setting, *curve.method]
    return sweeps


def link_sources(paper: str) -> dict[str, str]:
    """Each curve method sweep and the baseline sweep whose run, in the same round, gives its link."""
    curve = CURVES[paper]
    return dict(reversed(curve.sweeps_at(s)) for s in curve.shares
                if curve.headline is None or curve.headline[0] != s)


def failed_errors(sweep_dir: Path) -> list[str]:
    """The errors of the runs under ``sweep_dir`` that failed (their ``summary.json``)."""
    return [s.get("error") or "no error recorded" for s in run_summaries(sweep_dir) if s.get("status") == "failed"]


def curve_section(paper: str, runs: dict[str, list[Run]], out: Path, runs_root: Path) -> str:
    """The curve's plot (``share_curve.png``) and table, with a line for each share no link
    reached (its runs' reason, read under ``runs_root``); empty where its runs are missing."""
    curve = CURVES[paper]
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
    missed = ("\nShares no link reached (their runs failed calibrating, and the point is left out):\n\n"
              + "\n".join(unreached) + "\n") if unreached else ""
    return (f"## The share as a curve: {curve.label}\n\nThe baseline and the method under links calibrated to "
            f"baseline shares {', '.join(f'{s:.2f}' for s in curve.shares)} (same setting as the headline table, "
            f"epochs {start} on timed, interleaved rounds); the speed-up against the share the baseline's runs "
            f"reached, with both bounds and the paper's point ({curve.paper_source}).\n\n{markdown(rows)}\n"
            f"{missed}![share curve](share_curve.png)\n")


def _plot(curve: Curve, xs: list[float], ratios: list, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    lows = [r.median - (r.bounds[0] if r.bounds else r.median) for r in ratios]
    highs = [(r.bounds[1] if r.bounds else r.median) - r.median for r in ratios]
    ax.errorbar(xs, [r.median for r in ratios], yerr=[lows, highs], marker="o", capsize=3, label="ours (95% interval)")
    grid = [0.2 + i * 0.75 / 100 for i in range(101)]
    ax.plot(grid, [1 / max(s, 1 - s) for s in grid], "--", label="hide all: 1/max(s, 1-s)")
    ax.plot(grid, [1 / (1 - s) for s in grid], ":", label="remove all: 1/(1-s)")
    ax.plot([curve.paper_share], [curve.paper_speedup], "*", markersize=13, label="the paper")
    ax.set_ylim(0.5, max(4.5, curve.paper_speedup * 1.2))
    ax.set_xlabel("baseline communication share s")
    ax.set_ylabel("speed-up over the baseline")
    ax.set_title(curve.label, fontsize="medium")
    ax.legend(fontsize="small", loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
