"""Halo exchange: the boundary rows a layer needs from other ranks.

Forward: rank ``r`` sends ``h[send_index]`` (its inner rows that peers hold as halo) and
receives its halo rows, in one ``all_to_all_single`` with per-peer splits (``halo_fwd``).
Backward: the gradient of the received halo rows travels the reverse route and is summed into
the gradient of the rows that were sent (``halo_bwd``); a rank's own rows that several peers
read accumulate every peer's contribution, exactly as in full-graph autograd. When the layer
input does not require a gradient (the input features), no backward message is sent.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import Communicator
from gnntrain.graph import LocalGraph


class HaloExchange:
    """Synchronous exchange of a local graph's halo rows (graph-parallel baseline)."""

    def __init__(self, graph: LocalGraph, comm: Communicator) -> None:
        self.comm = comm
        self.send_index = graph.send_index.to(comm.device)
        self.send_splits = graph.send_splits
        self.recv_splits = graph.recv_splits
        self.num_inner = graph.num_inner

    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        """Halo rows of ``h`` (the inner rows of a layer input), in local halo order."""
        return _Exchange.apply(h, self)

    def forward_rows(self, h: torch.Tensor) -> torch.Tensor:
        return self.comm.all_to_all(h[self.send_index], self.send_splits, self.recv_splits, "halo_fwd")

    def backward_rows(self, grad_halo: torch.Tensor) -> torch.Tensor:
        grad_sent = self.comm.all_to_all(grad_halo, self.recv_splits, self.send_splits, "halo_bwd")
        grad = grad_halo.new_zeros(self.num_inner, grad_halo.shape[1])
        return grad.index_add_(0, self.send_index, grad_sent)


class _Exchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, exchange: HaloExchange) -> torch.Tensor:  # type: ignore[override]
        ctx.exchange = exchange
        return exchange.forward_rows(h)

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return ctx.exchange.backward_rows(grad_halo.contiguous()), None
