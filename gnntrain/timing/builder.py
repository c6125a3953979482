"""A predicted epoch as a trace: every rank's compute and operations written as a run's trace
(:mod:`gnntrain.timing.trace`) would hold them, then timed by replay
(:func:`gnntrain.timing.replay.replay`) under the described network. So a prediction goes through
the very network model and the very accounting that time a live run under the virtual clock and a
replayed one: queues, both ends' links, rings, two levels.

A method's timing model (:attr:`Method.timing_model <gnntrain.strategies.registry.Method.timing_model>`)
writes its epochs on a :class:`TraceBuilder`, one :class:`RankTrace` per rank, in program order:
compute spans advance the rank's own clock, posts and waits mark where its operations leave and
where it needs them. Waits take no time in the written trace: replay finds how long each is.
Operations are keyed as the communicator keys them (:meth:`Communicator.keys_of
<gnntrain.comm.communicator.Communicator.keys_of>`: ``(channel, source, destination, n)``, source
and destination -1 for a collective), counted per channel and ends on each rank: every rank posts
the same sequence, so both ends of a message, and every member of a collective, agree on its key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from gnntrain.timing.epoch import EpochTiming
from gnntrain.timing.cluster import Topology
from gnntrain.timing.replay import replay
from gnntrain.timing.trace import EpochWindow, Event, Overhead, Post, Span, Wait, epoch_compute

COLLECTIVE = -1
"""A collective's source and destination in its key."""


def _message(peer: int, nbytes: float, key: tuple) -> list:
    """A message to or from ``peer``, none where it carries no bytes (the communicator sends none)."""
    return [(peer, int(nbytes), key)] if int(nbytes) else []


@dataclass
class RankTrace:
    """One rank's trace being written."""

    rank: int
    now: float = 0.0
    events: list[Event] = field(default_factory=list)
    ops: int = 0
    counts: dict[tuple, int] = field(default_factory=dict)
    receiving: set[int] = field(default_factory=set)
    """The operations that receive messages, whose waits pay the host's cost of receiving them."""
    epoch_start: float = 0.0
    price: Callable[[float], float] = float
    """A written span's seconds from the seconds its timing model gave (a fitted step profile's
    dispatch and rate, :mod:`gnntrain.predict.step_fit`; unchanged by default)."""

    def _key(self, channel: tuple, source: int = COLLECTIVE, destination: int = COLLECTIVE) -> tuple:
        n = self.counts[(channel, source, destination)] = self.counts.get((channel, source, destination), -1) + 1
        return (channel, source, destination, (0, n))

    def _post(self, shape: str, kind: str, keys: tuple, sent: list, received: list, counted: float,
              group: tuple[int, ...] = (), nbytes: int = 0) -> int:
        self.ops += 1
        self.events.append(Post(self.ops, shape, kind, self.now, tuple(sent), tuple(received), keys, int(counted),
                                group, nbytes, keys[0] if shape == "ring" else ()))
        if sent:
            self.events.append(Overhead(self.ops, "send", self.now, self.now))
        if received:
            self.receiving.add(self.ops)
        return self.ops

    def compute(self, seconds: float, name: str = "compute") -> None:
        """``seconds`` of compute in the phase ``name``, priced (:attr:`price`)."""
        if seconds > 0:
            seconds = self.price(seconds)
            self.events.append(Span(name, self.now, self.now + seconds))
            self.now += seconds

    def exchange(self, kind: str, sent: dict[int, float], received: dict[int, float]) -> int:
        """Post an all-to-all (bytes to and from each peer, this rank's own block counted as the
        meter counts a send buffer, moving on no link); its id, to :meth:`wait` on."""
        key = self._key(("exchange", kind))
        return self._post("exchange", kind, (key,), [(q, int(n), key) for q, n in sent.items() if n and q != self.rank],
                          [(q, int(n), key) for q, n in received.items() if n and q != self.rank],
                          sum(sent.values()))

    def send(self, kind: str, peer: int, nbytes: float) -> int:
        """Post a one-sided send (a pipeline stage's rows, a migrating model)."""
        key = self._key(("p2p", kind), self.rank, peer)
        return self._post("send", kind, (key,), _message(peer, nbytes, key), [], nbytes)

    def swap(self, kind: str, to: int, nbytes: float, source: int, arriving: float) -> int:
        """Post point-to-point messages sent and received together (``p2p_start``)."""
        out, into = self._key(("p2p", kind), self.rank, to), self._key(("p2p", kind), source, self.rank)
        return self._post("exchange", kind, (out, into), _message(to, nbytes, out), _message(source, arriving, into),
                          nbytes)

    def recv(self, kind: str, peer: int, nbytes: float) -> int:
        key = self._key(("p2p", kind), peer, self.rank)
        return self._post("recv", kind, (key,), [], _message(peer, nbytes, key), 0)

    def ring(self, kind: str, group: list[int], nbytes: float) -> None:
        """An all-reduce over ``group`` (world ranks), waited at once."""
        if len(group) < 2:
            return
        key = self._key(("ring", kind, *group))
        self.wait(self._post("ring", kind, (key,), [], [], nbytes, tuple(group), int(nbytes)))

    def wait(self, op: int) -> None:
        """Wait for ``op``: replay finds how long, the host's cost of receiving its messages
        included."""
        self.events.append(Wait(op, self.now, self.now, self.now))
        if op in self.receiving:
            self.events.append(Overhead(op, "recv", self.now, self.now))

    def start_epoch(self) -> None:
        self.epoch_start = self.now

    def end_epoch(self, epoch: int) -> None:
        self.events.append(EpochWindow(epoch, self.epoch_start, self.now))


class TraceBuilder:
    """Every rank's trace being written."""

    def __init__(self, world: int, price: Callable[[float], float] = float) -> None:
        self.ranks = [RankTrace(r, price=price) for r in range(world)]
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

    def compute(self, seconds: list[float], name: str = "compute") -> None:
        for rank, s in zip(self.ranks, seconds):
            rank.compute(s, name)

    def ring(self, kind: str, nbytes: float) -> None:
        group = list(range(len(self.ranks)))
        for rank in self.ranks:
            rank.ring(kind, group, nbytes)

    def start_epoch(self) -> None:
        for rank in self.ranks:
            rank.start_epoch()

    def end_epoch(self, epoch: int) -> None:
        for rank in self.ranks:
            rank.end_epoch(epoch)

    def epoch_compute(self) -> dict[tuple[int, int], tuple[int, float]]:
        """Per (rank, epoch) written, its compute spans: how many and their seconds."""
        return epoch_compute({rank.rank: rank.events for rank in self.ranks})

    def replayed(self, topology: Topology, progress: Callable[[int], None] = lambda events: None) -> list[EpochTiming]:
        """Every epoch written, timed under ``topology`` (clock ``predicted``); ``progress`` as
        :func:`~gnntrain.timing.replay.replay` takes it."""
        return replay({rank.rank: rank.events for rank in self.ranks}, topology, "predicted", progress)

    @property
    def events(self) -> int:
        """How many events are written, over all ranks."""
        return sum(len(rank.events) for rank in self.ranks)
