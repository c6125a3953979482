"""Collectives and point-to-point transfers over ``torch.distributed``, with per-call byte and
time accounting (:mod:`gnntrain.comm.meter`).

A communicator is one rank's view of one process group: the whole world, or one axis of the
job's device mesh (:mod:`gnntrain.parallel.mesh`). Ranks passed to it are ranks *in its group*.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch
import torch.distributed as dist

from gnntrain.comm.meter import CommMeter


def payload_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Communicator:
    """The rank's view of a process group (the default one unless ``group`` is given). With
    ``world_size == 1`` nothing is sent."""

    @classmethod
    def of_mesh_axis(cls, mesh, axis: str, device: torch.device, meter: CommMeter) -> Communicator:
        """The communicator of ``mesh``'s axis ``axis`` (a ``DeviceMesh`` dimension name); a
        single process's when there is no mesh."""
        if mesh is None:
            return cls(0, 1, device, None, meter)
        return cls(mesh.get_local_rank(axis), mesh[axis].size(), device, mesh.get_group(axis), meter)

    def __init__(self, rank: int, world_size: int, device: torch.device, group: Any = None,
                 meter: CommMeter | None = None) -> None:
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.group = group
        self.meter = meter if meter is not None else CommMeter()

    def side_channel(self) -> Communicator:
        """A communicator over the same ranks on a process group of its own (same backend,
        same meter), so that its operations can be in flight while this one's run. Every rank
        must call it at the same point."""
        if self.world_size == 1:
            return Communicator(self.rank, 1, self.device, None, self.meter)
        if dist.get_world_size(self.group) != dist.get_world_size():
            raise NotImplementedError("a side channel is made for a communicator over the whole world only")
        group = dist.new_group(backend=dist.get_backend())
        return Communicator(self.rank, self.world_size, self.device, group, self.meter)

    def close(self) -> None:
        """Destroy a side channel's process group."""
        if self.group is not None:
            dist.destroy_process_group(self.group)
            self.group = None

    def all_to_all_start(self, send: torch.Tensor, send_splits: list[int], recv_splits: list[int],
                         kind: str, decode: Callable[[torch.Tensor], torch.Tensor] | None = None) -> InFlight:
        """Start sending ``send_splits[q]`` consecutive rows of ``send`` to each peer ``q`` and
        receiving ``recv_splits[q]`` rows from each (stacked in peer order). The payload bytes
        are counted now; the time blocked and the operation's lifetime when
        :meth:`InFlight.wait` is called, which returns what arrived, passed through ``decode``
        if given (e.g. dequantization)."""
        recv = send.new_empty((sum(recv_splits),) + tuple(send.shape[1:]))
        send = send.contiguous()
        self.meter.record(kind, payload_bytes(send), 0.0, 0.0)
        work = None
        if self.world_size > 1:
            work = dist.all_to_all_single(recv, send, recv_splits, send_splits, group=self.group, async_op=True)
        return InFlight(recv, send, [work] if work is not None else [], self.meter, kind, decode)

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
        return InFlight([t for _, t in recvs], [t for _, t in sends], works, self.meter, kind)

    def _global(self, peer: int) -> int:
        """The world rank of ``peer``, a rank of this communicator's group."""
        return peer if self.group is None else dist.get_global_rank(self.group, peer)

    def all_reduce(self, t: torch.Tensor, kind: str, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
        """In-place all-reduce; counts the payload this rank contributes (``numel x size``),
        nothing when there is no peer."""
        start = time.perf_counter()
        if self.world_size == 1:
            self.meter.record(kind, 0, 0.0)
            return t
        dist.all_reduce(t, op=op, group=self.group)
        self.meter.record(kind, payload_bytes(t), time.perf_counter() - start)
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
    """A transfer started by :meth:`Communicator.all_to_all_start` or
    :meth:`Communicator.p2p_start`. Its lifetime runs from the start to its completion (marked
    by a callback on the works' futures where the backend offers them, else to the end of the
    wait)."""

    def __init__(self, recv: Any, send: Any, works: list, meter: CommMeter, kind: str,
                 decode: Callable[[Any], Any] | None = None) -> None:
        self.recv, self.send, self.works, self.meter, self.kind = recv, send, works, meter, kind
        self.decode = decode
        self.start = time.perf_counter()
        self.done_at: float | None = None
        if works:
            try:
                futures = [work.get_future() for work in works]
            except RuntimeError:  # gloo's point-to-point works have no future
                return
            torch.futures.collect_all(futures).then(self._mark_done)

    def _mark_done(self, _: Any) -> None:
        self.done_at = time.perf_counter()

    def wait(self) -> Any:
        """What arrived; counts the time blocked here as exposed communication. On a CUDA
        device the wait only makes the device's stream wait for the transfer, so this is the
        host's blocked time, which undercounts the device's."""
        begin = time.perf_counter()
        for work in self.works:
            work.wait()
        end = time.perf_counter()
        self.meter.record(self.kind, 0, end - begin, (self.done_at or end) - self.start)
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
