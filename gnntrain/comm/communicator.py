"""Collectives and point-to-point transfers over ``torch.distributed``, with per-call byte and
time accounting (:mod:`gnntrain.comm.meter`).

A communicator is one rank's view of one process group: the whole world, or one axis of the
job's device mesh (:mod:`gnntrain.parallel.mesh`). Ranks passed to it are ranks *in its group*.

Times are marks on the device's timeline (:mod:`gnntrain.timing.clock`): on a CPU the host's clock,
on CUDA events on the current stream, where waiting on a transfer mostly makes the stream wait,
not the host. A transfer *starts* where its data is ready (the stream reaches the call), is
*reached* where the rank (its stream) gets to the wait, *resumes* where it goes on, and
*completes* where the backend finished it: on NCCL an event on a watch stream that waits for the
work, elsewhere the host time the work finished (its future's callback, or the thread that
posted a receive-first all-to-all; other gloo point-to-point works have no future: the end of
the wait).
Exposed time is reached to resumed; time in flight is start to completion
(:meth:`~gnntrain.comm.meter.CommMeter.record_span`).

Point-to-point. NCCL batches a transfer's sends and receives (``batch_isend_irecv``, one NCCL
group); gloo runs them one by one (its coalescing path takes no CUDA tensors), and since gloo's
send and receive read and write host memory only, CUDA tensors cross through host copies: a
send copies its tensor to the host before it leaves, a receive lands in a host buffer and is
copied to the device tensor when waited for. Collectives need no copies: gloo stages CUDA
tensors itself.

Receives first on gloo. gloo's TCP transport sends a message only once the peer has posted its
receive, and that notice travels on the same connection as the data. gloo's own all-to-all
(``alltoallv``) posts each send before its receive, so a rank whose peer's notice has already
arrived puts all its data on the connection first, and its own notice reaches the peer only
behind it: the two directions of a full-duplex link take turns. Over a shaped link
(``network.mode=kernel``, 0.2 Gbit/s) back-to-back exchanges of 870 KB each way took 2.0x the
link's time, against 1.05x with every receive posted first. So where ranks reach each other
over a network (``receives_first``: kernel-shaped links, or workers on other machines), an
all-to-all on gloo runs as point-to-point transfers, all receives posted before any send, by a
thread of its own (as gloo runs its collectives off the rank's thread; the n-th all-to-all of a
group has its own tag on every rank, so its messages match whatever order the threads post in).
Between the processes of one machine gloo's collective stays: there the handoffs between
threads cost more than they save (an exchange over loopback took 500-850 us against 340-460).
Every point-to-point transfer posts its receives first. An all-to-all's dtypes are checked as a
collective's either way, as on NCCL, where it stays one ``all_to_all_single``.

Timing. The communicator times every transfer through its :mod:`~gnntrain.comm.timed` timing:
on the wall clock, the real transport's completion; on the virtual clock (``cluster.clock=virtual``,
:mod:`gnntrain.timing`), the completion the described cluster's model gives from every
participant's post time, whose stamps travel beside the data. It asks its timing the same
questions whichever it is; only what it tells the network model of an operation's messages
(:meth:`Communicator._messages`) is left out on the wall clock, which has no model.
"""

from __future__ import annotations

import _thread
import functools
import socket
import time
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.distributed as dist

from gnntrain.timing.clock import Clock, clock_of
from gnntrain.comm.dtypes import check_sendable
from gnntrain.comm.meter import CommMeter, Posting
from gnntrain.comm.timed import Pending, timing_of
from gnntrain.timing.ops import VirtualOp

if TYPE_CHECKING:
    from gnntrain.parallel.mesh import WorkerContext
    from gnntrain.timing.virtual_rank import VirtualRank


EXCHANGE_TAGS = 2**20
"""How many tags an all-to-all's point-to-point transfers on gloo cycle through (more than can
be in flight at once)."""
_POSTED: dict[tuple, int] = {}
"""Per channel and message direction (or collective), how many operations this process has
posted: the n-th has the same key on every rank taking part (:meth:`Communicator.keys_of`)."""
_SIDE_CHANNELS = [0]
"""How many side channels this process has made (every rank makes them in the same order)."""


def exchange_tag(keys: tuple) -> int:
    """The tag of an all-to-all on gloo posted as point-to-point transfers, from its collective
    key (:meth:`Communicator.keys_of`): the n-th collective of a group has the same key on every
    rank, so its messages carry the same tag everywhere and match one another whatever order the
    threads posting them run in (tag 0 is other point-to-point traffic's)."""
    _, _, _, (_, n) = keys[0]
    return 1 + n % EXCHANGE_TAGS


def payload_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Communicator:
    """The rank's view of a process group (the default one unless ``group`` is given). With
    ``world_size == 1`` nothing is sent."""

    @classmethod
    def of_mesh_axis(cls, ctx: WorkerContext, axis: str, meter: CommMeter) -> Communicator:
        """The communicator of the job mesh's axis ``axis`` (a ``DeviceMesh`` dimension name); a
        single process's when there is no mesh."""
        if ctx.mesh is None:
            return cls(0, 1, ctx.device, None, meter)
        return cls(ctx.mesh.get_local_rank(axis), ctx.mesh[axis].size(), ctx.device, ctx.mesh.get_group(axis),
                   meter, ctx.over_network, virtual=ctx.virtual, ranks_per_node=ctx.ranks_per_node)

    @classmethod
    def of_world(cls, ctx: WorkerContext, meter: CommMeter) -> Communicator:
        """The communicator over every rank of the job."""
        return cls(ctx.rank, ctx.world_size, ctx.device, None, meter, ctx.over_network, virtual=ctx.virtual,
                   ranks_per_node=ctx.ranks_per_node)

    def __init__(self, rank: int, world_size: int, device: torch.device, group: Any = None,
                 meter: CommMeter | None = None, receives_first: bool = False, lane: int = 0,
                 virtual: VirtualRank | None = None, ranks_per_node: int | None = None) -> None:
        """``receives_first``: run gloo's all-to-alls as point-to-point transfers, receives posted
        first (the module docstring; for ranks that reach each other over a network). ``lane``:
        0, or which side channel over the same ranks this is (:meth:`keys_of`).
        ``ranks_per_node``: consecutive world ranks per node of the described cluster (None: no
        nodes), for the bytes that cross between nodes (:meth:`_count_crossing`)."""
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.group = group
        self.meter = meter if meter is not None else CommMeter()
        self.receives_first = receives_first
        self.lane = lane
        self.virtual = virtual
        """The rank under the virtual clock (None: the wall clock)."""
        self.ranks_per_node = ranks_per_node
        self.timing = timing_of(self, virtual)
        """How its transfers are timed (:mod:`gnntrain.comm.timed`)."""
        self.clock: Clock = clock_of(device)
        self.job_backend = str(dist.get_backend()) if dist.is_initialized() else None
        """The job's backend, whose dtypes every transfer is checked against, with peers or not
        (a dtype a job of one worker sends must not fail only on two)."""

    def side_channel(self) -> Communicator:
        """A communicator over the same ranks on a process group of its own (same backend,
        same meter), so that its operations can be in flight while this one's run. Every rank
        must call it at the same point."""
        if self.world_size == 1:
            return Communicator(self.rank, 1, self.device, None, self.meter, virtual=self.virtual,
                                ranks_per_node=self.ranks_per_node)
        if dist.get_world_size(self.group) != dist.get_world_size():
            raise NotImplementedError("a side channel is made for a communicator over the whole world only")
        self.clock.pause()
        group = dist.new_group(backend=dist.get_backend())
        _SIDE_CHANNELS[0] += 1
        return Communicator(self.rank, self.world_size, self.device, group, self.meter, self.receives_first,
                            _SIDE_CHANNELS[0], self.virtual, self.ranks_per_node)

    def close(self) -> None:
        """Destroy a side channel's process group."""
        if self.group is not None:
            dist.destroy_process_group(self.group)
            self.group = None

    @functools.cached_property
    def backend(self) -> str | None:
        """The process group's backend (``nccl``, ``gloo``); None without peers."""
        return str(dist.get_backend(self.group)) if self.world_size > 1 else None

    def keys_of(self, sends: list[int] | None = None, recvs: list[int] = ()) -> tuple:
        """The keys under which the meter matches an operation about to be posted with the same
        operation on its peers (:meth:`gnntrain.comm.meter.CommMeter.learn`): a collective's
        ``(channel, -1, -1, (lane, n))`` for the n-th collective of this group (``sends`` None),
        else ``(channel, source, destination, (lane, n))`` per message, for the n-th message
        from that world rank to that one in this group, which both ends count alike. The channel
        is the group's world ranks."""
        if self.world_size == 1:
            return ()
        channel = tuple(self.world_ranks)
        me = self._global(self.rank)
        ends = [(-1, -1)] if sends is None else ([(me, self._global(q)) for q in sends]
                                                 + [(self._global(q), me) for q in recvs])
        keys = []
        for source, destination in ends:
            counter = (self.lane, channel, source, destination)
            n = _POSTED[counter] = _POSTED.get(counter, -1) + 1
            keys.append((channel, source, destination, (self.lane, n)))
        return tuple(keys)

    def all_to_all_start(self, send: torch.Tensor, send_splits: list[int], recv_splits: list[int],
                         kind: str, decode: Callable[[torch.Tensor], torch.Tensor] | None = None,
                         into: torch.Tensor | None = None) -> InFlight:
        """Start sending ``send_splits[q]`` consecutive rows of ``send`` to each peer ``q`` and
        receiving ``recv_splits[q]`` rows from each (stacked in peer order, into the contiguous
        buffer ``into`` if given). The payload bytes are counted now; the time blocked and the
        operation's lifetime when :meth:`InFlight.wait` is called, which returns what arrived,
        passed through ``decode`` if given (e.g. dequantization)."""
        check_sendable(self.job_backend, send.dtype, kind)
        recv = send.new_empty((sum(recv_splits),) + tuple(send.shape[1:])) if into is None else into
        send = send.contiguous()
        self.meter.record(kind, payload_bytes(send))
        row = payload_bytes(send[:1]) if send.shape[0] else 0
        self._count_crossing(kind, [(q, n * row) for q, n in enumerate(send_splits)])
        started = self.clock.mark()
        keys = self.keys_of()
        posting = self.meter.post(kind, keys, self.clock, started, followed=self.world_size > 1)
        pending, _, _ = self.timing.stamps(VirtualOp(
            "exchange", posting.kind, started, sent=self._messages([(q, n * row) for q, n in enumerate(send_splits)], keys[:1]),
            received=self._messages([(q, n * row) for q, n in enumerate(recv_splits)], keys[:1]),
            keys=keys, counted=payload_bytes(send)), posting, collective=True)
        works, post, landed = [], None, []
        if self.world_size == 1:
            recv.copy_(send)
        elif self.backend == "nccl" or not self.receives_first:
            works = [dist.all_to_all_single(recv, send, recv_splits, send_splits, group=self.group, async_op=True)]
        else:
            sent, arriving = send.split(send_splits), recv.split(recv_splits)
            arriving[self.rank].copy_(sent[self.rank])
            peers = [q for q in range(self.world_size) if q != self.rank]
            post, landed = self._point_to_point([(q, sent[q]) for q in peers if send_splits[q]],
                                                [(q, arriving[q]) for q in peers if recv_splits[q]], kind,
                                                exchange_tag(keys))
        self.timing.posted()
        return InFlight(self, recv, send, works, kind, posting, pending, decode, landed=landed, post=post)

    def p2p_start(self, sends: list[tuple[int, torch.Tensor]], recvs: list[tuple[int, torch.Tensor]],
                  kind: str) -> InFlight:
        """Start point-to-point transfers: send each ``(peer, tensor)`` of ``sends`` and receive
        into each ``(peer, buffer)`` of ``recvs`` (peers are ranks of this group). The sent
        payload bytes are counted now; waiting returns the list of receive buffers."""
        sends = [(peer, t.contiguous()) for peer, t in sends]
        self.meter.record(kind, sum(payload_bytes(t) for _, t in sends))
        self._count_crossing(kind, [(q, payload_bytes(t)) for q, t in sends])
        started = self.clock.mark()
        posting = self.meter.post(kind, self.keys_of([q for q, _ in sends], [q for q, _ in recvs]), self.clock,
                                  started)
        pending, stamp_sends, stamp_recvs = self.timing.stamps(VirtualOp(
            "exchange", posting.kind, started, sent=self._messages([(q, payload_bytes(t)) for q, t in sends], posting.keys),
            received=self._messages([(q, payload_bytes(t)) for q, t in recvs], posting.keys[len(sends):]),
            keys=posting.keys, counted=sum(payload_bytes(t) for _, t in sends)), posting, collective=False)
        post, landed = self._point_to_point(sends + stamp_sends, recvs + stamp_recvs, kind)
        works = post()
        self.timing.posted()
        return InFlight(self, [t for _, t in recvs], [t for _, t in sends], works, kind, posting, pending,
                        landed=landed)

    def send_start(self, peer: int, tensors: list[torch.Tensor], kind: str) -> InFlight:
        """Start sending ``tensors`` to ``peer`` (a rank of this group), one-sided: the peer
        receives them with :meth:`recv_start` whenever it gets there (a pipeline stage's
        activations). The payload bytes are counted now."""
        tensors = [t.contiguous() for t in tensors]
        nbytes = sum(payload_bytes(t) for t in tensors)
        self.meter.record(kind, nbytes)
        self._count_crossing(kind, [(peer, nbytes)])
        started = self.clock.mark()
        posting = self.meter.post(kind, self.keys_of([peer]), self.clock, started)
        pending, stamp_sends, _ = self.timing.stamps(VirtualOp(
            "send", posting.kind, started, sent=self._messages([(peer, nbytes)], posting.keys), keys=posting.keys,
            counted=nbytes), posting, collective=False)
        works = self._point_to_point([(peer, t) for t in tensors] + stamp_sends, [], kind)[0]()
        self.timing.posted()
        return InFlight(self, None, tensors, works, kind, posting, pending)

    def recv_start(self, peer: int, buffers: list[torch.Tensor], kind: str) -> InFlight:
        """Start receiving into ``buffers`` what ``peer`` sends with :meth:`send_start`; waiting
        returns the buffers."""
        started = self.clock.mark()
        posting = self.meter.post(kind, self.keys_of([], [peer]), self.clock, started)
        pending, _, stamp_recvs = self.timing.stamps(VirtualOp(
            "recv", posting.kind, started, received=self._messages([(peer, sum(payload_bytes(t) for t in buffers))],
                                                           posting.keys), keys=posting.keys), posting, collective=False)
        post, landed = self._point_to_point([], [(peer, t) for t in buffers] + stamp_recvs, kind)
        works = post()
        self.timing.posted()
        return InFlight(self, buffers, None, works, kind, posting, pending, landed=landed)

    def _messages(self, per_peer: list[tuple[int, int]], keys: tuple) -> list[tuple[int, int, tuple]]:
        """An operation's messages for the virtual clock (:mod:`gnntrain.timing.ops`): per peer of
        this group with bytes for it, its world rank, the bytes and the message's key (one key
        for all of a collective's); none to this rank itself."""
        if self.virtual is None or self.world_size == 1:
            return []
        if len(keys) == 1 and keys[0][1] < 0:
            keys = keys * len(per_peer)
        return [(self._global(q), n, key) for (q, n), key in zip(per_peer, keys) if q != self.rank and n]

    def _point_to_point(self, sends: list[tuple[int, torch.Tensor]], recvs: list[tuple[int, torch.Tensor]],
                        kind: str, tag: int = 0) -> tuple[Callable[[], list], list[tuple[torch.Tensor, torch.Tensor]]]:
        """Prepare the sends and receives of a transfer of ``kind`` (module docstring: batched on
        NCCL; one by one on gloo, receives first, CUDA tensors through host copies, made here),
        each dtype checked first: a function that posts them and returns their works, and the
        (device tensor, host buffer) pairs whose host buffer must be copied to the device once
        the works are done."""
        for _, t in sends + recvs:
            check_sendable(self.job_backend, t.dtype, kind, point_to_point=True)
        if not sends and not recvs:
            return list, []
        if self.backend == "nccl":
            ops = [dist.P2POp(dist.isend, t, self._global(peer), self.group) for peer, t in sends]
            ops += [dist.P2POp(dist.irecv, t, self._global(peer), self.group) for peer, t in recvs]
            return functools.partial(dist.batch_isend_irecv, ops), []
        staged = self.device.type != "cpu"
        host_sends = [(self._global(peer), t.cpu() if staged else t) for peer, t in sends]
        host_recvs, landed = [], []
        for peer, t in recvs:
            buffer = torch.empty(t.shape, dtype=t.dtype, pin_memory=True) if staged else t
            host_recvs.append((self._global(peer), buffer))
            if staged:
                landed.append((t, buffer))

        def post() -> list:
            works = [dist.irecv(buffer, peer, group=self.group, tag=tag) for peer, buffer in host_recvs]
            return works + [dist.isend(t, peer, group=self.group, tag=tag) for peer, t in host_sends]

        return post, landed

    def _count_crossing(self, kind: str, per_peer: list[tuple[int, int]]) -> None:
        """Count, beside a transfer's bytes, those it sends to peers on another node of the
        described cluster (``ranks_per_node``): what crosses the slow level. An all-reduce counts
        this rank's payload where its successor on the group's ring is on another node (a ring
        all-reduce's share of a rank: what it passes on), as the link model times it."""
        if self.ranks_per_node is None:
            return
        node = self._global(self.rank) // self.ranks_per_node
        self.meter.record_crossing(kind, sum(n for q, n in per_peer
                                             if self._global(q) // self.ranks_per_node != node))

    def _global(self, peer: int) -> int:
        """The world rank of ``peer``, a rank of this communicator's group."""
        return self.world_ranks[peer]

    @functools.cached_property
    def world_ranks(self) -> list[int]:
        """The world rank of each rank of this group, in group order."""
        if self.group is None:
            return list(range(self.world_size))
        return dist.get_process_group_ranks(self.group)

    @functools.cached_property
    def group_rank(self) -> dict[int, int]:
        """The rank in this group of each of its world ranks."""
        return {world: q for q, world in enumerate(self.world_ranks)}

    def all_reduce(self, t: torch.Tensor, kind: str, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
        """In-place all-reduce; counts the payload this rank contributes (``numel x size``),
        nothing when there is no peer. The rank (its stream) is blocked throughout, so its
        time is exposed and in flight alike."""
        check_sendable(self.job_backend, t.dtype, kind)
        if self.world_size == 1:
            self.meter.record(kind, 0)
            return t
        started = self.clock.mark()
        posting = self.meter.post(kind, self.keys_of(), self.clock, started)
        self.clock.pause()
        dist.all_reduce(t, op=op, group=self.group)
        self.meter.record(kind, payload_bytes(t))
        self._count_crossing(kind, [((self.rank + 1) % self.world_size, payload_bytes(t))])
        self.timing.all_reduced(kind, payload_bytes(t), posting)
        return t

    def all_sum(self, t: torch.Tensor, kind: str) -> torch.Tensor:
        """Differentiable sum of ``t`` over ranks (for statistics such as batch norm's): the
        backward pass sums the gradients over ranks too. Bytes go under ``kind`` forward and
        ``kind + "_grad"`` backward."""
        return _AllSum.apply(t, self, kind)

    def reduce_untracked(self, t: torch.Tensor, op: dist.ReduceOp.RedOpType) -> torch.Tensor:
        """All-reduce for telemetry (metric aggregation); deliberately not counted as training
        communication."""
        if self.world_size > 1:
            self.clock.pause()
            dist.all_reduce(t, op=op, group=self.group)
        return t

    def gather_untracked(self, t: torch.Tensor) -> torch.Tensor:
        """Every rank's ``t`` (same shape everywhere), stacked in rank order; telemetry, not
        counted."""
        if self.world_size == 1:
            return t.unsqueeze(0)
        out = [torch.empty_like(t) for _ in range(self.world_size)]
        self.clock.pause()
        dist.all_gather(out, t.contiguous(), group=self.group)
        return torch.stack(out)

    def gather_objects_untracked(self, obj: Any) -> list:
        """Every rank's picklable ``obj``, in rank order; telemetry, not counted."""
        if self.world_size == 1:
            return [obj]
        out: list = [None] * self.world_size
        self.clock.pause()
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def host_clock_offsets(self, rounds: int = 9) -> list[float]:
        """Per rank of the group, its host clock (``perf_counter``) less this rank's: 0 where
        every rank runs on one machine (one clock for all its processes); else the median over
        ``rounds`` of the clocks read just after a barrier, accurate to about the barrier's
        one-way latency."""
        if len(set(self.gather_objects_untracked(socket.gethostname()))) == 1:
            return [0.0] * self.world_size
        readings = []
        for _ in range(rounds):
            dist.barrier(group=self.group)
            now = torch.tensor([time.perf_counter()], dtype=torch.float64, device=self.device)
            readings.append(self.gather_untracked(now)[:, 0] - now[0])
        return torch.stack(readings).median(dim=0).values.tolist()


class InFlight:
    """A transfer started by :meth:`Communicator.all_to_all_start`, :meth:`~Communicator.p2p_start`,
    :meth:`~Communicator.send_start` or :meth:`~Communicator.recv_start`, followed by its
    communicator's timing (``pending``; the module docstring says how it is timed). ``landed``:
    host buffers to copy to the device tensors once the works are done; ``post``: a function that
    posts the works, run by a thread of its own (a receive-first all-to-all on gloo)."""

    def __init__(self, comm: Communicator, recv: Any, send: Any, works: list, kind: str, posting: Posting,
                 pending: Pending, decode: Callable[[Any], Any] | None = None,
                 landed: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
                 post: Callable[[], list] | None = None) -> None:
        self.comm, self.recv, self.send, self.works, self.kind = comm, recv, send, works, kind
        self.posting, self.pending = posting, pending
        self.decode, self.landed = decode, landed or []
        posting.resolve = pending.completion_at_close
        completed = comm.timing.follow(posting, [] if post is not None else works)
        self.waiter = _Waiter(post, completed) if post is not None else None

    def wait(self) -> Any:
        """What arrived; counts the time blocked here (the host's, or on CUDA the stream's) as
        exposed communication."""
        clock = self.comm.clock
        reached = clock.mark()
        clock.pause()
        if self.waiter is not None:
            self.waiter.join()
        else:
            for work in self.works:
                work.wait()
        for tensor, buffer in self.landed:
            tensor.copy_(buffer, non_blocking=True)
        completed, resumed = self.pending.finish(reached)
        if completed is not None:
            self.posting.completed = completed
        cost = self.pending.link_cost()
        if cost is not None:
            self.comm.meter.record_link(self.kind, *cost)
        self.comm.meter.record_span(self.posting, reached, resumed)
        self.send = None
        return self.decode(self.recv) if self.decode is not None else self.recv


class _Waiter:
    """A thread that runs ``post`` (which posts a receive-first all-to-all and returns its works),
    waits for the works and calls ``done`` when they have finished. Posting here keeps gloo's
    point-to-point writes, which copy what the socket takes before they return, off the rank's
    own thread, as gloo's collectives are; and the works, which have no future, get their
    completion marked when it happens, not when the rank gets to wait. Each work is waited for
    once: here, not by the rank. A low-level thread (``_thread``): it starts in about 30 us, a
    ``threading.Thread`` in 100."""

    def __init__(self, post: Callable[[], list], done: Callable[[Any], None]) -> None:
        self.error: BaseException | None = None
        self.finished = _thread.allocate_lock()
        self.finished.acquire()
        _thread.start_new_thread(self._run, (post, done))

    def _run(self, post: Callable[[], list], done: Callable[[Any], None]) -> None:
        try:
            for work in post():
                work.wait()
            done(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the rank by join()
            self.error = exc
        finally:
            self.finished.release()

    def join(self) -> None:
        """Block until the works have finished; raise what posting or waiting raised."""
        with self.finished:
            pass
        if self.error is not None:
            raise self.error


class _AllSum(torch.autograd.Function):
    """``y = sum_r t_r`` on every rank; ``dL/dt_r = sum_q dL_q/dy`` (every rank's loss uses y)."""

    @staticmethod
    def forward(ctx, t: torch.Tensor, comm: Communicator, kind: str) -> torch.Tensor:  # type: ignore[override]
        ctx.comm, ctx.kind = comm, kind
        return comm.all_reduce(t.clone(), kind)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        return ctx.comm.all_reduce(grad.clone(), ctx.kind + "_grad"), None, None
