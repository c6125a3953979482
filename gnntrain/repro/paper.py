"""A paper's reproduction, declared in one place (:class:`Paper`): its sweeps, which of them time
its speed figures, its tables and its share curve (:class:`Curve`). Each paper's module declares
its own (:mod:`gnntrain.repro.pipegcn`, ...) and :mod:`gnntrain.repro.papers` lists them; the build
(:mod:`gnntrain.repro.build`) runs any of them the same way."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from gnntrain.report.runs import Run

SHARES = (0.3, 0.45, 0.6, 0.75, 0.9)
"""The baseline communication shares a curve's links are calibrated to, unless it names its own."""


def percent(s: float) -> int:
    return round(s * 100)


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
    paper_share: float | None
    paper_speedup: float | None
    """The paper's point: its baseline's share and its speed-up there; None where the paper gives
    no speed-up at a known share."""
    paper_source: str
    """Where the paper's share and speed-up are quoted from (or why there is no point)."""
    shares: tuple[float, ...] = SHARES
    """The baseline shares its links are calibrated to."""
    removes: bool = False
    """Whether the method removes the baseline's communication (BNS-GCN's sampling) rather than
    hiding it: its speed-up is then bounded by removing all of it, ``1 / (1 - s)``, not by hiding
    it (:mod:`gnntrain.repro.replayed`)."""
    decides: str = ""
    """What the method decides from timings under its headline link and a replay at other
    bandwidths keeps (AdaQP's widths, HopGNN's merges), in words; empty where it decides nothing."""
    headline: tuple[float, str, str] | None = None
    """(share, baseline sweep, method sweep): the headline table's sweeps that are this curve's
    point at that share, overrides and rounds alike; None where the headline's share is none of
    :attr:`shares`."""

    def sweeps_at(self, s: float) -> tuple[str, str]:
        """The baseline's and the method's sweeps at share ``s``."""
        if self.headline is not None and self.headline[0] == s:
            return self.headline[1], self.headline[2]
        return f"curve_{percent(s)}_base", f"curve_{percent(s)}_method"


@dataclass(frozen=True)
class Paper:
    """One paper's reproduction (``make repro-<name>``)."""

    name: str
    sweeps: dict[str, list[str]]
    """Each sweep's ``gnntrain -m`` overrides, by the sweep's name (its folder under the build's runs)."""
    speed: tuple[str, ...]
    """The sweeps whose runs give the tables' speed figures: each runs in interleaved rounds
    (:data:`gnntrain.repro.build.REPEATS`), and so do the curve's."""
    tables: Callable[[dict[str, list[Run]], Path, str], str]
    """The tables and figures from the runs of each sweep (``runs``, the output folder, the scale):
    the markdown of ``table.md``, figures written beside it."""
    curve: Curve
    """The headline speed-up over the baseline at several link speeds (:mod:`gnntrain.repro.curves`)."""
    trusting: tuple[str, ...] = ()
    """Speed sweeps that run under the cached links as they are (``network.recheck=false``): each
    after the sweep of its round that re-checked the same links (its baseline's, earlier in
    :attr:`speed`), so that the systems a ratio compares share one link in every round."""
    same_link: dict[str, str] = field(default_factory=dict)
    """Sweeps run under exactly the (calibrated) link of another sweep's runs, passed as numbers."""
