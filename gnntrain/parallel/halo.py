"""Halo exchange: the boundary rows a layer needs from other ranks.

Forward: rank ``r`` sends ``h[send_index]`` (its inner rows that peers hold as halo) and
receives its halo rows, in one ``all_to_all_single`` with per-peer splits (``halo_fwd``).
Backward: the gradient of the received halo rows travels the reverse route (``halo_bwd``) and
is summed into the gradient of the rows that were sent; a rank's own rows that several peers
read accumulate every peer's contribution, exactly as in full-graph autograd. When the layer
input does not require a gradient (the input features), no backward message is sent.

:class:`HaloExchange` is the synchronous exchange of the graph-parallel baseline; its
``start_*`` halves are what strategies with other timing (stale, overlapped, pipelined) build
on. Given a :class:`~gnntrain.comm.quantized_exchange.BitPlan`, every exchange (either
direction, any timing) sends its rows quantized to the plan's per-row bit-widths; given a
``wire`` dtype (bfloat16 or float16, :mod:`gnntrain.comm.half_precision`), it sends them in
that format, both directions.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import Communicator, InFlight
from gnntrain.comm.half_precision import start_half
from gnntrain.comm.quantized_exchange import BitPlan, start_quantized
from gnntrain.data.local_graph import LocalGraph
from gnntrain.timing.clock import phase


class HaloExchange:
    """Exchange of a local graph's halo rows over ``comm``."""

    def __init__(self, graph: LocalGraph, comm: Communicator, plan: BitPlan | None = None,
                 generator: torch.Generator | None = None, wire: torch.dtype | None = None) -> None:
        if plan is not None and wire is not None:
            raise ValueError("a halo exchange sends either quantized rows (a bit plan) or 16-bit rows, not both")
        self.comm = comm
        self.plan, self.generator, self.wire = plan, generator, wire
        self.send_index = graph.send_index.to(comm.device)
        self.send_splits = graph.send_splits
        self.recv_splits = graph.recv_splits
        self.num_inner = graph.num_inner
        self.num_halo = graph.num_halo

    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Halo rows of ``h`` (the inner rows of a layer input), in local halo order, fresh."""
        return _Exchange.apply(h, self, layer)

    def start_forward(self, h: torch.Tensor, layer: int) -> InFlight:
        with phase("halo pack"):
            rows = h.detach()[self.send_index]
        return self._start(rows, layer, "fwd", self.send_splits, self.recv_splits, "halo_fwd")

    def start_backward(self, grad_halo: torch.Tensor, layer: int) -> InFlight:
        return self._start(grad_halo.contiguous(), layer, "bwd", self.recv_splits, self.send_splits, "halo_bwd")

    def _start(self, rows: torch.Tensor, layer: int, direction: str, send_splits: list[int],
               recv_splits: list[int], kind: str) -> InFlight:
        if self.plan is not None:
            return start_quantized(self.comm, rows, self.plan, layer, direction, kind, self.generator)
        if self.wire is not None:
            return start_half(self.comm, rows, self.wire, send_splits, recv_splits, kind)
        return self.comm.all_to_all_start(rows, send_splits, recv_splits, kind)

    def gradient_of_sent_rows(self, grad_sent: torch.Tensor) -> torch.Tensor:
        """Sum the gradients that came back for the sent rows into an ``[inner, width]`` gradient."""
        with phase("halo unpack"):
            grad = grad_sent.new_zeros(self.num_inner, grad_sent.shape[1])
            return grad.index_add_(0, self.send_index, grad_sent)


class _Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, exchange: HaloExchange, layer: int) -> torch.Tensor:  # type: ignore[override]
        ctx.exchange, ctx.layer = exchange, layer
        return exchange.start_forward(h, layer).wait()

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        exchange = ctx.exchange
        return exchange.gradient_of_sent_rows(exchange.start_backward(grad_halo, ctx.layer).wait()), None, None
