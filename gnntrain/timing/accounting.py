"""Where an epoch's communication time went: waiting for peers, transfer, hidden.

A rank's operation of one category (:mod:`gnntrain.comm.meter`) gives two intervals on the
host's clock:

* *exposed*: from where the rank (its stream, on CUDA) reached its wait to where it went on;
* *in flight*: from where the last participant had its data ready (the transfer could not
  move before: the latest start of any rank taking part, as each rank tells the others after
  the epoch, :meth:`gnntrain.comm.meter.CommMeter.learn`) to where the backend completed it,
  no earlier than an emulated link's completion; where the completion is unknown (gloo's
  point-to-point works tell no one), an emulated link's completion, else the end of the wait
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

from dataclasses import dataclass

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
