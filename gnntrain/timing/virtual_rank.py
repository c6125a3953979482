"""A rank under the virtual clock: its clock (:mod:`gnntrain.timing.virtual_clock`), its links
(:mod:`gnntrain.timing.ops`) and, with ``cluster.trace``, its trace
(:mod:`gnntrain.timing.trace`). The communicator (:mod:`gnntrain.comm.communicator`) posts every
operation here and, once the participants' stamps have arrived beside the data, learns when it
completes."""

from __future__ import annotations

from pathlib import Path

import torch

from gnntrain.timing import clock as clocks
from gnntrain.timing.cluster import Topology
from gnntrain.timing.links import Stamp
from gnntrain.timing.virtual_clock import VirtualClock
from gnntrain.timing.ops import RankLinks, VirtualOp
from gnntrain.timing import trace
from gnntrain.timing.trace import TRACE_FILE, UNNAMED, EpochWindow, Overhead, Span, TraceWriter, Wait


COMPUTE_LOCK = ".compute.lock"
"""The lock file in the run dir through which ranks take turns (``cluster.virtual_compute=alone``)."""


class VirtualRank:
    """One rank's virtual clock, links and trace; its clock becomes the device's
    (:func:`gnntrain.timing.clock.use`). Traced, it names its compute: the spans between two
    events of the trace, or two phase boundaries (:func:`gnntrain.timing.clock.phase`), carry the
    innermost phase open then."""

    def __init__(self, topology: Topology, rank: int, device: torch.device, trace_dir: str | Path | None,
                 alone: Path | None = None) -> None:
        """``alone``: the lock file of ``cluster.virtual_compute=alone`` (None: thread CPU time)."""
        self.rank = rank
        if alone is not None:
            alone.parent.mkdir(parents=True, exist_ok=True)
        self.clock = VirtualClock(device, alone)
        clocks.use(self.clock)
        self.links = RankLinks(topology, rank)
        self.trace = None
        self.phases: list[str] = []
        self.last = 0.0
        """Where the last traced event or phase boundary left the rank's clock."""
        if trace_dir is not None:
            self.trace = TraceWriter(Path(trace_dir) / TRACE_FILE, rank)
            if rank == 0:  # before any rank's first epoch ends, which needs rank 0's part in it
                Path(trace_dir).mkdir(parents=True, exist_ok=True)
                trace.start(self.trace.path)
            clocks.name_phases(self)

    def _span_until(self, at: float) -> None:
        """Trace the compute since the last event, up to ``at``, under the open phase."""
        if at > self.last:
            self.trace.add(Span(self.phases[-1] if self.phases else UNNAMED, self.last, at))
        self.last = max(self.last, at)

    def enter(self, name: str) -> None:
        """Open the phase ``name``, inside the open one (``forward layer 1: halo pack``)."""
        self._span_until(self.clock.mark())
        self.phases.append(f"{self.phases[-1]}: {name}" if self.phases else name)

    def exit(self) -> None:
        self._span_until(self.clock.mark())
        self.phases.pop()

    def relabel(self, name: str) -> None:
        """From now on the open phase is ``name`` (inside its parent): autograd names a backward
        pass's layers this way, as it reaches each (:func:`gnntrain.timing.clock.relabel`)."""
        if not self.phases:
            return
        self._span_until(self.clock.mark())
        self.phases[-1] = f"{self.phases[-2]}: {name}" if len(self.phases) > 1 else name

    def post(self, op: VirtualOp) -> int:
        """Spend the host's cost of sending ``op``'s messages (its clock advances by it) and
        reserve their bytes on the links from there; its trace id (0 untraced)."""
        sends = self.links.overhead(op, "send")
        if sends:
            self.clock.occupy(sends)
        op.depart = op.post + sends
        self.links.posted(op)
        if self.trace is None:
            return 0
        self._span_until(op.post)
        op_id = self.trace.post(op)
        if self.links.messages(op, "send"):
            self.trace.add(Overhead(op_id, "send", op.post, op.depart))
            self.last = op.depart
        return op_id

    def complete(self, op: VirtualOp, op_id: int, reached: float, stamps: list[Stamp]) -> tuple[float, float]:
        """The rank, at ``reached``, waited for ``op``: when it completed and when the rank went
        on (its clock moved there)."""
        done = self.links.complete(op, stamps)
        arrived = self.clock.wait_until(done)
        receives = self.links.overhead(op, "recv")
        if receives:
            self.clock.occupy(receives)
        if self.trace is not None:
            self._span_until(reached)
            self.trace.add(Wait(op_id, reached, done, arrived))
            if self.links.messages(op, "recv"):
                self.trace.add(Overhead(op_id, "recv", arrived, arrived + receives))
            self.last = arrived + receives
            self.clock.skip()
        return done, arrived + receives

    one_origin = True
    """Every rank's virtual clock starts at 0: no offsets between them."""

    def begin_epoch(self) -> None:
        """The record round and the resetting before the epoch are not the epoch's."""
        self.clock.skip()

    def counters(self) -> dict[str, float]:
        """What the rank's clock counts apart, so far: its compute (virtual seconds, measured
        independently of the operations), the thread CPU seconds of its compute spans and of its
        communication calls (what :meth:`skip <gnntrain.timing.virtual_clock.VirtualClock.skip>`
        forgot: a diagnostic, not virtual time)."""
        return {"compute_time": self.clock.compute_s, "compute_cpu_time": self.clock.compute_cpu_s,
                "comm_call_time": self.clock.skipped_s}

    def epoch(self, epoch: int, start: float, end: float) -> None:
        """Trace epoch ``epoch``'s window and write the rank's lines (nothing untraced)."""
        if self.trace is None:
            return
        self.last = max(self.last, start)
        self._span_until(end)
        self.trace.add(EpochWindow(epoch, start, end))
        self.trace.flush()

    def finish(self) -> None:
        """Write what the trace holds still; no more spans are named after this rank's phases."""
        if self.trace is not None:
            self.trace.flush()
            clocks.name_phases(None)
