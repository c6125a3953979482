"""Byte and time accounting for everything a rank sends.

Every transfer goes through :class:`gnntrain.comm.communicator.Communicator`, which records
at the call site the payload bytes this rank hands to the network (rows x width x element
size, plus any metadata) and the seconds the rank spent blocked on it, under a *kind*
(``halo_fwd``, ``allreduce``, ...). ``wait_s`` is exposed communication: time a rank could not
compute. Each operation is followed from where its data was ready to its completion
(:class:`Posting`); at the epoch's end the meter closes the epoch's ledger
(:meth:`CommMeter.close`: every operation as it stood then, in host times), and once the peers'
starts are known (:meth:`CommMeter.learn`, when the loop next records) its time splits into
waiting for peers, transfer and hidden (:meth:`CommMeter.account`,
:mod:`gnntrain.timing.accounting`). Every time comes from marks on the device's timeline
(:mod:`gnntrain.timing.clock`): on a CUDA device the device's times, read once the device has passed
them (:meth:`CommMeter.settle`).

Every kind belongs to one *category* (:mod:`gnntrain.timing.kinds`), so that a time or byte count
means the same thing whichever strategy produced it.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterator

from gnntrain.timing import accounting
from gnntrain.timing.accounting import Operation, RankAccount, latest_start
from gnntrain.timing.kinds import TIMED_CATEGORIES, category

@dataclass(eq=False)
class Posting:
    """One operation of a timed category as the meter follows it: its ``keys`` (one per message
    or collective it takes part in, the same on every rank taking part: ``(channel, source,
    destination, n)``, :meth:`gnntrain.comm.communicator.Communicator.keys_of`), marks of
    ``clock`` where its data was ready (``started``), where the rank reached its wait and went
    on (set by :meth:`CommMeter.record_span`), and where the backend completed it (set by
    whoever learns it first)."""

    kind: str
    keys: tuple
    clock: Any
    started: Any
    reached: Any = None
    resumed: Any = None
    completed: Any = None
    stamped: bool = False
    sending: tuple[float, float] | None = None
    """Under the virtual clock, the span the host spent sending its messages (the described
    per-message cost), exposed: the rank computes nothing meanwhile."""
    resolve: Any = None
    """Under the virtual clock, a function giving the completion of an operation still in
    flight at an epoch's end where it can be known then, else None."""

    @property
    def waited(self) -> bool:
        return self.resumed is not None

    def completed_at(self) -> float | None:
        """The host time of the backend's completion, None while unknown (not yet happened, or
        a work that tells no one)."""
        mark = self.completed
        if mark is None or (not isinstance(mark, float) and not mark.query()):
            return None
        return self.clock.host_time(mark)


@dataclass(frozen=True)
class EpochLedger:
    """An epoch's operations (:meth:`CommMeter.close`), its ``window`` (host times) and
    ``stamps``: the host times at which the operations first seen in it had their data ready,
    per key, which its peers need to place their transfers (:meth:`CommMeter.learn`)."""

    window: tuple[float, float]
    operations: tuple[Operation, ...]
    stamps: dict[tuple, float]



class CommMeter:
    def __init__(self) -> None:
        self.bytes: dict[str, int] = defaultdict(int)
        self.crossing: dict[str, int] = defaultdict(int)
        """Of :attr:`bytes`, those sent to a peer on another node of the described cluster."""
        self.wait_s: dict[str, float] = defaultdict(float)
        self.link_busy_s: dict[str, float] = defaultdict(float)
        self.link_latency_s: dict[str, float] = defaultdict(float)
        self._prefix = ""
        self._unsettled: list[Posting] = []
        self._open: list[Posting] = []
        self._peer_started: dict[tuple, float] = {}

    def record(self, kind: str, nbytes: int, wait_s: float = 0.0) -> None:
        key = self._prefix + kind
        category(key)
        self.bytes[key] += int(nbytes)
        self.wait_s[key] += wait_s

    def record_crossing(self, kind: str, nbytes: int) -> None:
        """Of the bytes just recorded under ``kind``, ``nbytes`` went to another node."""
        self.crossing[self._prefix + kind] += int(nbytes)

    def post(self, kind: str, keys: tuple, clock: Any, started: Any, followed: bool = True) -> Posting:
        """An operation of ``kind`` whose data is ready at the mark ``started``; followed until
        it has been waited for and accounted in an epoch (:meth:`account`), unless ``followed``
        is false (a group of one rank: nothing moves between ranks)."""
        key = self._prefix + kind
        self.record(kind, 0)  # a kind only received is listed, as every rank lists the same kinds
        posting = Posting(key, keys, clock, started)
        if followed and category(key) in TIMED_CATEGORIES:
            self._open.append(posting)
        return posting

    def record_span(self, posting: Posting, reached: Any, resumed: Any) -> None:
        """The wait on ``posting``: the rank (its stream, on CUDA) reached it at ``reached`` and
        went on at ``resumed``. Its exposed time ``reached -> resumed`` is
        added to :attr:`wait_s` now where every mark is a host time (a CPU), by :meth:`settle`
        otherwise."""
        posting.reached, posting.resumed = reached, resumed
        self._unsettled.append(posting)
        if all(isinstance(m, float) for m in (reached, resumed)):
            self.settle()

    def settle(self) -> None:
        """Add the exposed times of the waits recorded since the last call; on a device, waits
        until the device has passed their marks."""
        for posting in self._unsettled:
            self.wait_s[posting.kind] += posting.clock.seconds(posting.reached, posting.resumed)
        self._unsettled.clear()

    def learn(self, rank: int, stamps: list[dict[tuple, float]], offsets: list[float]) -> None:
        """Every rank's :attr:`EpochLedger.stamps` (``offsets[q]``: rank ``q``'s host clock less this rank's)
        kept where they concern this rank (a key naming it as source or destination, or a
        collective of a channel it belongs to)."""
        for peer, theirs in enumerate(stamps):
            if peer == rank:
                continue
            for key, at in theirs.items():
                channel, source, destination, _ = key
                if rank in (source, destination) or (source < 0 and rank in channel):
                    at -= offsets[peer]
                    self._peer_started[key] = max(self._peer_started.get(key, at), at)

    def close(self, window: tuple[float, float]) -> EpochLedger:
        """The epoch's ledger: the operations waited for since the last call and those still in
        flight, as they stand at the end of ``window`` (host times: the epoch), and the starts of
        those posted since the last call; the waited ones are then forgotten, those in flight
        stay followed into the next epoch."""
        operations, still_open, stamps = [], [], {}
        for posting in self._open:
            clock = posting.clock
            if not posting.stamped:
                posting.stamped = True
                stamps.update(dict.fromkeys(posting.keys, clock.host_time(posting.started)))
            done = posting.completed_at()
            if done is None and posting.resolve is not None:
                done = posting.resolve()
            waited = (clock.host_time(posting.reached), clock.host_time(posting.resumed)) if posting.waited else None
            operations.append(Operation(posting.kind, posting.keys, clock.host_time(posting.started), waited, done,
                                        posting.sending))
            if not posting.waited:
                still_open.append(posting)
        self._open = still_open
        return EpochLedger(window, tuple(operations), stamps)

    def account(self, ledger: EpochLedger, measured_compute: float | None = None) -> RankAccount:
        """The rank's account of the ledger's epoch (:func:`gnntrain.timing.accounting.account`),
        every operation's transfer placed from the latest start of any rank taking part. Call after
        :meth:`learn` has had the peers' stamps of the ledger's epoch, for the ledgers in the order
        of their epochs."""
        result = accounting.account(list(ledger.operations), ledger.window, latest_start(self._peer_started),
                                    measured_compute)
        for op in ledger.operations:
            if op.waited is not None:
                for key in op.keys:
                    self._peer_started.pop(key, None)
        return result

    def record_link(self, kind: str, busy_s: float, latency_s: float) -> None:
        """What a transfer cost on the modelled links (:mod:`gnntrain.timing.links`):
        seconds of bytes on the wire / bandwidth and of latency."""
        key = self._prefix + kind
        self.link_busy_s[key] += busy_s
        self.link_latency_s[key] += latency_s

    @contextlib.contextmanager
    def tagged(self, prefix: str) -> Iterator[None]:
        """Record under ``prefix + kind`` inside the block (``eval_`` or ``diag_``)."""
        saved, self._prefix = self._prefix, prefix
        try:
            yield
        finally:
            self._prefix = saved

    def reset(self) -> None:
        """Forget the epoch's bytes and times; operations still in flight stay followed."""
        self.bytes.clear()
        self.crossing.clear()
        self.wait_s.clear()
        self.link_busy_s.clear()
        self.link_latency_s.clear()
        self._unsettled.clear()
