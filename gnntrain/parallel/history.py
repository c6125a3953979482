"""Chunks of a graph and the historical embeddings that let them be pipelined (GNNPipe
Sec. 3.2.2, Algorithm 1).

A rank holds a *member graph* (its share of the graph, a :class:`~gnntrain.graph.LocalGraph`:
the whole graph, or its part of a graph-parallel group's G-way split, with halo rows). The
graph's K chunks are trained one after another; :func:`carve_chunk` cuts chunk ``k``'s
:class:`ChunkView` out of the member graph: its inner rows are the member's nodes of chunk
``k``; its halo is first the rows of chunk ``k`` that the other members of the group own (they
are computed now, for the same chunk, and exchanged: *fresh*), then the rows of other chunks
its nodes read (*others*).

Each owned layer keeps a :class:`LayerTable` over every row of the member graph:

* the layer's inputs: this epoch's (``current``) and the historical ones (``history``).
  Aggregating for chunk ``k``, a row of another chunk gives its current value if that chunk
  was processed earlier this epoch, its historical value otherwise (Algorithm 1, line 15). The
  layer that reads the input features keeps no such tables: its rows never change, so it reads
  them where they lie (inner rows) or as the group's exchange brought them (halo rows);
* the epoch's *messages* ``z = message(dropout(h))`` (:mod:`gnntrain.models.gnn`): each row's
  message is computed once per epoch, by the chunk that produces the row or by the first chunk
  that reads its historical value, and every later reader reads it from the table. Weights
  change once per epoch and dropout masks are keyed by the row, so this is what every reader
  would compute. The layer's order (:func:`~gnntrain.models.gnn.transform_first`) is chosen
  for the member graph's rows, the rows it maps over an epoch: aggregating first, the message
  is the dropped row itself and only the chunk's target rows pass through the layer's map
  (Algorithm 1's AGGREGATE then UPDATE, lines 15-16); mapping first (narrowing layers,
  attention), each row passes through it once per epoch.

Gradients. The epoch's backward runs the chunks in reverse order, one ``autograd.backward``
per chunk. A message that chunk ``k`` read from the table was computed by an earlier chunk
``j``, whose backward runs later: the gradient chunk ``k`` sends it is added up in the table's
``message_grad`` and handed to chunk ``j``'s backward, which takes it (and clears it) together
with its output gradient, so the epoch's gradient is that of the whole epoch's (stale) forward
pass. A row read first as history and later as current has two messages; the backward meets
their readers in reverse order, so each message's computing chunk takes exactly its readers'
gradient. Historical rows were produced in an earlier epoch: with ``detach_history`` (GNNPipe's
trick 2, the default) no gradient flows into them (their messages still carry the gradient of
the layer's own map, where it has one); without it, it is added up in ``history_grad`` and
given to those rows when they are produced in the next epoch (a one-epoch-stale gradient,
PipeGCN-style: our reading of the "historical gradients" the trick avoids).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from gnntrain.graph import LocalGraph
from gnntrain.models.gnn import Dropout, MessagePassingLayer
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


class LayerTable:
    """One layer's inputs and messages over the member graph's rows (module docstring).
    ``constant``: the layer reads the input features ``x`` (the member's inner rows), whose
    halo rows it keeps as the group's exchanges bring them."""

    def __init__(self, graph: LocalGraph, width: int, constant: bool, keep_history_grads: bool) -> None:
        self.graph, self.constant = graph, constant
        new = lambda rows: graph.x.new_zeros(rows, width)  # noqa: E731
        if constant:
            self.x_halo = new(graph.num_halo)
        else:
            self.current, self.history = new(graph.num_local), new(graph.num_local)
        self.history_grad = new(graph.num_local) if keep_history_grads and not constant else None
        self.stale_grad = new(graph.num_local) if keep_history_grads and not constant else None
        self.ready = torch.zeros(graph.num_local, dtype=torch.bool, device=graph.device)
        """Rows whose message this epoch is in ``messages``."""
        self.carries_grad = torch.zeros_like(self.ready)
        """Rows whose message was computed with a gradient to pass on."""
        self.messages: torch.Tensor | None = None
        self.message_grad: torch.Tensor | None = None

    def begin_epoch(self) -> None:
        self.ready.zero_()
        if self.message_grad is not None:
            self.message_grad.zero_()
        if self.history_grad is not None:
            self.stale_grad, self.history_grad = self.history_grad, self.stale_grad
            self.history_grad.zero_()

    def end_epoch(self, refresh: bool) -> None:
        """``refresh``: this epoch's inputs become the history."""
        if refresh and not self.constant:
            self.history.copy_(self.current)

    def state_dict(self) -> dict:
        """What the next epoch reads that this one did not rebuild: the historical rows (the
        input's halo rows), and without trick 2 the historical gradients to hand on."""
        return {"history": self.x_halo if self.constant else self.history, "history_grad": self.history_grad}

    def load_state_dict(self, state: dict) -> None:
        (self.x_halo if self.constant else self.history).copy_(state["history"])
        if self.history_grad is not None:
            self.history_grad.copy_(state["history_grad"])

    def record(self, h: torch.Tensor, halo: torch.Tensor) -> None:
        """A full pass's input rows (inner, then halo): the history, or the input's halo rows."""
        if self.constant:
            self.x_halo.copy_(halo)
        else:
            self.history.copy_(torch.cat([h, halo]))

    def inputs(self, index: torch.Tensor) -> torch.Tensor:
        """The rows ``index`` whose messages are not computed yet this epoch: input features, or
        historical rows (a leaf whose gradient is kept for next epoch without trick 2)."""
        if self.constant:
            inner = self.graph.num_inner
            rows = self.graph.x.new_empty(index.numel(), self.x_halo.shape[1])
            is_inner = index < inner
            rows[is_inner] = self.graph.x[index[is_inner]]
            rows[~is_inner] = self.x_halo[index[~is_inner] - inner]
            return rows
        rows = self.history[index]
        if self.history_grad is not None:
            rows.requires_grad_()
            rows.register_hook(_adding_to(self.history_grad, index))
        return rows

    def store(self, index: torch.Tensor, z: torch.Tensor, roots: list) -> None:
        """Messages ``z`` of the rows ``index``, computed now by the running chunk; where they
        carry a gradient (from the layer's map or its inputs), a root of its backward."""
        if self.messages is None:
            self.messages = z.new_zeros(self.graph.num_local, *z.shape[1:])
            self.message_grad = torch.zeros_like(self.messages)
        self.messages[index] = z.detach()
        self.ready[index] = True
        self.carries_grad[index] = z.requires_grad
        if z.requires_grad and index.numel():
            roots.append((z, self, index))

    def fetch(self, index: torch.Tensor, compute: Callable[[torch.Tensor], torch.Tensor], roots: list) -> torch.Tensor:
        """The messages of the rows ``index``: read from the table where this epoch has them
        (their gradient added to ``message_grad`` where one can pass on), computed by
        ``compute(missing rows)`` and stored otherwise."""
        ready = self.ready[index]
        missing = (~ready).nonzero().view(-1)
        if missing.numel() == index.numel():
            computed = compute(index)
            self.store(index, computed, roots)
            return computed
        read = self.messages[index]
        if bool(self.carries_grad[index[ready]].any()):
            read.requires_grad_()
            read.register_hook(_adding_to(self.message_grad, index))
        if not missing.numel():
            return read
        computed = compute(index[missing])
        self.store(index[missing], computed, roots)
        return read.index_copy(0, missing, computed)

    def take_grad(self, index: torch.Tensor) -> torch.Tensor:
        """What later chunks sent the messages of ``index``, cleared (module docstring)."""
        grad = self.message_grad[index]
        self.message_grad[index] = 0
        return grad


def _adding_to(total: torch.Tensor, index: torch.Tensor) -> Callable[[torch.Tensor], None]:
    """A gradient hook that adds the gradient of rows ``index`` to ``total``."""

    def hook(grad: torch.Tensor) -> None:
        total.index_add_(0, index, grad)

    return hook


class ChunkHalo:
    """Runs one chunk's message-passing layers (a :class:`~gnntrain.models.gnn.LayerwiseHaloSource`):
    exchanges the fresh rows within the group (``exchange``; None for a group of one), records
    each layer input's rows as current, computes the messages of the rows the chunk produces
    and reads or computes the others' (:class:`LayerTable`), and keeps the tensors computed here
    that later chunks read (:meth:`backward_roots`). ``member``: the member graph, the rows each
    layer's order is chosen for."""

    def __init__(self, view: ChunkView, tables: dict[int, LayerTable], member: LocalGraph,
                 exchange: HaloExchange | None) -> None:
        self.view, self.tables, self.member, self.exchange = view, tables, member, exchange
        self.roots: list[tuple[torch.Tensor, LayerTable, torch.Tensor]] = []
        self.stale_roots: list[tuple[torch.Tensor, torch.Tensor]] = []

    def propagate(self, conv: MessagePassingLayer, h: torch.Tensor, layer: int, graph: LocalGraph,
                  dropout: Dropout, *extra: torch.Tensor) -> torch.Tensor:
        table, view = self.tables[layer], self.view
        transform = conv.transforms_first(self.member)
        ids, member_ids = graph.global_ids, self.member.global_ids
        rows, own = view.rows.numel(), view.rows.numel() + view.fresh.numel()
        fresh = self.exchange(h, layer) if self.exchange is not None else h[:0]
        h_inner = dropout(h, ids[:rows])

        def compute(index: torch.Tensor) -> torch.Tensor:
            return conv.message(dropout(table.inputs(index), member_ids[index]), transform)

        if table.constant:
            table.x_halo[view.fresh - self.member.num_inner] = fresh
            z = table.fetch(torch.cat([view.rows, view.fresh, view.others]), compute, self.roots)
        else:
            table.current[view.rows] = h.detach()
            table.current[view.fresh] = fresh.detach()
            if table.stale_grad is not None:
                self.stale_roots += [(h, table.stale_grad[view.rows]), (fresh, table.stale_grad[view.fresh])]
            z_own = conv.message(torch.cat([h_inner, dropout(fresh, ids[rows:own])]), transform)
            table.store(torch.cat([view.rows, view.fresh]), z_own, self.roots)
            z = torch.cat([z_own, table.fetch(view.others, compute, self.roots)])
        return conv.update(conv.aggregate(z, h_inner, graph, transform, *extra))

    def backward_roots(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The tensors this chunk computed that need a gradient, and what later chunks sent them
        (plus, without trick 2, last epoch's historical gradient of the rows it produced)."""
        roots = [(t, table.take_grad(index)) for t, table, index in self.roots]
        roots += [(t, grad) for t, grad in self.stale_roots if t.requires_grad and t.numel()]
        return [t for t, _ in roots], [g for _, g in roots]


class FreshHalo:
    """The halo source of a full, fresh pass over the member graph (evaluation, and the pass that
    fills the history before the first epoch): the group's synchronous exchange, writing each
    layer's input rows into ``record``'s tables when given."""

    def __init__(self, exchange: HaloExchange | None, record: dict[int, LayerTable] | None = None) -> None:
        self.exchange, self.record = exchange, record

    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        halo = self.exchange(h, layer) if self.exchange is not None else h[:0]
        if self.record is not None:
            self.record[layer].record(h.detach(), halo.detach())
        return halo
