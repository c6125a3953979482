"""A rank under the virtual clock: its clock (:mod:`gnntrain.timing.virtual_clock`), its links
(:mod:`gnntrain.timing.ops`) and, with ``cluster.trace``, its trace
(:mod:`gnntrain.timing.trace`). The communicator (:mod:`gnntrain.comm.communicator`) posts every
operation here and, once the participants' stamps have arrived beside the data, learns when it
completes."""

from __future__ import annotations

from pathlib import Path

import torch

from gnntrain.timing import clock as clocks
from gnntrain.timing.links import Stamp, Topology
from gnntrain.timing.virtual_clock import VirtualClock
from gnntrain.timing.ops import RankLinks, VirtualOp
from gnntrain.timing.trace import TRACE_FILE, TraceWriter


COMPUTE_LOCK = ".compute.lock"
"""The lock file in the run dir through which ranks take turns (``cluster.virtual_compute=alone``)."""


class VirtualRank:
    """One rank's virtual clock, links and trace; its clock becomes the device's
    (:func:`gnntrain.timing.clock.use`)."""

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
        if trace_dir is not None:
            self.trace = TraceWriter(Path(trace_dir) / TRACE_FILE, rank)
            if rank == 0:  # before any rank's first epoch ends, which needs rank 0's part in it
                Path(trace_dir).mkdir(parents=True, exist_ok=True)
                self.trace.path.write_text("")

    def post(self, op: VirtualOp) -> int:
        """Reserve ``op``'s bytes on the links; its trace id (0 untraced)."""
        self.links.posted(op)
        return self.trace.post(op) if self.trace is not None else 0

    def complete(self, op: VirtualOp, op_id: int, reached: float, stamps: list[Stamp]) -> tuple[float, float]:
        """The rank, at ``reached``, waited for ``op``: when it completed and when the rank went
        on (its clock moved there)."""
        done = self.links.complete(op, stamps)
        resumed = self.clock.wait_until(done)
        if self.trace is not None:
            self.trace.wait(op_id, reached, done, resumed)
            self.clock.skip()
        return done, resumed
