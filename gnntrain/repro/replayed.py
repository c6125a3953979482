"""The share as a dense curve, replayed from one trace per method.

Each paper's curve (:class:`~gnntrain.repro.paper.Curve`) reads its baseline's and its
method's runs in the headline's own speed sweeps (:attr:`~gnntrain.repro.paper.Curve.traced`),
which on the virtual clock run with ``cluster.trace=true`` (:data:`TRACING`) in every round; the
method's runs under its round's baseline link (the same sweep, or one that trusts the link its
round's baseline sweep checked: :attr:`~gnntrain.repro.paper.Paper.trusting`), so that a method
deciding on timings, AdaQP's widths and HopGNN's merges, decides as the headline's does, and the
curve costs no run of its own. Each round's two traces are then timed again
(:mod:`gnntrain.timing.replay`) under that link at :data:`POINTS` bandwidths, the first round's,
log-spaced between the one where its baseline's share is :data:`HIGHEST_SHARE` (or within
:data:`MARGIN` of the most any bandwidth gives it) and the one where it is within :data:`MARGIN`
of the least any bandwidth leaves it (latency and the waits for slower peers, which no bandwidth
removes). At each: the baseline's share ``s`` and three bounds (means over the rounds) and the speed-up (the
median of the rounds' ratios with its 95% interval, as every speed figure), the bounds from the
baseline's replayed accounting (:mod:`gnntrain.repro.accounting`): hiding all data traffic
``1 / max(s, 1 - s)``; the same with the all-reduce on the link, serial to compute,
``T / (T - min(C, D))``; removing all data traffic ``1 / (1 - s)``.

At the paper's share (where the curve spans it) the table gives our speed-up and bounds there
(interpolated between the two nearest points) beside the paper's. A method is held to the bound
of what it does (:attr:`~gnntrain.repro.paper.Curve.removes`): hiding (PipeGCN's stale
exchanges) or removing (BNS-GCN's sampling, AdaQP's quantizing, GNNPipe's stage activations in
place of halos, HopGNN's model migration in place of feature fetching). Where the paper's speed-up is above that
bound at its own share, doing so alone cannot give it: the table says so, and gives the
measured parts of both replayed epochs there, so that a reader sees where the difference lies;
where ours is above it, the table gives both methods' compute, which the bounds take to be equal.
"""

from __future__ import annotations

import textwrap

from dataclasses import dataclass
from pathlib import Path
from statistics import mean

import numpy as np

from gnntrain.errors import GnntrainError
from gnntrain.job.api import compose, network_of
from gnntrain.report.traced import Traced
from gnntrain.timing.cluster import at_bandwidth
from gnntrain.report import markdown
from gnntrain.timing.epoch import EpochTiming
from gnntrain.report.stats import Ratio
from gnntrain.repro.accounting import hide_all_bound, shared_link_bound
from gnntrain.repro.paper import Curve
from gnntrain.repro.plan import expand
from gnntrain.storage.files import save_figure

POINTS = 24
"""Bandwidths a curve is replayed at."""
HIGHEST_SHARE = 0.95
"""The baseline share at the curve's slowest link, where the baseline reaches it."""
MARGIN = 0.01
"""How close the curve's ends come to the least and the most share any bandwidth gives the
baseline (the all-reduce, which slows with the link too, caps the data's share below 1)."""
SLOWEST, FASTEST = 1e-6, 1e5
"""The bandwidths (Gbit/s) the search for the curve's ends spans."""
TRACING = "cluster.trace=true"
"""The override that traces the runs of a curve's sweeps (on the virtual clock)."""


def traced_jobs(curve: Curve, sweeps: dict[str, list[str]]) -> tuple[int, int]:
    """The index of the baseline's job in its traced sweep and of the method's in its own
    (:attr:`Curve.traced`): in each, the one job whose config composes as the curve's setting with
    that side's overrides does."""
    found = []
    for sweep, side in zip(curve.traced, (curve.base, curve.method)):
        wanted = compose([*curve.setting, *side])
        jobs = [i for i, job in enumerate(expand(sweeps[sweep])) if compose(job) == wanted]
        if len(jobs) != 1:
            raise GnntrainError(f"{curve.label}: {len(jobs)} jobs of sweep {sweep} compose as "
                                f"{' '.join([*curve.setting, *side])}; a curve's side needs exactly one")
        found.append(jobs[0])
    return found[0], found[1]


SEPARATE = ("curve_trace_base", "curve_trace_method")
"""The curve's own traced sweeps (baseline, method), one job each, in the committed runs of the
tables built before the curve read the headline's runs; their tables still rebuild from them."""


def traced_runs(curve: Curve, sweeps: dict[str, list[str]], runs_root: Path, rounds: int) -> list[tuple[Path, Path]]:
    """Each round's run folders of the curve's baseline and method under ``runs_root``: those of
    :data:`SEPARATE` where the headline's runs have no trace and the runs have them."""
    base, method = traced_jobs(curve, sweeps)
    own = [(runs_root / curve.traced[0] / f"repeat{r}" / str(base),
            runs_root / curve.traced[1] / f"repeat{r}" / str(method)) for r in range(rounds)]
    if not (own[0][0] / "trace.jsonl").is_file() and (runs_root / SEPARATE[0]).is_dir():
        return [(runs_root / SEPARATE[0] / f"repeat{r}" / "0", runs_root / SEPARATE[1] / f"repeat{r}" / "0")
                for r in range(rounds)]
    return own


@dataclass(frozen=True)
class Parts:
    """One replayed run's steady epoch under one link: its time and the means over ranks of its
    compute and exposed data, all-reduce (``sync``) and ``control`` time."""

    epoch: float
    compute: float
    data: float
    allreduce: float
    other: float

    @classmethod
    def of(cls, run: Traced, epochs: list[EpochTiming]) -> Parts:
        mean = run.steady(epochs)
        return cls(mean.epoch_time, mean.compute_time, mean.exposed("data"), mean.exposed("sync"),
                   mean.exposed("control"))

    @property
    def share(self) -> float:
        return self.data / self.epoch

    @property
    def shared_link_bound(self) -> float:
        return shared_link_bound(self.epoch, self.compute, self.data)


@dataclass(frozen=True)
class Point:
    bandwidth_gbps: float
    base: Parts
    method: Parts

    @property
    def speedup(self) -> float:
        return self.base.epoch / self.method.epoch

    @property
    def hide_all_bound(self) -> float:
        return hide_all_bound(self.base.share)

    @property
    def remove_all_bound(self) -> float:
        return 1 / (1 - self.base.share)


def applicable_bound(curve: Curve, point: RoundsPoint) -> float:
    """The bound the curve's method is held to at ``point``: removing all communication where it
    removes it, else the lower of the two hiding bounds."""
    if curve.removes:
        return point.bound("remove_all_bound")
    return min(point.bound("hide_all_bound"), point.bound("shared_link_bound"))


@dataclass(frozen=True)
class RoundsPoint:
    """One bandwidth of the curve over the rounds: each round's :class:`Point`."""

    rounds: list[Point]

    @property
    def bandwidth_gbps(self) -> float:
        return self.rounds[0].bandwidth_gbps

    @property
    def share(self) -> float:
        return mean(p.base.share for p in self.rounds)

    @property
    def speedup(self) -> Ratio:
        return Ratio([p.speedup for p in self.rounds])

    def bound(self, name: str) -> float:
        """The mean over the rounds of bound ``name`` (``hide_all_bound``, ``remove_all_bound``,
        ``shared_link_bound``, the last the baseline's)."""
        return mean(getattr(p.base if name == "shared_link_bound" else p, name) for p in self.rounds)


class Replayer:
    """The baseline's and the method's traces under the baseline's link at any bandwidth."""

    def __init__(self, base_dir: Path, method_dir: Path) -> None:
        self.base, self.method = Traced(base_dir), Traced(method_dir)
        self.network = network_of(self.base.summary.network, [])

    def _network(self, gbps: float):
        return at_bandwidth(self.network, gbps)

    def base_at(self, gbps: float) -> Parts:
        return Parts.of(self.base, self.base.under(self._network(gbps)))

    def point(self, gbps: float) -> Point:
        network = self._network(gbps)
        base, method = (Parts.of(run, run.under(network)) for run in (self.base, self.method))
        return Point(gbps, base, method)

    def bandwidth_at(self, share: float, low: float = SLOWEST, high: float = FASTEST, steps: int = 30) -> float:
        """The bandwidth (Gbit/s) at which the baseline's share is ``share``, by bisection on its
        logarithm (the share falls as the bandwidth rises)."""
        for _ in range(steps):
            middle = (low * high) ** 0.5
            if self.base_at(middle).share > share:
                low = middle
            else:
                high = middle
        return (low * high) ** 0.5

    def span(self) -> np.ndarray:
        """:data:`POINTS` bandwidths from the baseline share :data:`HIGHEST_SHARE` down to its floor."""
        floor, ceiling = self.base_at(FASTEST).share, self.base_at(SLOWEST).share
        top = min(HIGHEST_SHARE, ceiling - MARGIN)
        if floor + MARGIN >= top:
            raise GnntrainError(f"the baseline's share stays within {floor:.2f}-{ceiling:.2f} at any bandwidth: "
                                "no curve to replay")
        return np.geomspace(self.bandwidth_at(top), self.bandwidth_at(floor + MARGIN), POINTS)


def rounds_curve(traced: list[tuple[Path, Path]]) -> list[RoundsPoint]:
    """Every round's traces (baseline, method) replayed at the first round's bandwidths."""
    replayers = [Replayer(base, method) for base, method in traced]
    span = replayers[0].span()
    return [RoundsPoint([r.point(float(gbps)) for r in replayers]) for gbps in span]


def at_share(points: list[RoundsPoint], share: float, figure) -> float | None:
    """``figure(point)`` interpolated at baseline share ``share``; None outside the curve."""
    shares = [p.share for p in points]
    if not min(shares) <= share <= max(shares):
        return None
    order = np.argsort(shares)
    return float(np.interp(share, np.array(shares)[order], np.array([figure(p) for p in points])[order]))


@dataclass(frozen=True)
class ReplayedCurve:
    """The rounds' traced runs replayed (:func:`rounds_curve`), read before the build writes anything."""

    points: list[RoundsPoint]
    rounds: int


def replayed_curve(traced: list[tuple[Path, Path]]) -> ReplayedCurve | None:
    """The curve of each round's traced runs (baseline, method) that exist; None where none does."""
    traced = [pair for pair in traced if all((path / "trace.jsonl").is_file() for path in pair)]
    return ReplayedCurve(rounds_curve(traced), len(traced)) if traced else None


def replayed_section(curve: Curve, replayed: ReplayedCurve | None, out: Path) -> str:
    """The replayed curve's table, note on the paper's point and plot (``share_curve_replayed.png``);
    empty without a curve."""
    if replayed is None:
        return ""
    points = replayed.points
    rows = [{"Gbit/s": f"{p.bandwidth_gbps:.4g}", "baseline share": f"{p.share:.3f}", "speed-up": str(p.speedup),
             "hide-all bound": f"{p.bound('hide_all_bound'):.3f}x",
             "all-reduce on the link": f"{p.bound('shared_link_bound'):.3f}x",
             "remove-all bound": f"{p.bound('remove_all_bound'):.3f}x"} for p in points]
    _plot(curve, points, out / "share_curve_replayed.png")
    return (f"## The share as a dense curve, replayed: {curve.label}\n\nOne traced run of each per round "
            f"({replayed.rounds} rounds; virtual clock, {curve_setting(curve)}), timed again at {POINTS} link bandwidths, "
            f"from where the first round's baseline share is {HIGHEST_SHARE} (or the most any bandwidth gives it) to "
            f"the least; the speed-up is the method's replayed steady epoch over the baseline's under the same link, "
            f"the median of the rounds [95% interval of their geometric mean]; shares and bounds are means over the rounds."
            f"{' ' + curve.decides if curve.decides else ''}\n\n{markdown(rows)}\n"
            f"{paper_point(curve, points)}{above_bounds(curve, points)}\n"
            f"![replayed share curve](share_curve_replayed.png)\n")


def above_bounds(curve: Curve, points: list[RoundsPoint]) -> str:
    """Where the speed-up is more than 1% above the bound that applies (:func:`applicable_bound`):
    how far, and what the bounds assume, with the measured compute of both methods."""
    above = [p for p in points if p.speedup.median > applicable_bound(curve, p) * 1.01]
    if not above:
        return ""
    most = max(above, key=lambda p: p.speedup.median / applicable_bound(curve, p))
    base, method = (mean(getattr(r, side).compute for r in most.rounds) for side in ("base", "method"))
    kind = "the remove-all bound" if curve.removes else "a hiding bound"
    assumed = ("" if curve.removes else
               " and, with the all-reduce on the link, that nothing overlaps the all-reduce")
    return (f" At {len(above)} of {len(points)} points ours is more than 1% above {kind} (most: "
            f"{most.speedup.median:.3f}x against {applicable_bound(curve, most):.3f}x at share {most.share:.3f}). "
            f"The bounds assume that the method computes what the baseline does (there {method * 1e3:.1f} ms per "
            f"rank and epoch against the baseline's {base * 1e3:.1f} ms){assumed}.")


def curve_setting(curve: Curve) -> str:
    return " ".join([*curve.setting, "|", *curve.base, "vs", *curve.method])


def paper_point(curve: Curve, points: list[RoundsPoint]) -> str:
    """What the curve says at the paper's share."""
    if curve.paper_speedup is None or curve.paper_share is None:
        return f"The paper gives no point to set beside the curve ({curve.paper_source})."
    s, paper = curve.paper_share, curve.paper_speedup
    ours = at_share(points, s, lambda p: p.speedup.median)
    if ours is None:
        low, high = min(p.share for p in points), max(p.share for p in points)
        return (f"The paper's point ({paper:.2f}x at share {s:.2%}; {curve.paper_source}) lies outside the shares "
                f"this setting reaches ({low:.2f}-{high:.2f}).")
    hide_all, remove_all = hide_all_bound(s), 1 / (1 - s)
    link = at_share(points, s, lambda p: p.bound("shared_link_bound"))
    line = (f"At the paper's share {s:.2%} ({curve.paper_source}): ours {ours:.2f}x, the hide-all bound "
            f"{hide_all:.2f}x, with the all-reduce on the link {link:.2f}x, the remove-all bound {remove_all:.2f}x; "
            f"the paper's {paper:.2f}x.")
    bound, name, what = ((remove_all, "remove-all", "removing communication") if curve.removes
                         else (hide_all, "hide-all", "hiding communication"))
    if paper <= bound:
        return line + f" The paper's point is within the {name} bound at its own share."
    nearest = min(points, key=lambda p: abs(p.share - s))

    def ms(side: str, name: str) -> float:
        return mean(getattr(getattr(r, side), name) for r in nearest.rounds) * 1e3

    parts = ", ".join(f"{name} {ms('base', name):.1f} vs {ms('method', name):.1f} ms"
                      for name in ("epoch", "compute", "data", "allreduce", "other"))
    return (line + f" **The paper's point lies above the {name} bound at its own share**: {what} "
            f"cannot give it, so the paper's speed-up there also removes other work its baseline did (or the share "
            f"it quotes leaves out time its method saves). Measured here at the nearest point (share "
            f"{nearest.share:.3f}, baseline vs method per rank, means over the rounds): {parts}.")


def _plot(curve: Curve, points: list[RoundsPoint], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    shares = [p.share for p in points]
    medians = [p.speedup.median for p in points]
    ax.plot(shares, medians, "o-", markersize=3, label="ours, replayed (median of the rounds)")
    if all(p.speedup.bounds for p in points):
        ax.fill_between(shares, [p.speedup.bounds[0] for p in points], [p.speedup.bounds[1] for p in points],
                        alpha=0.25, label="95% interval")
    for name, style, label in (("hide_all_bound", "--", "hide all: 1/max(s, 1-s)"),
                               ("shared_link_bound", "-.", "with the all-reduce on the link"),
                               ("remove_all_bound", ":", "remove all: 1/(1-s)")):
        ax.plot(shares, [p.bound(name) for p in points], style, label=label)
    if curve.paper_speedup is not None:
        ax.plot([curve.paper_share], [curve.paper_speedup], "*", markersize=13, label="the paper")
    top = max([curve.paper_speedup or 0.0, *medians, *(p.bound("shared_link_bound") for p in points)])
    ax.set_ylim(0.5, max(2.5, top * 1.2))
    ax.set_xlabel("baseline communication share s (virtual clock)")
    ax.set_ylabel("speed-up over the baseline")
    ax.set_title(f"{curve.label}, replayed on the virtual clock\n{textwrap.fill(curve_setting(curve), 70)}",
                 fontsize="medium")
    ax.legend(fontsize="small", loc="upper left")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
