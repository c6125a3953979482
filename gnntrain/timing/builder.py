"""A predicted epoch as a trace: every rank's compute and operations written as a run's trace
(:mod:`gnntrain.timing.trace`) would hold them, then timed by replay
(:func:`gnntrain.timing.replay.replay`) under the described network. So a prediction goes through
the very network model that times a live run under the virtual clock and a replayed one: queues,
both ends' links, rings, two levels.

A method's timeline (:mod:`gnntrain.predict.methods`) is written on a :class:`Timeline`, one
:class:`RankTimeline` per rank, in program order: compute spans advance the rank's own clock,
posts and waits mark where its operations leave and where it needs them. Waits take no time in
the written trace: replay finds how long each is. Collectives are keyed by their count on each
rank (every rank posts the same sequence), point-to-point messages by their ends and count.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnntrain.timing.replay import ReplayedEpoch, replay
from gnntrain.timing.links import Topology


@dataclass
class RankTimeline:
    """One rank's trace being written."""

    rank: int
    now: float = 0.0
    events: list[dict] = field(default_factory=list)
    ops: int = 0
    keys: dict[tuple, int] = field(default_factory=dict)
    epoch_start: float = 0.0
    epoch: int = 0
    sent: dict[int, dict[str, float]] = field(default_factory=dict)
    """Payload bytes posted per epoch and kind, as the meter counts them (a ring's once)."""

    def _key(self, *name) -> tuple:
        n = self.keys[name] = self.keys.get(name, -1) + 1
        return (*name, n)

    def _post(self, shape: str, kind: str, sent: list, received: list, counted: float = 0, **ring) -> int:
        tally = self.sent.setdefault(self.epoch, {})
        tally[kind] = tally.get(kind, 0.0) + counted + (ring["nbytes"] if shape == "ring" else sum(m[1] for m in sent))
        self.ops += 1
        self.events.append({"ev": "post", "id": self.ops, "shape": shape, "kind": kind, "post": self.now,
                            "sent": sent, "received": received, **ring})
        return self.ops

    def compute(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)

    def exchange(self, kind: str, sent: dict[int, float], received: dict[int, float]) -> int:
        """Post an all-to-all (bytes to and from each peer, this rank's own block counted as the
        meter counts a send buffer, moving on no link); its id, to :meth:`wait` on."""
        key = self._key("exchange", kind)
        return self._post("exchange", kind, [(q, int(n), key) for q, n in sent.items() if n and q != self.rank],
                          [(q, int(n), key) for q, n in received.items() if n and q != self.rank],
                          counted=sent.get(self.rank, 0))

    def send(self, kind: str, peer: int, nbytes: float) -> int:
        """Post a one-sided send (a pipeline stage's rows, a migrating model)."""
        key = self._key("p2p", kind, self.rank, peer)
        return self._post("send", kind, [(peer, int(nbytes), key)], [])

    def swap(self, kind: str, to: int, nbytes: float, source: int, arriving: float) -> int:
        """Post point-to-point messages sent and received together (``p2p_start``)."""
        return self._post("exchange", kind, [(to, int(nbytes), self._key("p2p", kind, self.rank, to))],
                          [(source, int(arriving), self._key("p2p", kind, source, self.rank))])

    def recv(self, kind: str, peer: int, nbytes: float) -> int:
        key = self._key("p2p", kind, peer, self.rank)
        return self._post("recv", kind, [], [(peer, int(nbytes), key)])

    def ring(self, kind: str, group: list[int], nbytes: float) -> None:
        """An all-reduce over ``group`` (world ranks), waited at once."""
        if len(group) < 2:
            return
        key = self._key("ring", kind, tuple(group))
        self.wait(self._post("ring", kind, [], [], group=list(group), nbytes=int(nbytes), key=key))

    def wait(self, op: int) -> None:
        self.events.append({"ev": "wait", "id": op, "reached": self.now, "done": self.now, "resumed": self.now})

    def start_epoch(self, epoch: int) -> None:
        self.epoch_start, self.epoch = self.now, epoch

    def end_epoch(self, epoch: int) -> None:
        self.events.append({"ev": "epoch", "epoch": epoch, "start": self.epoch_start, "end": self.now})


class Timeline:
    """Every rank's trace being written."""

    def __init__(self, world: int) -> None:
        self.ranks = [RankTimeline(r) for r in range(world)]
        self.repeats = 1.0
        """How many times the written epoch stands for: a method whose epoch is many alike
        iterations writes some of them and says how many times over the epoch runs them."""

    def exchange(self, kind: str, sent: list[list[float]]) -> list[int]:
        """An all-to-all on every rank, ``sent[r][q]`` bytes from ``r`` to ``q``; each rank's id."""
        world = len(self.ranks)
        return [rank.exchange(kind, {q: sent[r][q] for q in range(world)}, {q: sent[q][r] for q in range(world)})
                for r, rank in enumerate(self.ranks)]

    def wait(self, ops: list[int]) -> None:
        for rank, op in zip(self.ranks, ops):
            rank.wait(op)

    def compute(self, seconds: list[float]) -> None:
        for rank, s in zip(self.ranks, seconds):
            rank.compute(s)

    def ring(self, kind: str, nbytes: float) -> None:
        group = list(range(len(self.ranks)))
        for rank in self.ranks:
            rank.ring(kind, group, nbytes)

    def start_epoch(self, epoch: int) -> None:
        for rank in self.ranks:
            rank.start_epoch(epoch)

    def end_epoch(self, epoch: int) -> None:
        for rank in self.ranks:
            rank.end_epoch(epoch)

    def replayed(self, topology: Topology) -> list[ReplayedEpoch]:
        """Every epoch written, timed under ``topology``."""
        return replay({rank.rank: rank.events for rank in self.ranks}, topology)
