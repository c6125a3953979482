"""A run's trace (``cluster.trace=true``, ``trace.jsonl`` in the run dir): per rank, in order,
every communication operation it posted and waited for, the host's cost of its messages, every
named compute span and every epoch's window, in virtual seconds. A rank's clock advances only by
compute, by waits and by those costs (:mod:`gnntrain.timing.virtual_clock`), so the compute before
an event is its time less the time the rank's previous event left it at; the spans name it.

One JSON object per line. The first is the format's header, ``{"ev": "format", "version": 2}``;
every other names its rank (``r``) and event (``ev``), one of the :data:`EVENTS`:

* ``post`` (:class:`Post`): operation ``id`` (the rank's count) of a ``shape``
  (:data:`gnntrain.timing.ops.SHAPES`) and ``kind`` posted at ``post``, its ``keys`` (the meter's,
  the same on every rank taking part), the payload bytes the meter ``counted`` for it, its
  messages ``sent`` and ``received`` (``[peer's world rank, payload bytes, key]``), and a ring's
  ``group``, ``nbytes`` and ``key``;
* ``wait`` (:class:`Wait`): the rank reached its wait on operation ``id`` at ``reached``, the
  operation completed at ``done`` and the rank went on at ``resumed`` (``max(reached, done)``);
* ``overhead`` (:class:`Overhead`): the host's cost of operation ``id``'s messages on one
  ``side`` (``send``: right after its post, before they leave; ``recv``: right after its wait,
  once they have arrived), ``start`` to ``end`` (the cluster's per-message ``o`` times the
  messages on each level): replay prices it anew for its cluster from the operation's messages;
* ``span`` (:class:`Span`): the rank computed from ``start`` to ``end`` in the phase ``name``
  (a model's block: ``forward layer 1``; ``backward``, ``optimizer step``, a strategy's own);
  ``compute`` where no phase was named;
* ``epoch`` (:class:`EpochWindow`): epoch ``epoch``'s window, ``start`` to ``end``.

Each rank appends its lines at the end of every epoch in one write to a file opened for
appending, so the ranks' lines interleave by epoch, never within one; :func:`read` sorts them
out. Rank 0 writes the header when the run starts, so a resumed run's trace holds the epochs it
ran itself (its clocks start again at 0). A trace of format 1 (no header, no keys, no counted
bytes, no spans, no host costs: gnntrain before the timing package) is read as far as it goes,
its keys taken from its messages and its messages' host costs added as events that took no time
(its run charged none); a later format is refused in one line. :func:`chrome` turns a trace into the
Trace Event Format that Perfetto and ``chrome://tracing`` open.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Union

from gnntrain.errors import GnntrainError, first_line
from gnntrain.timing.ops import SHAPES, Message, VirtualOp

TRACE_FILE = "trace.jsonl"
FORMAT = 2
"""The format this gnntrain writes; it reads 1 and 2."""
HEADER = {"ev": "format", "version": FORMAT}
UNNAMED = "compute"
"""A compute span's name where no phase was named."""


@dataclass(frozen=True, slots=True)
class Post:
    id: int
    shape: str
    kind: str
    post: float
    sent: tuple[Message, ...] = ()
    received: tuple[Message, ...] = ()
    keys: tuple = ()
    counted: int = 0
    group: tuple[int, ...] = ()
    nbytes: int = 0
    key: tuple = ()

    def op(self, post: float) -> VirtualOp:
        """The operation, posted anew at ``post``."""
        return VirtualOp(self.shape, self.kind, post, sent=list(self.sent), received=list(self.received),
                         group=list(self.group), key=self.key, nbytes=self.nbytes, keys=self.keys,
                         counted=self.counted)


@dataclass(frozen=True, slots=True)
class Wait:
    id: int
    reached: float
    done: float
    resumed: float


@dataclass(frozen=True, slots=True)
class Overhead:
    id: int
    side: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Span:
    name: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class EpochWindow:
    epoch: int
    start: float
    end: float


Event = Union[Post, Wait, Overhead, Span, EpochWindow]
EVENTS: dict[str, type] = {"post": Post, "wait": Wait, "overhead": Overhead, "span": Span, "epoch": EpochWindow}
NAMES = {kind: name for name, kind in EVENTS.items()}


def post_of(op: VirtualOp, op_id: int) -> Post:
    """The trace's record of a posted operation."""
    return Post(op_id, op.shape, op.kind, op.post, tuple(op.sent), tuple(op.received), tuple(op.keys), op.counted,
                tuple(op.group), op.nbytes, tuple(op.key))


def epoch_compute(ranks: dict[int, list[Event]]) -> dict[tuple[int, int], tuple[int, float]]:
    """Per (rank, epoch), the compute spans inside the epoch's window: how many and their seconds."""
    out = {}
    for rank, events in ranks.items():
        spans = [e for e in events if isinstance(e, Span)]
        for window in (e for e in events if isinstance(e, EpochWindow)):
            inside = [s.end - s.start for s in spans if window.start <= s.start < window.end]
            out[rank, window.epoch] = (len(inside), sum(inside))
    return out


def encode(rank: int, event: Event) -> str:
    return json.dumps({"r": rank, "ev": NAMES[type(event)], **asdict(event)})


class TraceWriter:
    """One rank's lines of the trace, written at every :meth:`flush`."""

    def __init__(self, path: Path, rank: int) -> None:
        self.path, self.rank = Path(path), rank
        self.lines: list[str] = []
        self.ops = 0

    def add(self, event: Event) -> None:
        self.lines.append(encode(self.rank, event))

    def post(self, op: VirtualOp) -> int:
        """Record a posted operation; its id."""
        self.ops += 1
        self.add(post_of(op, self.ops))
        return self.ops

    def flush(self) -> None:
        if not self.lines:
            return
        data = ("\n".join(self.lines) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.lines.clear()


def start(path: Path) -> None:
    """Begin a trace at ``path``: its header alone (rank 0, before any rank's first epoch ends)."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, (json.dumps(HEADER) + "\n").encode())
    finally:
        os.close(fd)


def _keyed(value, shared: dict):
    """JSON's lists back into the tuples keys are made of, each equal key one object (``shared``
    holds those met so far: a trace repeats its keys on every message of every epoch)."""
    if not isinstance(value, list):
        return value
    key = tuple(_keyed(v, shared) for v in value)
    return shared.setdefault(key, key)


def _messages(value, shared: dict) -> tuple[Message, ...]:
    return tuple((peer, nbytes, _keyed(key, shared)) for peer, nbytes, key in value)


LONGEST_S = 1e7
"""The latest time a trace may name (virtual seconds, some 115 days): a later one is damage."""
TIMES = ("post", "reached", "done", "resumed", "start", "end")
COUNTS = ("id", "counted", "nbytes", "epoch")


def _count(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what} {value!r} is not a count")
    return value


def _checked(rank: int, event: Event) -> Event:
    """``event`` where its times are finite seconds in 0..:data:`LONGEST_S` that end no earlier
    than they start, its counts and byte sizes whole numbers >= 0, its shape one of
    :data:`~gnntrain.timing.ops.SHAPES`; ValueError naming the field otherwise."""
    _count(rank, "rank")
    for name in TIMES:
        value = getattr(event, name, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 <= value <= LONGEST_S):
            raise ValueError(f"{name} {value!r} is not a time in 0..{LONGEST_S:g} s")
    for name in COUNTS:
        if hasattr(event, name):
            _count(getattr(event, name), name)
    if getattr(event, "end", 0) < getattr(event, "start", 0) or getattr(event, "resumed", 1) < getattr(event, "reached", 0):
        raise ValueError("it ends before it starts")
    if isinstance(event, Post):
        if event.shape not in SHAPES:
            raise ValueError(f"shape {event.shape!r}")
        for peer, nbytes, _ in event.sent + event.received:
            _count(peer, "peer")
            _count(nbytes, "message bytes")
        for member in event.group:
            _count(member, "ring member")
    return event


def _peers(event: Event) -> list[int]:
    if not isinstance(event, Post):
        return []
    return [peer for peer, _, _ in event.sent + event.received] + list(event.group)


def _decode(line: dict, version: int, shared: dict) -> tuple[int, Event]:
    """One line's rank and event; equal keys and names are one object across lines (``shared``)."""
    rank, name = line.pop("r"), line.pop("ev")
    kind = EVENTS.get(name)
    if kind is None:
        raise ValueError(f"event {name!r}")
    for text in ("name", "kind", "shape", "side"):
        if isinstance(line.get(text), str):
            line[text] = shared.setdefault(line[text], line[text])
    if kind is Post:
        line["sent"] = _messages(line.get("sent", ()), shared)
        line["received"] = _messages(line.get("received", ()), shared)
        line["key"], line["group"] = _keyed(line.get("key", ()), shared), tuple(line.get("group", ()))
        if version == 1:  # keys from the messages; bytes as sent (the rank's own share unknown)
            keys = {key for _, _, key in line["sent"] + line["received"]} | ({line["key"]} if line["key"] else set())
            line["keys"] = tuple(sorted(keys, key=repr))
            line["counted"] = line["nbytes"] if line["shape"] == "ring" else sum(m[1] for m in line["sent"])
        else:
            line["keys"] = _keyed(line["keys"], shared)
    return rank, _checked(rank, kind(**line))


def _with_overheads(events: list[Event]) -> list[Event]:
    """A format-1 trace's events with the host's costs of its messages as events of their own
    (none was charged when it ran: each takes no time), so that replay prices them on a cluster
    that describes some."""
    out: list[Event] = []
    receiving: set[int] = set()
    for event in events:
        out.append(event)
        if isinstance(event, Post):
            if event.sent and event.shape != "ring":
                out.append(Overhead(event.id, "send", event.post, event.post))
            if event.received and event.shape != "ring":
                receiving.add(event.id)
        elif isinstance(event, Wait) and event.id in receiving:
            out.append(Overhead(event.id, "recv", event.resumed, event.resumed))
    return out


def read(path: Path) -> dict[int, list[Event]]:
    """Every rank's events, in the order the rank recorded them; a trace of a format this
    gnntrain does not read, or a damaged one, is refused in one line."""
    ranks: dict[int, list[Event]] = defaultdict(list)
    version = 1
    shared: dict = {}
    with open(path, "rb") as fh:
        for number, text in enumerate(fh, 1):
            try:
                line = json.loads(text.decode())
                if number == 1 and line.get("ev") == "format":
                    version = line.get("version")
                    if version not in (1, FORMAT):
                        raise GnntrainError(f"{path}: trace format {version!r}; valid: 1 to {FORMAT} (a newer "
                                            "gnntrain wrote it)")
                    continue
                rank, event = _decode(line, version, shared)
            except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
                raise GnntrainError(f"{path}:{number}: not a trace event ({first_line(exc)}); valid: the trace.jsonl "
                                    "a run with cluster.trace=true wrote") from None
            ranks[rank].append(event)
    world = len(ranks)
    if sorted(ranks) != list(range(world)):
        raise GnntrainError(f"{path}: holds the lines of ranks {', '.join(map(str, sorted(ranks)[:8]))} only; valid: "
                            "every rank of one run, 0 to its last (under torchrun: a run dir on a shared filesystem)")
    stray = next((p for events in ranks.values() for e in events for p in _peers(e) if p >= world), None)
    if stray is not None:
        raise GnntrainError(f"{path}: a message to or from rank {stray} of a run of {world} ranks; valid: the "
                            "trace.jsonl a run with cluster.trace=true wrote")
    if version == 1:
        ranks = {rank: _with_overheads(events) for rank, events in ranks.items()}
    return dict(sorted(ranks.items()))


def phase_times(ranks: dict[int, list[Event]]) -> dict[str, float]:
    """Seconds of compute per epoch in each named phase (a span's name), mean over the ranks,
    the largest first: where an epoch's compute goes."""
    totals: dict[str, float] = defaultdict(float)
    for trace in ranks.values():
        epochs = max(1, sum(isinstance(event, EpochWindow) for event in trace))
        for event in trace:
            if isinstance(event, Span):
                totals[event.name] += (event.end - event.start) / epochs / len(ranks)
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def chrome(ranks: dict[int, list[Event]]) -> dict:
    """The trace in the Trace Event Format (microseconds): one track per rank, its named compute
    spans, its epochs and its waits, and every operation as a span from its post to its
    completion on a track of its own below the rank's."""
    events = []
    for rank, trace in ranks.items():
        events.append({"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}})
        events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": 0, "args": {"name": "compute and waits"}})
        events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": 1, "args": {"name": "transfers in flight"}})
        events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": 2, "args": {"name": "epochs"}})
        posted: dict[int, Post] = {}
        waited: dict[int, Post] = {}
        last = 0.0
        for event in trace:
            at = {Post: "post", Wait: "reached", EpochWindow: "end", Span: "start", Overhead: "start"}[type(event)]
            if getattr(event, at) > last:
                events.append(_span(UNNAMED, rank, 0, last, getattr(event, at)))
            if isinstance(event, Post):
                posted[event.id] = event
                last = max(last, event.post)
            elif isinstance(event, Span):
                events.append(_span(event.name, rank, 0, event.start, event.end))
                last = max(last, event.end)
            elif isinstance(event, Overhead):
                op = posted.get(event.id) or waited.pop(event.id, None)
                kind = op.kind if op is not None else "?"
                events.append(_span(f"{'send' if event.side == 'send' else 'receive'} overhead {kind}", rank, 0,
                                    event.start, event.end))
                last = max(last, event.end)
            elif isinstance(event, Wait):
                op = waited[event.id] = posted.pop(event.id, Post(event.id, "?", "?", event.reached))
                if event.resumed > event.reached:
                    events.append(_span(f"wait {op.kind}", rank, 0, event.reached, event.resumed))
                events.append(_span(f"{op.kind} ({op.shape})", rank, 1, op.post, event.done,
                                    {"bytes sent": sum(m[1] for m in op.sent),
                                     "bytes received": sum(m[1] for m in op.received)}))
                last = event.resumed
            else:
                events.append(_span(f"epoch {event.epoch}", rank, 2, event.start, event.end))
                last = max(last, event.end)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"clock": "virtual"}}


def _span(name: str, pid: int, tid: int, start: float, end: float, args: dict | None = None) -> dict:
    span = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": start * 1e6, "dur": max(0.0, end - start) * 1e6}
    if args:
        span["args"] = args
    return span

