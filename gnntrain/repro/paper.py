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


@dataclass(frozen=True)
class Curve:
    """One paper's headline comparison, the runs of its speed sweeps traced in every round and
    replayed at many link bandwidths (:mod:`gnntrain.repro.replayed`)."""

    setting: tuple[str, ...]
    """Overrides of the setting (the headline table's preset and size)."""
    base: tuple[str, ...]
    """Overrides that make the baseline."""
    method: tuple[str, ...]
    """Overrides that make the method."""
    traced: tuple[str, str]
    """The speed sweeps (:attr:`Paper.speed`) that hold the baseline's run and the method's: each
    round's runs of both are traced and replayed, so the curve costs no run of its own."""
    label: str
    """The method over the baseline, in words."""
    paper_share: float | None
    paper_speedup: float | None
    """The paper's point: its baseline's share and its speed-up there; None where the paper gives
    no speed-up at a known share."""
    paper_source: str
    """Where the paper's share and speed-up are quoted from (or why there is no point)."""
    removes: bool = False
    """Whether the method removes the baseline's communication (BNS-GCN's sampling, AdaQP's
    quantizing, ...) rather than hiding it (PipeGCN): its speed-up is then bounded by removing all of it, ``1 / (1 - s)``, not by hiding
    it (:mod:`gnntrain.repro.replayed`)."""
    decides: str = ""
    """What the method decides from timings under its headline link and a replay at other
    bandwidths keeps (AdaQP's widths, HopGNN's merges), in words; empty where it decides nothing."""


@dataclass(frozen=True)
class Paper:
    """One paper's reproduction (``make repro-<name>``)."""

    name: str
    sweeps: dict[str, list[str]]
    """Each sweep's ``gnntrain -m`` overrides, by the sweep's name (its folder under the build's runs)."""
    speed: tuple[str, ...]
    """The sweeps whose runs give the tables' speed figures: each runs in interleaved rounds
    (:data:`gnntrain.repro.build.REPEATS`); the curve's two (:attr:`Curve.traced`) among them."""
    tables: Callable[[dict[str, list[Run]], Path, str], str]
    """The tables and figures from the runs of each sweep (``runs``, the output folder, the scale):
    the markdown of ``table.md``, figures written beside it."""
    curve: Curve
    """The headline speed-up over the baseline at many link speeds (:mod:`gnntrain.repro.replayed`)."""
    reference: str
    """The paper's full reference (authors, title, venue, year, link), which its table names once
    and ``docs/reproducing.md``'s references list."""
    trusting: tuple[str, ...] = ()
    """Speed sweeps that run under the cached links as they are (``network.recheck=false``): each
    after the sweep of its round that re-checked the same links (its baseline's, earlier in
    :attr:`speed`), so that the systems a ratio compares share one link in every round."""
    same_link: dict[str, str] = field(default_factory=dict)
    """Sweeps run under exactly the (calibrated) link of another sweep's runs, passed as numbers."""
    claim: tuple[str, float] | None = None
    """Where the curve gives no paper point (:attr:`Curve.paper_speedup`): the paper's headline in
    words and the least speed-up over the curve's baseline it implies (1: not slower, for an "up
    to" claim), as the scoreboard (:mod:`gnntrain.repro.scoreboard`) judges ours against it."""
