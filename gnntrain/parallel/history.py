"""Chunks of a graph and the historical embeddings that let them be pipelined (GNNPipe
Sec. 3.2.2, Algorithm 1).

A rank holds a *member graph* (its share of the graph, a :class:`~gnntrain.graph.LocalGraph`:
the whole graph, or its part of a graph-parallel group's G-way split, with halo rows). The
graph's K chunks are trained one after another; :func:`carve_chunk` cuts chunk ``k``'s
:class:`ChunkView` out of the member graph: its inner rows are the member's nodes of chunk
``k``; its halo is first the rows of chunk ``k`` that the other members of the group own (they
are computed now, for the same chunk, and exchanged: *fresh*), then the rows of other chunks
its nodes read (*others*).

Each owned layer keeps a :class:`LayerHistory` over every row of the member graph: this
epoch's values (``current``) and the historical ones (``history``). Aggregating for chunk
``k``, a row of another chunk gives its current value if that chunk was processed earlier this
epoch, its historical value otherwise (:class:`ChunkHalo`).

Gradients. The epoch's backward runs the chunks in reverse order, one ``autograd.backward``
per chunk. A current row that chunk ``k`` read belongs to a chunk ``j`` processed earlier,
whose backward runs later: the gradient chunk ``k`` sends it is added up in ``grad`` and
handed to chunk ``j``'s backward together with its output gradient, so the epoch's gradient
is that of the whole epoch's (stale) forward pass. Historical rows were produced in an earlier
epoch: with ``detach_history`` (GNNPipe's trick 2, the default) their gradient is dropped;
without it, it is added up in ``history_grad`` and given to those rows when they are produced
in the next epoch (a one-epoch-stale gradient, PipeGCN-style: our reading of the "historical
gradients" the trick avoids).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gnntrain.graph import LocalGraph
from gnntrain.parallel.halo import HaloExchange


@dataclass
class ChunkView:
    graph: LocalGraph
    """The chunk's graph: inner rows, then the fresh halo rows (``recv_splits`` per member,
    the send plan restricted to the chunk), then the rows of other chunks."""
    rows: torch.Tensor
    """Member-graph local ids of the inner rows."""
    fresh: torch.Tensor
    """Member-graph local ids of the fresh halo rows (every halo row of the member graph that
    belongs to this chunk, read by this chunk's nodes or, later, by other chunks')."""
    others: torch.Tensor
    """Member-graph local ids of the rows of other chunks that this chunk's nodes read."""


def carve_chunk(graph: LocalGraph, chunk_of_local: torch.Tensor, k: int) -> ChunkView:
    """Chunk ``k`` of the member graph ``graph`` (``chunk_of_local``: the chunk of every local
    row)."""
    inner, members, device = graph.num_inner, graph.world_size, graph.device
    in_chunk = chunk_of_local == k
    rows = in_chunk[:inner].nonzero().view(-1)
    fresh = inner + in_chunk[inner:].nonzero().view(-1)
    into = in_chunk[graph.edge_dst]
    src, dst = graph.edge_src[into], graph.edge_dst[into]
    others = torch.unique(src[~in_chunk[src]])
    local_ids = torch.cat([rows, fresh, others])
    position = torch.full((graph.num_local,), -1, dtype=torch.long, device=device)
    position[local_ids] = torch.arange(local_ids.numel(), device=device)
    arange = torch.arange(members, device=device)
    halo_owner = torch.repeat_interleave(arange, torch.tensor(graph.recv_splits, device=device))
    send_peer = torch.repeat_interleave(arange, torch.tensor(graph.send_splits, device=device))
    sent = in_chunk[graph.send_index]
    view = LocalGraph(
        rank=graph.rank, world_size=members, num_inner=rows.numel(), num_halo=fresh.numel() + others.numel(),
        global_ids=graph.global_ids[local_ids], in_degree=graph.in_degree[local_ids],
        edge_src=position[src], edge_dst=position[dst],
        recv_splits=torch.bincount(halo_owner[fresh - inner], minlength=members).tolist(),
        send_index=position[graph.send_index[sent]],
        send_splits=torch.bincount(send_peer[sent], minlength=members).tolist(),
        x=graph.x[rows], y=graph.y[rows], train_mask=graph.train_mask[rows], val_mask=graph.val_mask[rows],
        test_mask=graph.test_mask[rows],
    )
    return ChunkView(view, rows, fresh, others)


class LayerHistory:
    """One layer's input rows over the member graph's ``rows`` local rows (module docstring)."""

    def __init__(self, rows: int, width: int, like: torch.Tensor, keep_history_grads: bool) -> None:
        new = lambda: like.new_zeros(rows, width)  # noqa: E731
        self.current, self.history, self.grad = new(), new(), new()
        self.history_grad = new() if keep_history_grads else None
        self.stale_grad = new() if keep_history_grads else None

    def begin_epoch(self) -> None:
        self.grad.zero_()
        if self.history_grad is not None:
            self.stale_grad, self.history_grad = self.history_grad, self.stale_grad
            self.history_grad.zero_()

    def end_epoch(self, refresh: bool) -> None:
        """``refresh``: this epoch's values become the history."""
        if refresh:
            self.history.copy_(self.current)

    def read(self, index: torch.Tensor, processed: torch.Tensor, with_grad: bool) -> torch.Tensor:
        """Rows ``index``: current where ``processed``, historical elsewhere; with ``with_grad``
        a leaf whose gradient is added up for the rows' owners."""
        current = processed[index]
        rows = torch.where(current.unsqueeze(1), self.current[index], self.history[index])
        if with_grad:
            rows.requires_grad_()
            rows.register_hook(lambda grad: self._collect(index, current, grad))
        return rows

    def _collect(self, index: torch.Tensor, current: torch.Tensor, grad: torch.Tensor) -> None:
        self.grad.index_add_(0, index[current], grad[current])
        if self.history_grad is not None:
            self.history_grad.index_add_(0, index[~current], grad[~current])

    def root_grad(self, index: torch.Tensor) -> torch.Tensor:
        """The gradient to hand to rows ``index`` as they are produced' backward runs: what later
        chunks sent them (plus last epoch's historical gradient without trick 2)."""
        grad = self.grad[index]
        return grad if self.stale_grad is None else grad + self.stale_grad[index]


class ChunkHalo:
    """The halo source of one chunk's forward pass: records each layer input's rows as current,
    exchanges the fresh rows within the group (``exchange``; None for a group of one), reads
    the other rows from the layer's history, and keeps the tensors produced here whose rows
    later chunks may read (:meth:`backward_roots`)."""

    def __init__(self, view: ChunkView, tables: dict[int, LayerHistory], processed: torch.Tensor,
                 exchange: HaloExchange | None) -> None:
        self.view, self.tables, self.processed, self.exchange = view, tables, processed, exchange
        self.produced: list[tuple[torch.Tensor, LayerHistory, torch.Tensor]] = []

    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        table, view = self.tables[layer], self.view
        fresh = self.exchange(h, layer) if self.exchange is not None else h[:0]
        table.current[view.rows] = h.detach()
        table.current[view.fresh] = fresh.detach()
        if h.requires_grad:
            self.produced += [(h, table, view.rows), (fresh, table, view.fresh)]
        return torch.cat([fresh, table.read(view.others, self.processed, h.requires_grad)])

    def backward_roots(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The tensors this chunk produced that need a gradient, and what later chunks sent them."""
        produced = [(t, table, index) for t, table, index in self.produced if t.requires_grad and t.numel()]
        return [t for t, _, _ in produced], [table.root_grad(index) for _, table, index in produced]


class FreshHalo:
    """The halo source of a full, fresh pass over the member graph (evaluation, and the pass that
    fills the history before the first epoch): the group's synchronous exchange, writing each
    layer's input rows into ``record``'s history when given."""

    def __init__(self, exchange: HaloExchange | None, record: dict[int, LayerHistory] | None = None) -> None:
        self.exchange, self.record = exchange, record

    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        halo = self.exchange(h, layer) if self.exchange is not None else h[:0]
        if self.record is not None:
            self.record[layer].history.copy_(torch.cat([h, halo]).detach())
        return halo
