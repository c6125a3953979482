"""Replay: a run's trace (:mod:`gnntrain.timing.trace`) timed again under another network,
without training.

Each rank's trace is its sequence of compute spans and operations. Replay walks every rank
through it in virtual time under the new links: a compute span takes what it took in the run,
an operation is posted at the rank's new time and reserves the new links, and a wait ends at
the completion the network model gives from the participants' new stamps
(:class:`gnntrain.timing.ops.RankLinks`, the very code a live run completes its operations
with). A rank whose wait needs a stamp that its peer has not yet posted pauses until that peer
gets there, as the live rank would have blocked. What the run computed is taken as it was
measured: a replay under the run's own network repeats its times, and one under another network
tells what the same compute would have cost there (the data a method sends does not depend on the
network; a method that decides on timings, AdaQP's bit-widths and HopGNN's merge count, keeps
the decisions its run made).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnntrain.timing.kinds import TRAINING_CATEGORIES, category
from gnntrain.errors import GnntrainError
from gnntrain.timing.links import Stamp, Topology
from gnntrain.timing.ops import RankLinks, VirtualOp


class ReplayError(GnntrainError):
    """A trace that cannot be replayed (incomplete: a rank waits on what no peer posted)."""


@dataclass
class RankEpoch:
    """One rank's epoch in replay: its window and what it spent it on."""

    start: float
    end: float
    compute: float = 0.0
    exposed: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TRAINING_CATEGORIES, 0.0))
    exposed_by_kind: dict[str, float] = field(default_factory=dict)
    """Waits by traffic kind."""
    hidden_by_kind: dict[str, float] = field(default_factory=dict)
    """By traffic kind, the time its operations were in flight while the rank did something else:
    from post to completion, less the wait for it."""


@dataclass
class ReplayedEpoch:
    """An epoch in replay: the slowest rank's time and each rank's account."""

    epoch: int
    ranks: list[RankEpoch]

    @property
    def epoch_time(self) -> float:
        return max(r.end - r.start for r in self.ranks)

    def mean_exposed(self, name: str) -> float:
        return sum(r.exposed[name] for r in self.ranks) / len(self.ranks)

    @property
    def mean_compute(self) -> float:
        return sum(r.compute for r in self.ranks) / len(self.ranks)


class _Rank:
    """One rank walking through its trace."""

    def __init__(self, rank: int, events: list[dict], topology: Topology) -> None:
        self.rank, self.events, self.links = rank, events, RankLinks(topology, rank)
        self.at = 0
        self.now = 0.0
        """The new virtual time."""
        self.was = 0.0
        """Where the run's clock stood at the same point."""
        self.anchors = [(0.0, 0.0)]
        """(the run's time, the new time) after each event since the last epoch's end: compute runs
        on linearly from each."""
        self.ops: dict[int, VirtualOp] = {}
        self.waits: list[tuple[float, float, str, float, float]] = []
        """Waits in the new time since the last epoch's end: reached, resumed, kind, and the
        operation's post and completion."""
        self.epochs: dict[int, RankEpoch] = {}

    @property
    def done(self) -> bool:
        return self.at == len(self.events)

    def _compute_until(self, was: float) -> None:
        self.now += max(0.0, was - self.was)
        self.was = max(self.was, was)

    def step(self, stamps: dict[tuple, Stamp]) -> bool:
        """Take the next event; False where it waits on a stamp not yet posted."""
        event = self.events[self.at]
        if event["ev"] == "post":
            self._compute_until(event["post"])
            op = VirtualOp(event["shape"], event["kind"], self.now, sent=event["sent"], received=event["received"],
                           group=event.get("group", []), nbytes=event.get("nbytes", 0), key=event.get("key", ()))
            self.links.posted(op)
            self.ops[event["id"]] = op
            for key in ([op.key] if op.shape == "ring" else {m[2] for m in op.sent}):
                stamps[(key, self.rank)] = op.stamp()
        elif event["ev"] == "wait":
            op = self.ops[event["id"]]
            sources = op.stamp_sources()
            if any(source not in stamps for source in sources):
                return False
            self._compute_until(event["reached"])
            reached = self.now
            done = self.links.complete(op, [stamps[source] for source in sources])
            self.now = max(self.now, done)
            self.was = event["resumed"]
            self.waits.append((reached, self.now, op.kind, op.post, done))
            del self.ops[event["id"]]
        else:
            self._epoch(event)
        self.anchors.append((self.was, self.now))
        self.at += 1
        return True

    def _epoch(self, event: dict) -> None:
        """An epoch's window. Its start lies after the last event before it with compute only
        between (the run's clock moved only by compute there): the first anchor at the start
        itself where there is one (a wait that took no time in the run, as in a written trace,
        leaves several there, the later ones inside the epoch); its end is now."""
        at_start = [a for a in self.anchors if a[0] == event["start"]]
        anchor_was, anchor_now = at_start[0] if at_start else max(
            (a for a in self.anchors if a[0] < event["start"]), default=self.anchors[0])
        start = anchor_now + (event["start"] - anchor_was)
        self._compute_until(event["end"])
        epoch = RankEpoch(start, self.now)
        for reached, resumed, kind, post, done in self.waits:
            name = category(kind)
            if name in epoch.exposed and reached >= start:
                epoch.exposed[name] += resumed - reached
                epoch.exposed_by_kind[kind] = epoch.exposed_by_kind.get(kind, 0.0) + resumed - reached
                hidden = max(0.0, done - post - (resumed - reached))
                epoch.hidden_by_kind[kind] = epoch.hidden_by_kind.get(kind, 0.0) + hidden
        epoch.compute = (epoch.end - epoch.start) - sum(epoch.exposed.values())
        self.waits = []
        self.anchors = [(self.was, self.now)]
        self.epochs[event["epoch"]] = epoch


def replay(ranks: dict[int, list[dict]], topology: Topology) -> list[ReplayedEpoch]:
    """Every epoch of a trace (:func:`gnntrain.timing.trace.read`) timed under ``topology``."""
    walkers = {r: _Rank(r, events, topology) for r, events in ranks.items()}
    stamps: dict[tuple, Stamp] = {}
    waiting = [w for w in walkers.values() if not w.done]
    while waiting:
        moved = False
        for walker in waiting:
            while not walker.done and walker.step(stamps):
                moved = True
        waiting = [w for w in waiting if not w.done]
        if waiting and not moved:
            stuck = waiting[0]
            op = stuck.ops[stuck.events[stuck.at]["id"]]
            raise ReplayError(f"the trace is incomplete: rank {stuck.rank} waits on a {op.kind} operation whose "
                              f"peers' posts are not in it (a run stopped early, or a trace of another run?)")
    epochs = sorted(set.intersection(*(set(w.epochs) for w in walkers.values())))
    return [ReplayedEpoch(e, [walkers[r].epochs[e] for r in sorted(walkers)]) for e in epochs]


def steady_mean(epochs: list[ReplayedEpoch], steady_epochs: set[int], figure) -> float:
    """The mean of ``figure(epoch)`` over the epochs numbered in ``steady_epochs`` (all where none
    is)."""
    steady = [e for e in epochs if e.epoch in steady_epochs] or epochs
    return sum(figure(e) for e in steady) / len(steady)
