"""Halo exchange: the boundary rows a layer needs from other ranks.

Forward: rank ``r`` sends ``h[send_index]`` (its inner rows that peers hold as halo) and
receives its halo rows, in one ``all_to_all_single`` with per-peer splits (``halo_fwd``).
Backward: the gradient of the received halo rows travels the reverse route (``halo_bwd``) and
is summed into the gradient of the rows that were sent; a rank's own rows that several peers
read accumulate every peer's contribution, exactly as in full-graph autograd. When the layer
input does not require a gradient (the input features), no backward message is sent.

:class:`HaloExchange` is the synchronous exchange of the graph-parallel baseline; its
``start_*`` halves are what strategies with other timing (stale, pipelined) build on.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import Communicator, InFlight
from gnntrain.graph import LocalGraph


class HaloExchange:
    """Exchange of a local graph's halo rows over ``comm``."""

    def __init__(self, graph: LocalGraph, comm: Communicator) -> None:
        self.comm = comm
        self.send_index = graph.send_index.to(comm.device)
        self.send_splits = graph.send_splits
        self.recv_splits = graph.recv_splits
        self.num_inner = graph.num_inner
        self.num_halo = graph.num_halo

    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Halo rows of ``h`` (the inner rows of a layer input), in local halo order, fresh."""
        return _Exchange.apply(h, self)

    def start_forward(self, h: torch.Tensor) -> InFlight:
        return self.comm.all_to_all_start(h.detach()[self.send_index], self.send_splits, self.recv_splits,
                                          "halo_fwd")

    def start_backward(self, grad_halo: torch.Tensor) -> InFlight:
        return self.comm.all_to_all_start(grad_halo.contiguous(), self.recv_splits, self.send_splits, "halo_bwd")

    def gradient_of_sent_rows(self, grad_sent: torch.Tensor) -> torch.Tensor:
        """Sum the gradients that came back for the sent rows into an ``[inner, width]`` gradient."""
        grad = grad_sent.new_zeros(self.num_inner, grad_sent.shape[1])
        return grad.index_add_(0, self.send_index, grad_sent)


class _Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, exchange: HaloExchange) -> torch.Tensor:  # type: ignore[override]
        ctx.exchange = exchange
        return exchange.start_forward(h).wait()

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        exchange = ctx.exchange
        return exchange.gradient_of_sent_rows(exchange.start_backward(grad_halo).wait()), None
