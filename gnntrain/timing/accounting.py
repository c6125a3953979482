r"""Where a rank's epoch went: compute, and per traffic kind and category, waiting for peers,
transfer and hidden communication. One accounting for every clock: a live run's meter
(:mod:`gnntrain.comm.meter`), replay (:mod:`gnntrain.timing.replay`) and so a prediction
(:mod:`gnntrain.predict`) give it the same :class:`Operation`\ s and read the same
:class:`RankAccount`.

A rank's operation of one category gives two intervals on its clock:

* *exposed*: from where the rank (its stream, on CUDA) reached its wait to where it went on;
* *in flight*: from where the last participant had its data ready (the transfer could not
  move before: the latest start of any rank taking part, as each rank tells the others after
  the epoch, :meth:`gnntrain.comm.meter.CommMeter.learn`) to where the backend (or, under the
  virtual clock, the link model) completed it, or where the completion is unknown (gloo's point-to-point works tell no one), the end of the wait
  (so a send waited for long after it left counts in flight until then); and the part of the
  wait after that start (the rank blocked on the transfer: copying what arrived is part of
  it).

With ``E`` the union of a category's exposed intervals and ``F`` that of its in-flight ones,
both clipped to the epoch:

* ``wait = |E \\ F|``: blocked while nothing of the category was moving, i.e. waiting for a peer
  to get there (imbalance);
* ``transfer = |E ∩ F|``: blocked while the transfer moved;
* ``hidden = |F \\ E|``: moving while the rank computed (or waited on another category);

so ``exposed = |E| = wait + transfer`` and ``in flight = |F| = transfer + hidden``, each at most
the epoch, and the exposed time of all categories together (their union) plus compute is the
epoch. A transfer in flight across an epoch's end (PipeGCN's stale exchange) counts in each
epoch for the part inside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from gnntrain.timing.kinds import TIMED_CATEGORIES, category

Interval = tuple[float, float]


def union(intervals: list[Interval]) -> list[Interval]:
    """The disjoint, sorted intervals covering the same points (empty ones dropped)."""
    merged: list[list[float]] = []
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def length(intervals: list[Interval]) -> float:
    """Seconds covered by disjoint ``intervals``."""
    return sum(e - s for s, e in intervals)


def intersection(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Points in both of two disjoint, sorted interval lists."""
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if end > start:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def clipped(intervals: list[Interval], window: Interval) -> list[Interval]:
    """``intervals`` cut to ``window``."""
    return [(max(s, window[0]), min(e, window[1])) for s, e in intervals if min(e, window[1]) > max(s, window[0])]


@dataclass
class Split:
    """One category's communication in one epoch on one rank (seconds; module docstring)."""

    wait: float = 0.0
    transfer: float = 0.0
    hidden: float = 0.0

    @property
    def exposed(self) -> float:
        return self.wait + self.transfer

    @property
    def in_flight(self) -> float:
        return self.transfer + self.hidden


def split(exposed: list[Interval], in_flight: list[Interval], window: Interval) -> Split:
    """Wait, transfer and hidden time of a category's intervals within ``window``."""
    e, f = union(clipped(exposed, window)), union(clipped(in_flight, window))
    both = length(intersection(e, f))
    return Split(wait=length(e) - both, transfer=both, hidden=length(f) - both)


@dataclass(frozen=True)
class Operation:
    """One operation as a rank's epoch saw it, on the rank's clock: its kind, its ``keys`` (one
    per message or collective it takes part in, the same on every rank taking part), where its
    data was ready on this rank (``started``), the span of the rank's wait on it (None while
    still in flight at the epoch's end) and its completion where known then (None: unknown, the
    transfer counts in flight to the end of the wait, or of the epoch)."""

    kind: str
    keys: tuple
    started: float
    waited: tuple[float, float] | None
    done: float | None
    sending: Interval | None = None
    """Where the host spent the cluster's per-message cost of sending it (the virtual clock's),
    blocked: exposed and in flight alike."""

    @property
    def category(self) -> str:
        return category(self.kind)


@dataclass(frozen=True)
class RankAccount:
    """One rank's epoch: its window, per timed category and per kind of those categories its
    :class:`Split` (a category's split is not the sum of its kinds' where their transfers
    overlap), and its compute: as its clock measured it where one did (the virtual clock's
    compute spans, independently of the operations), else the window less the time the rank was
    blocked on any timed operation."""

    window: Interval
    categories: dict[str, Split]
    kinds: dict[str, Split] = field(default_factory=dict)
    blocked: float = 0.0
    """Seconds the rank was blocked on any timed operation in the window (the union)."""
    measured_compute: float | None = None
    """The compute the rank's clock measured (the virtual clock's); None: not measured apart."""

    @property
    def epoch_time(self) -> float:
        return self.window[1] - self.window[0]

    @property
    def exposed_time(self) -> float:
        """Exposed communication of every timed category (``diag`` included)."""
        return sum(split.exposed for split in self.categories.values())

    @property
    def compute_time(self) -> float:
        return self.epoch_time - self.blocked if self.measured_compute is None else self.measured_compute


def account(operations: list[Operation], window: Interval, ready: Callable[[Operation], float],
            measured_compute: float | None = None) -> RankAccount:
    """Split a rank's epoch (module docstring): ``operations`` those waited in ``window`` or in
    flight at its end, ``ready(op)`` where the last participant of ``op`` had its data ready (the
    latest start over every rank taking part; at least ``op.started``); ``measured_compute``: the
    compute the rank's clock measured, where it did."""
    exposed: dict[str, list[Interval]] = {c: [] for c in TIMED_CATEGORIES}
    in_flight: dict[str, list[Interval]] = {c: [] for c in TIMED_CATEGORIES}
    kinds: dict[str, tuple[list[Interval], list[Interval]]] = {}
    for op in operations:
        if op.category not in exposed:
            continue
        start = ready(op)
        own = kinds.setdefault(op.kind, ([], []))
        if op.waited is not None:
            reached, resumed = op.waited
            moving = [(start, resumed if op.done is None else op.done), (max(reached, start), resumed)]
            exposed[op.category].append((reached, resumed))
            own[0].append((reached, resumed))
        else:
            moving = [(start, window[1] if op.done is None else op.done)]
        if op.sending is not None:
            exposed[op.category].append(op.sending)
            own[0].append(op.sending)
            moving.append(op.sending)
        in_flight[op.category] += moving
        own[1].extend(moving)
    blocked = length(union(clipped([i for c in TIMED_CATEGORIES for i in exposed[c]], window)))
    return RankAccount(window, {c: split(exposed[c], in_flight[c], window) for c in TIMED_CATEGORIES},
                       {k: split(e, f, window) for k, (e, f) in sorted(kinds.items())}, blocked, measured_compute)


def latest_start(started: dict[tuple, float]) -> Callable[[Operation], float]:
    """``ready`` for :func:`account` from the latest start known per key (every participant's)."""
    return lambda op: max([op.started] + [started.get(key, -math.inf) for key in op.keys])
