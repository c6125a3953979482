"""AdaQP's central/marginal split (Sec. 3.4): a layer computes the rows of its *central*
inner nodes (no halo in-neighbour; they read no halo row) while the halo exchange is in flight,
and those of the *marginal* ones once it arrives.

:func:`central_marginal` cuts a local graph into the two target views;
:class:`OverlappedHaloExchange` is the synchronous exchange with a gap between sending and
receiving, and runs whole layers that way (a
:class:`~gnntrain.models.gnn.LayerwiseHaloSource`). Each row is the same function of the same
inputs as without the split; dense maps applied to row subsets may round differently in the
last bits.
"""

from __future__ import annotations

from typing import Callable

import torch

from gnntrain.comm.communicator import Communicator, InFlight
from gnntrain.comm.quantized_exchange import BitPlan
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import Dropout, MessagePassingLayer, order, source_rows
from gnntrain.parallel.halo import HaloExchange


def central_marginal(graph: LocalGraph) -> tuple[LocalGraph, LocalGraph, torch.Tensor]:
    """The target views of the central inner nodes and of the marginal ones, and the
    permutation that puts ``cat([central rows, marginal rows])`` back in inner order."""
    marginal = torch.zeros(graph.num_inner, dtype=torch.bool, device=graph.device)
    marginal[graph.edge_dst[graph.edge_src >= graph.num_inner]] = True
    central_ids, marginal_ids = (~marginal).nonzero().view(-1), marginal.nonzero().view(-1)
    order = torch.argsort(torch.cat([central_ids, marginal_ids]))
    return graph.target_view(central_ids, with_halo=False), graph.target_view(marginal_ids, with_halo=True), order


class OverlappedHaloExchange(HaloExchange):
    """The synchronous exchange with a gap between sending and receiving.

    ``start(h, layer)`` sends ``h``'s boundary rows and returns a function that waits for the
    halo rows; the caller computes in between (see :meth:`propagate`). In the backward pass the
    halo gradient leaves as soon as autograd has it, and is waited for only when the gradient of
    the sent rows is needed: autograd runs the backward of what was computed between start and
    receive (later in the forward, so earlier in the backward queue) first. Same rows and bytes
    as :class:`HaloExchange`.
    """

    def __init__(self, graph: LocalGraph, comm: Communicator, plan: BitPlan | None = None,
                 generator: torch.Generator | None = None, wire: torch.dtype | None = None) -> None:
        super().__init__(graph, comm, plan, generator, wire)
        self.views = central_marginal(graph)

    def start(self, h: torch.Tensor, layer: int) -> Callable[[], torch.Tensor]:
        """Send ``h``'s boundary rows; the returned function waits for the halo rows."""
        exchange = _SplitExchange(self, layer)
        token = _Send.apply(h, exchange)
        return lambda: _Receive.apply(token, exchange)

    def propagate(self, conv: MessagePassingLayer, h: torch.Tensor, layer: int, graph: LocalGraph,
                  dropout: Dropout, *extra: torch.Tensor) -> torch.Tensor:
        """Layer ``layer`` with the central rows computed while the halo rows are in flight.
        ``graph`` must be the local graph this exchange was built for; both halves run in the
        order chosen for it."""
        receive = self.start(h, layer)
        ids, inner = graph.global_ids, graph.num_inner
        transform = order(conv, h, graph)
        h_inner = conv.read_inputs(dropout(h, ids[:inner]), transform)
        z_inner = conv.message(h_inner, transform)
        central, marginal, permutation = self.views
        a_central = conv.aggregate(z_inner, h_inner, central, transform, *extra)
        z = source_rows(z_inner, conv.message(dropout(receive(), ids[inner:]), transform))
        a_marginal = conv.aggregate(z, h_inner, marginal, transform, *extra)
        return conv.update(torch.cat([a_central, a_marginal])[permutation])


class _SplitExchange:
    """One layer's exchange: the forward rows in flight, then the backward gradients."""

    def __init__(self, halo: HaloExchange, layer: int) -> None:
        self.halo, self.layer = halo, layer
        self.rows: InFlight | None = None
        self.grads: InFlight | None = None


class _Send(torch.autograd.Function):
    """Forward: send the boundary rows; the output is an empty token that links the receive to
    ``h`` in the autograd graph. Backward: wait for the gradients of the sent rows."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, exchange: _SplitExchange) -> torch.Tensor:  # type: ignore[override]
        ctx.exchange = exchange
        exchange.rows = exchange.halo.start_forward(h, exchange.layer)
        return h.new_empty(0)

    @staticmethod
    def backward(ctx, grad_token: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        exchange = ctx.exchange
        return exchange.halo.gradient_of_sent_rows(exchange.grads.wait()), None


class _Receive(torch.autograd.Function):
    """Forward: wait for the halo rows. Backward: send their gradient back without waiting."""

    @staticmethod
    def forward(ctx, token: torch.Tensor, exchange: _SplitExchange) -> torch.Tensor:  # type: ignore[override]
        ctx.exchange = exchange
        return exchange.rows.wait()

    @staticmethod
    def backward(ctx, grad_halo: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        exchange = ctx.exchange
        exchange.grads = exchange.halo.start_backward(grad_halo, exchange.layer)
        return grad_halo.new_zeros(0), None
