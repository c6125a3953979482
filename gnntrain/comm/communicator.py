"""Collectives over ``torch.distributed`` with per-call byte and time accounting."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from gnntrain.comm.meter import CommMeter


def payload_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Communicator:
    """The rank's view of the process group. With ``world_size == 1`` nothing is sent."""

    def __init__(self, rank: int, world_size: int, device: torch.device) -> None:
        self.rank = rank
        self.world_size = world_size
        self.device = device
        self.meter = CommMeter()

    def all_to_all(self, send: torch.Tensor, send_splits: list[int], recv_splits: list[int],
                   kind: str) -> torch.Tensor:
        """Send ``send_splits[q]`` consecutive rows of ``send`` to each peer ``q``; receive
        ``recv_splits[q]`` rows from each, stacked in peer order."""
        recv = send.new_empty((sum(recv_splits),) + tuple(send.shape[1:]))
        start = time.perf_counter()
        if self.world_size > 1:
            dist.all_to_all_single(recv, send.contiguous(), recv_splits, send_splits)
        self.meter.record(kind, payload_bytes(send), time.perf_counter() - start)
        return recv

    def all_reduce(self, t: torch.Tensor, kind: str, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
        """In-place all-reduce; counts the payload this rank contributes (``numel x size``),
        nothing when there is no peer."""
        start = time.perf_counter()
        if self.world_size == 1:
            self.meter.record(kind, 0, 0.0)
            return t
        dist.all_reduce(t, op=op)
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
            dist.all_reduce(t, op=op)
        return t


class _AllSum(torch.autograd.Function):
    """``y = sum_r t_r`` on every rank; ``dL/dt_r = sum_q dL_q/dy`` (every rank's loss uses y)."""

    @staticmethod
    def forward(ctx, t: torch.Tensor, comm: Communicator, kind: str) -> torch.Tensor:  # type: ignore[override]
        ctx.comm, ctx.kind = comm, kind
        return comm.all_reduce(t.clone(), kind)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        return ctx.comm.all_reduce(grad.clone(), ctx.kind + "_grad"), None, None
