"""How a communicator times its transfers: one interface, two clocks.

* :class:`WallTiming` — the real transport's time on the device's timeline
  (:mod:`gnntrain.timing.clock`): a transfer completes where the backend finished it (on NCCL an
  event on a watch stream that waits for the work; elsewhere the host time its future's callback,
  or the thread that posted a receive-first all-to-all, learns it; gloo's other point-to-point
  works tell no one: the end of the wait), and the rank goes on where it does.
* :class:`VirtualTiming` — the described cluster's time (:mod:`gnntrain.timing`): every operation
  is posted to the rank's links at its virtual post time, and its *stamp* (the post time and when
  the rank's egress is through) travels beside the data: gathered over the group for an
  all-to-all or an all-reduce, one float64 message after each point-to-point message to the
  same peer. At the wait the rank's clock moves to the completion the network model gives from
  the stamps it needs; nothing sleeps.

The communicator holds one, chosen once from the rank's :class:`~gnntrain.timing.virtual_rank.VirtualRank`
(or its absence), and asks it the same questions whichever it is: what to send beside an
operation's data (:meth:`stamps`), how to follow it once posted (:class:`Pending`), and how an
all-reduce ends (:meth:`all_reduced`).
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.distributed as dist

from gnntrain.comm.meter import Posting
from gnntrain.timing.cluster import LEVELS
from gnntrain.timing.links import Stamp
from gnntrain.timing.ops import VirtualOp

if TYPE_CHECKING:
    from gnntrain.comm.communicator import Communicator
    from gnntrain.timing.virtual_rank import VirtualRank

StampMessages = list[tuple[int, torch.Tensor]]
"""(peer in the group, tensor) messages that carry stamps beside an operation's data."""


class Pending:
    """One posted operation, followed until the rank has waited for it."""

    def completion_at_close(self) -> float | None:
        """Its completion where the rank can know it at an epoch's end while it is in flight."""
        return None

    def finish(self, reached: Any) -> tuple[Any, Any]:
        """The rank reached its wait at ``reached`` and its works are done: (the completion, or
        None where another path marks it; where the rank goes on)."""
        raise NotImplementedError

    def link_cost(self) -> tuple[float, float] | None:
        """Seconds its bytes occupied the rank's modelled links and its latency terms (None: no
        modelled link)."""
        return None


class WallPending(Pending):
    def __init__(self, comm: Communicator) -> None:
        self.comm = comm

    def finish(self, reached: Any) -> tuple[Any, Any]:
        return None, self.comm.clock.mark()


class WallTiming:
    """The real transport's time (module docstring)."""

    def __init__(self, comm: Communicator) -> None:
        self.comm = comm

    def stamps(self, op: VirtualOp, posting: Posting, collective: bool) -> tuple[Pending, StampMessages, StampMessages]:
        return WallPending(self.comm), [], []

    def follow(self, posting: Posting, works: list) -> Callable[[Any], None]:
        """Mark ``posting``'s completion where the backend tells it; the callback for a thread
        that posts and waits for the works itself."""
        comm = self.comm

        def completed(_: Any) -> None:
            posting.completed = time.perf_counter()

        if not works:
            return completed
        if comm.backend == "nccl":
            watch = _watch_stream(comm.device)
            with torch.cuda.stream(watch):
                for work in works:
                    work.wait()
                posting.completed = comm.clock.mark()
            return completed
        try:
            futures = [work.get_future() for work in works]
        except RuntimeError:  # gloo's point-to-point works have no future
            return completed
        torch.futures.collect_all(futures).then(completed)
        return completed

    def posted(self) -> None:
        """Nothing: the host's clock has what posting took."""

    def all_reduced(self, kind: str, nbytes: int, posting: Posting) -> None:
        """The all-reduce just made: the rank was blocked from its start until now."""
        self.comm.meter.record_span(posting, posting.started, self.comm.clock.mark())


class VirtualPending(Pending):
    """What completing an operation in virtual time takes: the works bringing its stamps and a
    function reading them once they are in (:meth:`gnntrain.timing.ops.VirtualOp.stamp_sources`
    order)."""

    def __init__(self, rank: VirtualRank, op: VirtualOp, op_id: int, works: list,
                 stamps: Callable[[], list[Stamp]]) -> None:
        self.rank, self.op, self.op_id, self.works, self.stamps = rank, op, op_id, works, stamps

    def completion_at_close(self) -> float | None:
        """The completion of a collective exchange still in flight when the rank's epoch ends
        (a stale exchange), for the epoch's account: its stamps' gather is waited for, so the
        account does not depend on how fast the host delivered them. Every member posts the
        gather where it posts the exchange, in the epoch this rank has finished, which needs
        nothing more of this rank: the wait cannot close a loop. None for point-to-point
        messages, whose stamps come with the data, at the wait."""
        if self.op.shape != "exchange" or not self.works:
            return None
        self.rank.clock.pause()
        for work in self.works:
            work.wait()
        return self.rank.links.complete(self.op, self.stamps())

    def finish(self, reached: Any) -> tuple[Any, Any]:
        for work in self.works:
            work.wait()
        return self.rank.complete(self.op, self.op_id, reached, self.stamps())

    def link_cost(self) -> tuple[float, float] | None:
        return self.rank.links.link_cost(self.op)


class AlonePending(Pending):
    """An operation of a group of one rank under the virtual clock: nothing moves between ranks,
    no time passes."""

    def __init__(self, rank: VirtualRank) -> None:
        self.rank = rank

    def finish(self, reached: Any) -> tuple[Any, Any]:
        self.rank.clock.skip()
        return None, reached


def _as_stamp(row: torch.Tensor) -> Stamp:
    post, *egress = row.tolist()
    return post, tuple(egress)


def _ignore(_: Any) -> None:
    pass


class VirtualTiming:
    """The described cluster's time (module docstring)."""

    def __init__(self, comm: Communicator, rank: VirtualRank) -> None:
        self.comm, self.rank = comm, rank

    def stamps(self, op: VirtualOp, posting: Posting, collective: bool) -> tuple[Pending, StampMessages, StampMessages]:
        """Post ``op`` to the rank's links (the host's cost of sending its messages is
        ``posting``'s, exposed): a collective's stamps gathered beside it over the group
        (asynchronously), else the stamp to send after each message to its peer and the buffers
        receiving the stamps of the messages it receives."""
        comm = self.comm
        if comm.world_size == 1:
            return AlonePending(self.rank), [], []
        op_id = self.rank.post(op)
        if op.leaves > op.post:
            posting.sending = (op.post, op.leaves)
        post, egress = op.stamp()
        mine = torch.tensor([post, *egress], dtype=torch.float64, device=comm.device)
        if collective:
            gathered = torch.empty(comm.world_size * (1 + len(egress)), dtype=torch.float64, device=comm.device)
            work = dist.all_gather_single(gathered, mine, group=comm.group, async_op=True)
            sources = [comm.group_rank[peer] for peer, _, _ in op.received]
            rows = gathered.view(comm.world_size, -1)
            return VirtualPending(self.rank, op, op_id, [work], lambda: [_as_stamp(rows[q]) for q in sources]), [], []
        sends = [(comm.group_rank[peer], mine) for peer, _, _ in op.sent]
        recvs = [(comm.group_rank[peer], torch.empty(1 + len(LEVELS), dtype=torch.float64, device=comm.device))
                 for peer, _, _ in op.received]
        return VirtualPending(self.rank, op, op_id, [], lambda: [_as_stamp(b) for _, b in recvs]), sends, recvs

    def follow(self, posting: Posting, works: list) -> Callable[[Any], None]:
        """The model gives the completion, at the wait or at the epoch's end: nothing to mark."""
        return _ignore

    def posted(self) -> None:
        """Forget what posting took (it is communication, not compute)."""
        self.rank.clock.skip()

    def all_reduced(self, kind: str, nbytes: int, posting: Posting) -> None:
        """The all-reduce just made, in virtual time: post it as a ring, gather every member's
        reservation and move the clock to the ring's completion."""
        comm = self.comm
        ring = VirtualOp("ring", posting.kind, posting.started, group=comm.world_ranks, nbytes=nbytes,
                         key=posting.keys[0], keys=posting.keys, counted=nbytes)
        op_id = self.rank.post(ring)
        gathered = torch.empty(comm.world_size, dtype=torch.float64, device=comm.device)
        dist.all_gather_single(gathered, torch.tensor([ring.reserved], dtype=torch.float64, device=comm.device),
                               group=comm.group)
        done, resumed = self.rank.complete(ring, op_id, posting.started, [(0.0, (x,)) for x in gathered.tolist()])
        posting.completed = done
        comm.meter.record_link(kind, *self.rank.links.link_cost(ring))
        comm.meter.record_span(posting, posting.started, resumed)


@functools.lru_cache(maxsize=None)
def _watch_stream(device: torch.device) -> torch.cuda.Stream:
    """A side stream of ``device`` that only waits for transfers, to mark their completion."""
    return torch.cuda.Stream(device)


def timing_of(comm: Communicator, rank: VirtualRank | None) -> WallTiming | VirtualTiming:
    """The communicator's timing: virtual under ``cluster.clock=virtual`` (``rank``), else wall."""
    return WallTiming(comm) if rank is None else VirtualTiming(comm, rank)
