"""A run's trace (``cluster.trace=true``, ``trace.jsonl`` in the run dir): per rank, in order,
every communication operation it posted and waited for and every epoch's window, in virtual
seconds. Compute is what lies between: a rank's clock advances only by compute and by waits
(:mod:`gnntrain.timing.virtual_clock`), so the compute before an event is its time less the time the
rank's previous event left it at.

One JSON object per line, each naming its rank (``r``) and event (``ev``):

* ``post``: operation ``id`` (the rank's count) of a ``shape`` (:data:`gnntrain.timing.ops.SHAPES`)
  and ``kind`` posted at ``post``, with its messages ``sent`` and ``received`` (``[peer's world
  rank, payload bytes, key]``), and a ring's ``group``, ``nbytes`` and ``key``;
* ``wait``: the rank reached its wait on operation ``id`` at ``reached``, the operation completed
  at ``done`` and the rank went on at ``resumed`` (``max(reached, done)``);
* ``epoch``: epoch ``epoch``'s window, ``start`` to ``end``.

Each rank appends its lines at the end of every epoch in one write to a file opened for
appending, so the ranks' lines interleave by epoch, never within one; :func:`read` sorts them
out. Rank 0 empties the file when the run starts, so a resumed run's trace holds the epochs it
ran itself (its clocks start again at 0). :func:`chrome` turns a trace into the Trace Event Format that Perfetto and
``chrome://tracing`` open.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

from gnntrain.timing.ops import VirtualOp

TRACE_FILE = "trace.jsonl"


class TraceWriter:
    """One rank's lines of the trace, written at every :meth:`flush`."""

    def __init__(self, path: Path, rank: int) -> None:
        self.path, self.rank = Path(path), rank
        self.lines: list[str] = []
        self.ops = 0

    def _add(self, event: dict) -> None:
        self.lines.append(json.dumps({"r": self.rank, **event}))

    def post(self, op: VirtualOp) -> int:
        """Record a posted operation; its id."""
        self.ops += 1
        event = {"ev": "post", "id": self.ops, "shape": op.shape, "kind": op.kind, "post": op.post,
                 "sent": op.sent, "received": op.received}
        if op.shape == "ring":
            event.update(group=op.group, nbytes=op.nbytes, key=op.key)
        self._add(event)
        return self.ops

    def wait(self, op_id: int, reached: float, done: float, resumed: float) -> None:
        self._add({"ev": "wait", "id": op_id, "reached": reached, "done": done, "resumed": resumed})

    def epoch(self, epoch: int, start: float, end: float) -> None:
        self._add({"ev": "epoch", "epoch": epoch, "start": start, "end": end})

    def flush(self) -> None:
        if not self.lines:
            return
        data = ("\n".join(self.lines) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.lines.clear()


def _keyed(value):
    """JSON's lists back into the tuples keys are made of."""
    return tuple(_keyed(v) for v in value) if isinstance(value, list) else value


def read(path: Path) -> dict[int, list[dict]]:
    """Every rank's events, in the order the rank recorded them; keys as tuples."""
    ranks: dict[int, list[dict]] = defaultdict(list)
    with open(path) as fh:
        for line in fh:
            event = json.loads(line)
            for name in ("sent", "received"):
                if name in event:
                    event[name] = [(peer, nbytes, _keyed(key)) for peer, nbytes, key in event[name]]
            if "key" in event:
                event["key"] = _keyed(event["key"])
            ranks[event.pop("r")].append(event)
    return dict(sorted(ranks.items()))


def chrome(ranks: dict[int, list[dict]]) -> dict:
    """The trace in the Trace Event Format (microseconds): one track per rank, its compute, its
    epochs and its waits as spans, and every operation as a span from its post to its
    completion on a track of its own below the rank's."""
    events = []
    for rank, trace in ranks.items():
        events.append({"ph": "M", "name": "process_name", "pid": rank, "args": {"name": f"rank {rank}"}})
        events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": 0, "args": {"name": "compute and waits"}})
        events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": 1, "args": {"name": "transfers in flight"}})
        events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": 2, "args": {"name": "epochs"}})
        posted, last = {}, 0.0
        for event in trace:
            at = event[{"post": "post", "wait": "reached", "epoch": "end"}[event["ev"]]]
            if at > last:
                events.append(_span("compute", rank, 0, last, at))
            if event["ev"] == "post":
                posted[event["id"]] = event
                last = max(last, event["post"])
            elif event["ev"] == "wait":
                op = posted.pop(event["id"], {"kind": "?", "post": event["reached"], "shape": "?"})
                if event["resumed"] > event["reached"]:
                    events.append(_span(f"wait {op['kind']}", rank, 0, event["reached"], event["resumed"]))
                events.append(_span(f"{op['kind']} ({op['shape']})", rank, 1, op["post"], event["done"],
                                    {"bytes sent": sum(m[1] for m in op.get("sent", ())),
                                     "bytes received": sum(m[1] for m in op.get("received", ()))}))
                last = event["resumed"]
            else:
                events.append(_span(f"epoch {event['epoch']}", rank, 2, event["start"], event["end"]))
                last = max(last, event["end"])
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"clock": "virtual"}}


def _span(name: str, pid: int, tid: int, start: float, end: float, args: dict | None = None) -> dict:
    span = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": start * 1e6, "dur": max(0.0, end - start) * 1e6}
    if args:
        span["args"] = args
    return span
