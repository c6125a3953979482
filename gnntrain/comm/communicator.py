"""Collectives and point-to-point transfers over ``torch.distributed``, with per-call byte and
time accounting (:mod:`gnntrain.comm.meter`).

A communicator is one rank's view of one process group: the whole world, or one axis of the
job's device mesh (:mod:`gnntrain.parallel.mesh`). Ranks passed to it are ranks *in its group*.
Under an emulated network (:mod:`gnntrain.comm.network`) every transfer it makes is held back
to the emulated link's speed; the meter records the link time each one cost.

On a CUDA device, waiting on a transfer mostly makes the device's stream wait, not the host, so
times there are device times: CUDA events on the current stream mark where an operation
started, where the stream reached its wait and where it resumed, and the meter turns them into
seconds once the epoch has synchronised the device (:meth:`CommMeter.settle`). Exposed time is
the stream's stall (reached to resumed, which includes any host-side hold of an emulated link,
as the stream idles through it); total time runs from the start to the resumption.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, Callable

import torch
import torch.distributed as dist

from gnntrain.comm.meter import CommMeter
from gnntrain.comm.network import EmulatedNetwork, Hold

if TYPE_CHECKING:
    from gnntrain.parallel.mesh import WorkerContext


def payload_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def stream_mark(device: torch.device) -> torch.cuda.Event | None:
    """A timing event recorded now on ``device``'s current CUDA stream; ``None`` off CUDA."""
    if device.type != "cuda":
        return None
    event = torch.cuda.Event(enable_timing=True)
    event.record(torch.cuda.current_stream(device))
    return event


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
                   meter, ctx.network)

    @classmethod
    def of_world(cls, ctx: WorkerContext, meter: CommMeter) -> Communicator:
        """The communicator over every rank of the job."""
        return cls(ctx.rank, ctx.world_size, ctx.device, None, meter, ctx.network)

    def __init__(self, rank: int, world_size: int, device: torch.device, group: Any = None,
                 meter: CommMeter | None = None, network: EmulatedNetwork | None = None) -> None:
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.group = group
        self.meter = meter if meter is not None else CommMeter()
        self.network = network

    def side_channel(self) -> Communicator:
        """A communicator over the same ranks on a process group of its own (same backend,
        same meter), so that its operations can be in flight while this one's run. Every rank
        must call it at the same point."""
        if self.world_size == 1:
            return Communicator(self.rank, 1, self.device, None, self.meter, self.network)
        if dist.get_world_size(self.group) != dist.get_world_size():
            raise NotImplementedError("a side channel is made for a communicator over the whole world only")
        group = dist.new_group(backend=dist.get_backend())
        return Communicator(self.rank, self.world_size, self.device, group, self.meter, self.network)

    def close(self) -> None:
        """Destroy a side channel's process group."""
        if self.group is not None:
            dist.destroy_process_group(self.group)
            self.group = None

    def all_to_all_start(self, send: torch.Tensor, send_splits: list[int], recv_splits: list[int],
                         kind: str, decode: Callable[[torch.Tensor], torch.Tensor] | None = None,
                         into: torch.Tensor | None = None) -> InFlight:
        """Start sending ``send_splits[q]`` consecutive rows of ``send`` to each peer ``q`` and
        receiving ``recv_splits[q]`` rows from each (stacked in peer order, into the contiguous
        buffer ``into`` if given). The payload bytes are counted now; the time blocked and the
        operation's lifetime when :meth:`InFlight.wait` is called, which returns what arrived,
        passed through ``decode`` if given (e.g. dequantization)."""
        recv = send.new_empty((sum(recv_splits),) + tuple(send.shape[1:])) if into is None else into
        send = send.contiguous()
        self.meter.record(kind, payload_bytes(send), 0.0, 0.0)
        work = None
        if self.world_size > 1:
            work = dist.all_to_all_single(recv, send, recv_splits, send_splits, group=self.group, async_op=True)
        else:
            recv.copy_(send)
        row = payload_bytes(send[:1]) if send.shape[0] else 0
        hold = self._hold_exchange({q: n * row for q, n in enumerate(send_splits)},
                                   {q: n * row for q, n in enumerate(recv_splits)})
        return InFlight(recv, send, [work] if work is not None else [], self.meter, kind, self.device, decode, hold)

    def p2p_start(self, sends: list[tuple[int, torch.Tensor]], recvs: list[tuple[int, torch.Tensor]],
                  kind: str) -> InFlight:
        """Start point-to-point transfers, batched: send each ``(peer, tensor)`` of ``sends`` and
        receive into each ``(peer, buffer)`` of ``recvs`` (peers are ranks of this group). The
        sent payload bytes are counted now; waiting returns the list of receive buffers."""
        sends = [(peer, t.contiguous()) for peer, t in sends]
        self.meter.record(kind, sum(payload_bytes(t) for _, t in sends), 0.0, 0.0)
        ops = [dist.P2POp(dist.isend, t, self._global(peer), self.group) for peer, t in sends]
        ops += [dist.P2POp(dist.irecv, t, self._global(peer), self.group) for peer, t in recvs]
        works = dist.batch_isend_irecv(ops) if ops else []
        hold = self._hold_exchange({peer: payload_bytes(t) for peer, t in sends},
                                   {peer: payload_bytes(t) for peer, t in recvs})
        return InFlight([t for _, t in recvs], [t for _, t in sends], works, self.meter, kind, self.device, hold=hold)

    def send_start(self, peer: int, tensors: list[torch.Tensor], kind: str) -> InFlight:
        """Start sending ``tensors`` to ``peer`` (a rank of this group), one-sided: the peer
        receives them with :meth:`recv_start` whenever it gets there (a pipeline stage's
        activations). The payload bytes are counted now.

        Under an emulated network the sender's link times the transfer, and the emulated arrival
        time travels with the payload as one float64 (the emulator's clock, not counted: no
        real link carries it), so the receiver is held back to it however late it posted its
        receive. ``perf_counter`` is one clock for every process of a machine, which is where
        emulated networks run."""
        tensors = [t.contiguous() for t in tensors]
        nbytes = sum(payload_bytes(t) for t in tensors)
        self.meter.record(kind, nbytes, 0.0, 0.0)
        hold = self._hold_exchange({peer: nbytes}, {})
        stamp = [] if hold is None else [torch.tensor([hold.ready_at], dtype=torch.float64, device=self.device)]
        ops = [dist.P2POp(dist.isend, t, self._global(peer), self.group) for t in tensors + stamp]
        return InFlight(None, tensors + stamp, dist.batch_isend_irecv(ops), self.meter, kind, self.device, hold=hold)

    def recv_start(self, peer: int, buffers: list[torch.Tensor], kind: str) -> InFlight:
        """Start receiving into ``buffers`` what ``peer`` sends with :meth:`send_start`; waiting
        returns the buffers (and, under an emulated network, holds until the sender's emulated
        arrival time)."""
        stamp = None
        if self.network is not None and self.world_size > 1:
            stamp = torch.empty(1, dtype=torch.float64, device=self.device)
        ops = [dist.P2POp(dist.irecv, t, self._global(peer), self.group)
               for t in buffers + ([] if stamp is None else [stamp])]
        return InFlight(buffers, None, dist.batch_isend_irecv(ops), self.meter, kind, self.device, stamp=stamp)

    def _global(self, peer: int) -> int:
        """The world rank of ``peer``, a rank of this communicator's group."""
        return self.world_ranks[peer]

    @functools.cached_property
    def world_ranks(self) -> list[int]:
        """The world rank of each rank of this group, in group order."""
        if self.group is None:
            return list(range(self.world_size))
        return dist.get_process_group_ranks(self.group)

    def _hold_exchange(self, sent: dict[int, int], received: dict[int, int]) -> Hold | None:
        """The emulated completion of a transfer starting now (bytes per peer of this group; this
        rank's share to itself moves no bytes on a link)."""
        if self.network is None or self.world_size == 1:
            return None
        to_world = lambda per_peer: {self._global(q): n for q, n in per_peer.items() if q != self.rank}  # noqa: E731
        return self.network.exchange(time.perf_counter(), to_world(sent), to_world(received))

    def all_reduce(self, t: torch.Tensor, kind: str, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
        """In-place all-reduce; counts the payload this rank contributes (``numel x size``),
        nothing when there is no peer. The stream (or host) is blocked throughout, so its
        time is exposed and total alike."""
        start = time.perf_counter()
        if self.world_size == 1:
            self.meter.record(kind, 0, 0.0)
            return t
        started = stream_mark(self.device)
        dist.all_reduce(t, op=op, group=self.group)
        if self.network is not None:
            hold = self.network.all_reduce(start, payload_bytes(t), self.world_ranks)
            hold.wait()
            self.meter.record_link(kind, hold.busy_s, hold.latency_s)
        if started is None:
            self.meter.record(kind, payload_bytes(t), time.perf_counter() - start)
        else:
            self.meter.record(kind, payload_bytes(t), 0.0)
            self.meter.record_stream(kind, started, started, stream_mark(self.device))
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
            dist.all_reduce(t, op=op, group=self.group)
        return t


class InFlight:
    """A transfer started by :meth:`Communicator.all_to_all_start`, :meth:`~Communicator.p2p_start`,
    :meth:`~Communicator.send_start` or :meth:`~Communicator.recv_start`. Its lifetime runs from
    the start to its completion (marked by a callback on the works' futures where the backend
    offers them, else to the end of the wait; under an emulated network, no earlier than the
    emulated completion: ``hold`` on the sender's side, the sender's ``stamp`` on a one-sided
    receive). On a CUDA device both are device times (see the module's docstring)."""

    def __init__(self, recv: Any, send: Any, works: list, meter: CommMeter, kind: str, device: torch.device,
                 decode: Callable[[Any], Any] | None = None, hold: Hold | None = None,
                 stamp: torch.Tensor | None = None) -> None:
        self.recv, self.send, self.works, self.meter, self.kind = recv, send, works, meter, kind
        self.device = device
        self.decode = decode
        self.hold = hold
        self.stamp = stamp
        self.start = time.perf_counter()
        self.started = stream_mark(device)
        self.done_at: float | None = None
        if works and self.started is None:
            try:
                futures = [work.get_future() for work in works]
            except RuntimeError:  # gloo's point-to-point works have no future
                return
            torch.futures.collect_all(futures).then(self._mark_done)

    def _mark_done(self, _: Any) -> None:
        self.done_at = time.perf_counter()

    def wait(self) -> Any:
        """What arrived; counts the time blocked here (the host's, or on CUDA the stream's) as
        exposed communication."""
        begin = time.perf_counter()
        reached = stream_mark(self.device)
        for work in self.works:
            work.wait()
        done_at = self.done_at or time.perf_counter()
        if self.hold is not None:
            self.hold.wait()
            done_at = max(done_at, self.hold.ready_at)
            self.meter.record_link(self.kind, self.hold.busy_s, self.hold.latency_s)
        if self.stamp is not None:
            arrival = float(self.stamp)
            Hold(arrival, 0.0, 0.0).wait()
            done_at = max(done_at, arrival)
        if reached is None:
            self.meter.record(self.kind, 0, time.perf_counter() - begin, done_at - self.start)
        else:
            self.meter.record_stream(self.kind, self.started, reached, stream_mark(self.device))
        self.send = None
        return self.decode(self.recv) if self.decode is not None else self.recv


class _AllSum(torch.autograd.Function):
    """``y = sum_r t_r`` on every rank; ``dL/dt_r = sum_q dL_q/dy`` (every rank's loss uses y)."""

    @staticmethod
    def forward(ctx, t: torch.Tensor, comm: Communicator, kind: str) -> torch.Tensor:  # type: ignore[override]
        ctx.comm, ctx.kind = comm, kind
        return comm.all_reduce(t.clone(), kind)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        return ctx.comm.all_reduce(grad.clone(), ctx.kind + "_grad"), None, None
