"""Replay: a run's trace (:mod:`gnntrain.timing.trace`) timed again under another network,
without training.

Each rank's trace is its sequence of compute spans and operations. Replay walks every rank
through it in virtual time under the new links: compute takes what it took in the run, an
operation is posted at the rank's new time and reserves the new links, and a wait ends at the
completion the network model gives from the participants' new stamps
(:class:`gnntrain.timing.ops.RankLinks`, the very code a live run completes its operations with).
A rank whose wait needs a stamp that its peer has not yet posted pauses until that peer gets
there, as the live rank would have blocked. What the run computed is taken as it was measured: a
replay under the run's own network repeats its times, and one under another network tells what
the same compute would have cost there (the data a method sends does not depend on the network;
a method that decides on timings, AdaQP's bit-widths and HopGNN's merge count, keeps the
decisions its run made).

Each epoch is then accounted as a live run accounts it (:func:`gnntrain.timing.accounting.account`,
the same function): per rank, the operations waited in the epoch or in flight at its end, each
placed from the latest post of any rank taking part, an operation still in flight at the epoch's
end with the completion a live rank knows then (a collective's, whose stamps it gathers; a
point-to-point message's is not known before its wait). So the replay of a trace under the
network its run had gives the run's own records, field by field
(:class:`~gnntrain.timing.epoch.EpochTiming`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gnntrain.errors import GnntrainError
from gnntrain.timing.accounting import Operation, RankAccount, account, latest_start
from gnntrain.timing.epoch import EpochTiming
from gnntrain.timing.kinds import category
from gnntrain.timing.cluster import Topology
from gnntrain.timing.links import Stamp
from gnntrain.timing.ops import RankLinks, VirtualOp
from gnntrain.timing.trace import EpochWindow, Event, Overhead, Post, Wait


class ReplayError(GnntrainError):
    """A trace that cannot be replayed (incomplete: a rank waits on what no peer posted)."""


@dataclass(slots=True)
class _Replayed:
    """An operation in the new time: posted in the rank's epoch ``posted_in`` (counted from 0),
    waited in ``waited_in`` (None: never) over ``waited``, completing at ``done``."""

    op: VirtualOp
    posted_in: int
    waited_in: int | None = None
    waited: tuple[float, float] | None = None
    done: float | None = None
    sending: tuple[float, float] | None = None


class _Rank:
    """One rank walking through its trace."""

    def __init__(self, rank: int, events: list[Event], topology: Topology) -> None:
        self.rank, self.events, self.links = rank, events, RankLinks(topology, rank)
        self.at = 0
        self.now = 0.0
        """The new virtual time."""
        self.was = 0.0
        """Where the run's clock stood at the same point."""
        self.anchors = [(0.0, 0.0)]
        """(the run's time, the new time) after each event since the last epoch's end: compute runs
        on linearly from each."""
        self.open: dict[int, _Replayed] = {}
        self.ops: list[_Replayed] = []
        self.waited_last: _Replayed | None = None
        """The operation last waited for, whose receive overhead may follow."""
        self.unreserved: _Replayed | None = None
        """An operation posted whose send overhead may follow, before its bytes are reserved."""
        self.windows: list[tuple[int, tuple[float, float]]] = []
        """Each epoch's number and window in the new time, in order."""

    @property
    def done(self) -> bool:
        return self.at == len(self.events)

    def _compute_until(self, was: float) -> None:
        self.now += max(0.0, was - self.was)
        self.was = max(self.was, was)

    def _reserve(self, stamps: dict[tuple, Stamp]) -> None:
        """Reserve the last posted operation's bytes, from where its messages leave."""
        op = self.unreserved.op
        self.links.posted(op)
        for key in ([op.key] if op.shape == "ring" else {m[2] for m in op.sent}):
            stamps[(key, self.rank)] = op.stamp()
        self.unreserved = None

    def step(self, stamps: dict[tuple, Stamp]) -> bool:
        """Take the next event; False where it waits on a stamp not yet posted."""
        event = self.events[self.at]
        if self.unreserved is not None and not (isinstance(event, Overhead) and event.side == "send"):
            self._reserve(stamps)
        if isinstance(event, Post):
            self._compute_until(event.post)
            self.unreserved = self.open[event.id] = _Replayed(event.op(self.now), len(self.windows))
            self.ops.append(self.unreserved)
        elif isinstance(event, Overhead):
            self._overhead(event)
            if event.side == "send":
                self._reserve(stamps)
        elif isinstance(event, Wait):
            replayed = self.open[event.id]
            sources = replayed.op.stamp_sources()
            if any(source not in stamps for source in sources):
                return False
            self._compute_until(event.reached)
            reached = self.now
            replayed.done = self.links.complete(replayed.op, [stamps[source] for source in sources])
            self.now = max(self.now, replayed.done)
            self.was = event.resumed
            replayed.waited, replayed.waited_in = (reached, self.now), len(self.windows)
            self.waited_last = replayed
            del self.open[event.id]
        elif isinstance(event, EpochWindow):
            self._epoch(event)
        else:
            self._compute_until(event.end)
        self.anchors.append((self.was, self.now))
        self.at += 1
        if self.done and self.unreserved is not None:
            self._reserve(stamps)
        return True

    def _overhead(self, event: Overhead) -> None:
        """The host's cost of an operation's messages, priced at this cluster's per-message costs:
        sending, before they leave (exposed); receiving, at the end of its wait."""
        replayed = self.ops[-1] if event.side == "send" else self.waited_last
        cost = self.links.overhead(replayed.op, event.side)
        start = self.now
        self.now += cost
        self.was += event.end - event.start
        if event.side == "send":
            replayed.op.depart = replayed.op.post + cost
            if cost:
                replayed.sending = (start, self.now)
        else:
            replayed.waited = (replayed.waited[0], self.now)

    def _epoch(self, event: EpochWindow) -> None:
        """An epoch's window. Its start lies after the last event before it with compute only
        between (the run's clock moved only by compute there): the first anchor at the start
        itself where there is one (a wait that took no time in the run, as in a written trace,
        leaves several there, the later ones inside the epoch); its end is now."""
        at_start = [a for a in self.anchors if a[0] == event.start]
        anchor_was, anchor_now = at_start[0] if at_start else max(
            (a for a in self.anchors if a[0] < event.start), default=self.anchors[0])
        start = anchor_now + (event.start - anchor_was)
        self._compute_until(event.end)
        self.windows.append((event.epoch, (start, self.now)))
        self.anchors = [(self.was, self.now)]

    def accounts(self, started: dict[tuple, float]) -> dict[int, tuple[RankAccount, dict[str, float]]]:
        """Per epoch, the rank's account and the bytes its meter counted per kind: the operations
        posted in it or before and not waited before it, in posting order (kept as epochs pass,
        not searched for in every operation of the run per epoch)."""
        out = {}
        live: list[_Replayed] = []
        posted = iter(self.ops)
        upcoming = next(posted, None)
        for index, (epoch, window) in enumerate(self.windows):
            live = [r for r in live if r.waited_in is None or r.waited_in >= index]
            while upcoming is not None and upcoming.posted_in <= index:
                live.append(upcoming)
                upcoming = next(posted, None)
            ops, counted = [], {}
            for r in live:
                if r.posted_in == index and category(r.op.kind) != "eval":
                    counted[r.op.kind] = counted.get(r.op.kind, 0.0) + r.op.counted
                waited = r.waited if r.waited_in == index else None
                known = waited is not None or r.op.collective
                ops.append(Operation(r.op.kind, r.op.keys, r.op.post, waited, r.done if known else None, r.sending))
            out[epoch] = (account(ops, window, latest_start(started)), counted)
        return out


def replay(ranks: dict[int, list[Event]], topology: Topology, clock: str = "replayed",
           progress: Callable[[int], None] = lambda events: None) -> list[EpochTiming]:
    """Every epoch of a trace (:func:`gnntrain.timing.trace.read`) timed under ``topology``;
    ``progress`` is told how many more events were taken, rank by rank (a progress display)."""
    walkers = {r: _Rank(r, events, topology) for r, events in ranks.items()}
    stamps: dict[tuple, Stamp] = {}
    waiting = [w for w in walkers.values() if not w.done]
    while waiting:
        moved = False
        for walker in waiting:
            was = walker.at
            while not walker.done and walker.step(stamps):
                moved = True
            if walker.at > was:
                progress(walker.at - was)
        waiting = [w for w in waiting if not w.done]
        if waiting and not moved:
            stuck = waiting[0]
            op = stuck.open[stuck.events[stuck.at].id].op
            raise ReplayError(f"the trace is incomplete: rank {stuck.rank} waits on a {op.kind} operation whose "
                              f"peers' posts are not in it (a run stopped early, or a trace of another run?)")
    started: dict[tuple, float] = {}
    for walker in walkers.values():
        for r in walker.ops:
            for key in r.op.keys:
                started[key] = max(started.get(key, r.op.post), r.op.post)
    accounts = {r: walker.accounts(started) for r, walker in walkers.items()}
    epochs = sorted(set.intersection(*(set(a) for a in accounts.values()))) if accounts else []
    if not epochs:
        raise ReplayError("the trace holds no epoch every rank completed (a run stopped in its first epoch?); "
                          "valid: the trace.jsonl of a run that completed an epoch")
    timings = []
    for epoch in epochs:
        per_rank = [accounts[r][epoch] for r in sorted(walkers)]
        counted: dict[str, float] = {}
        for _, kinds in per_rank:
            for kind, nbytes in kinds.items():
                counted[kind] = counted.get(kind, 0.0) + nbytes
        timings.append(EpochTiming.of_ranks(epoch, clock, [a for a, _ in per_rank], counted))
    return timings


def steady_mean(epochs: list[EpochTiming], steady_epochs: set[int]) -> EpochTiming:
    """The mean of the epochs numbered in ``steady_epochs`` (all where none is)."""
    return EpochTiming.mean([e for e in epochs if e.epoch in steady_epochs] or epochs)
