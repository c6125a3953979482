"""Chunks of a graph and the historical embeddings that let them be pipelined (GNNPipe
Sec. 3.2.2, Algorithm 1).

A rank holds a *member graph* (its share of the graph, a :class:`~gnntrain.data.local_graph.LocalGraph`:
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

Reading. A layer whose messages are its dropped rows aggregated by a fixed matrix (GCN and SAGE
aggregating first, GCNII) reads the other chunks' messages where they lie, through its matrix
split by source (:class:`Chunks`); any other layer reads them into one tensor per chunk.

Gradients. The epoch's backward runs the chunks in reverse order, one ``autograd.backward``
per chunk. A message that chunk ``k`` read from the table was computed by an earlier chunk
``j``, whose backward runs later: the gradient chunk ``k`` sends it is kept (read as a tensor:
added up per row in ``message_grad``; read through the split matrix: chunk ``k``'s output
gradient, in ``outflow``) and handed to chunk ``j``'s backward, which takes it together with its
output gradient, so the epoch's gradient is that of the whole epoch's (stale) forward pass. A
row read first as history and later as current has two messages; the backward meets their
readers in reverse order, so each message's computing chunk takes exactly its readers'
gradient. Historical rows were produced in an earlier epoch: with ``detach_history`` (GNNPipe's
trick 2, the default) no gradient flows into them (their messages still carry the gradient of
the layer's own map, where it has one); without it, it is added up in ``history_grad`` and
given to those rows when they are produced in the next epoch (a one-epoch-stale gradient,
PipeGCN-style: our reading of the "historical gradients" the trick avoids).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable

import torch

from gnntrain.data.aggregation import Aggregation
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import Dropout, MessagePassingLayer
from gnntrain.parallel.halo import HaloExchange
from gnntrain.data.sparse import SparseOperator, SparsePattern, spmm


@dataclass(frozen=True)
class Rows:
    """Member-graph local ids on the graph's device, with a copy on the host: a table keeps on
    the host which rows have their message this epoch (that depends on the chunk order alone),
    so a chunk finds the rows it must still compute without reading the device back."""

    ids: torch.Tensor
    host: torch.Tensor

    @classmethod
    def of(cls, ids: torch.Tensor) -> Rows:
        return cls(ids, ids.cpu())

    def at(self, positions: torch.Tensor) -> tuple[Rows, torch.Tensor]:
        """The rows at ``positions`` (host indices into these rows), and the positions on the device."""
        moved = positions.to(self.ids.device, non_blocking=True)
        return Rows(self.ids[moved], self.host[positions]), moved


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

    @property
    def own(self) -> torch.Tensor:
        """Member-graph local ids of the rows the chunk produces: inner, then fresh."""
        return torch.cat([self.rows, self.fresh])

    @property
    def sources(self) -> torch.Tensor:
        """Member-graph local ids of the chunk graph's local rows, in order."""
        return torch.cat([self.rows, self.fresh, self.others])

    @cached_property
    def own_rows(self) -> Rows:
        return Rows.of(self.own)

    @cached_property
    def other_rows(self) -> Rows:
        return Rows.of(self.others)

    @cached_property
    def source_rows(self) -> Rows:
        return Rows.of(self.sources)


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


Roots = list[tuple[torch.Tensor, Callable[[], torch.Tensor]]]
"""Tensors a chunk computed that later chunks read, each with the function that gives the
gradient those reads sent it (called when the chunk's backward starts)."""


class Chunks:
    """The member graph's K chunk views, and for the layers that aggregate their input rows by a
    fixed matrix (:meth:`~gnntrain.models.gnn.MessagePassingLayer.aggregates_rows_by_operator`)
    each chunk's matrix of that :class:`~gnntrain.data.aggregation.Aggregation` split by source
    (:meth:`split`): the chunk's own rows, passed in, and the other chunks' rows, read where they
    lie in a layer's message table (columns = member local ids), so that no other chunk's row is
    gathered, concatenated or given a gradient per chunk. The gradient of those reads is handed
    back in one product per chunk (:meth:`outflow`)."""

    def __init__(self, member: LocalGraph, chunk_of_local: torch.Tensor, count: int) -> None:
        self.member, self.chunk_of_local = member, chunk_of_local
        self.views = [carve_chunk(member, chunk_of_local, k) for k in range(count)]
        self._split: dict[Aggregation, list[tuple[SparseOperator, torch.Tensor]]] = {}
        self._outflow: dict[Aggregation, list[torch.Tensor]] = {}

    def split(self, aggregation: Aggregation, k: int) -> tuple[SparseOperator, torch.Tensor]:
        """Chunk ``k``'s matrix of ``aggregation``: its own rows' columns (a :class:`SparseOperator`)
        and the other chunks' columns as CSR over the member graph's local rows."""
        if aggregation not in self._split:
            self._build(aggregation)
        return self._split[aggregation][k]

    def outflow(self, aggregation: Aggregation, j: int) -> torch.Tensor:
        """CSR ``[own rows of chunk j, member inner nodes]``: the entries with which other chunks'
        aggregations of ``aggregation`` read chunk ``j``'s rows, so that ``outflow @ G`` (``G``: the
        gradients of those aggregations' outputs) is the gradient they send its rows."""
        if aggregation not in self._outflow:
            self._build(aggregation)
        return self._outflow[aggregation][j]

    def _build(self, aggregation: Aggregation) -> None:
        member, device = self.member, self.member.device
        split, read_dst, read_src, read_value = [], [], [], []
        for view in self.views:
            dst, src, value = view.graph.operator_entries(aggregation)
            value = value.to(member.dtype)
            own = view.rows.numel() + view.fresh.numel()
            mine = src < own
            split.append((SparseOperator(dst[mine], src[mine], value[mine], (view.graph.num_targets, own)),
                          SparsePattern(dst[~mine], view.sources[src[~mine]],
                                        (view.graph.num_targets, member.num_local)).matrix(value[~mine])))
            read_dst.append(view.rows[dst[~mine]])
            read_src.append(view.sources[src[~mine]])
            read_value.append(value[~mine])
        dst, src, value = torch.cat(read_dst), torch.cat(read_src), torch.cat(read_value)
        position = torch.empty(member.num_local, dtype=torch.long, device=device)
        outflow = []
        for j, view in enumerate(self.views):
            own = view.own
            position[own] = torch.arange(own.numel(), device=device)
            read = self.chunk_of_local[src] == j
            outflow.append(SparsePattern(position[src[read]], dst[read], (own.numel(), member.num_inner))
                           .matrix(value[read]))
        self._split[aggregation], self._outflow[aggregation] = split, outflow


class _SplitOperator:
    """A chunk's aggregation matrix with its other sources read from ``table``: ``A @ z``
    for ``z`` the messages of the chunk's own rows (module docstring of :class:`Chunks`)."""

    def __init__(self, own: SparseOperator, others: torch.Tensor, table: LayerTable, targets: torch.Tensor) -> None:
        self.own, self.others, self.table, self.targets = own, others, table, targets

    def __matmul__(self, z_own: torch.Tensor) -> torch.Tensor:
        return self.own @ z_own + _ReadOthers.apply(z_own[:0], self)


class _ReadOthers(torch.autograd.Function):
    """Forward: the other chunks' part of the aggregation, from the table's messages. Backward:
    keep its output gradient in the table's ``outflow`` rows of the chunk's targets (the
    gradient reaches the messages when their chunks take it); ``anchor`` (an empty slice of the
    own messages) only ties the read into the graph."""

    @staticmethod
    def forward(ctx, anchor: torch.Tensor, op: _SplitOperator) -> torch.Tensor:  # type: ignore[override]
        ctx.op = op
        return spmm(op.others, op.table.messages)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        op = ctx.op
        op.table.keep_outflow(op.targets, grad)
        return grad.new_zeros(0, grad.shape[1]), None


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
        self.ready = torch.zeros(graph.num_local, dtype=torch.bool)
        """Rows whose message this epoch is in ``messages`` (on the host, :class:`Rows`)."""
        self.carries_grad = torch.zeros_like(self.ready)
        """Rows whose message was computed with a gradient to pass on (on the host)."""
        self.messages: torch.Tensor | None = None
        self.message_grad: torch.Tensor | None = None
        self.two_messages = False
        """Whether a row can have two messages with a gradient in one epoch (historical, then
        current), so that each must take its readers' gradient and leave the rest."""
        self.outflow: torch.Tensor | None = None
        """Gradients of the chunks' aggregation outputs (member inner rows), for the messages
        read through :class:`_SplitOperator`."""

    def begin_epoch(self) -> None:
        self.ready.zero_()
        for buffer in (self.message_grad, self.outflow):
            if buffer is not None:
                buffer.zero_()
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
            inner, x = self.graph.num_inner, self.graph.x
            if not self.x_halo.shape[0] or not inner:
                return x[index] if inner else self.x_halo[index - inner]
            # both sources gathered and one picked per row: no boolean indexing, no read-back
            return torch.where((index < inner).unsqueeze(1), x[index.clamp(max=inner - 1)],
                               self.x_halo[(index - inner).clamp(min=0)])
        rows = self.history[index]
        if self.history_grad is not None:
            rows.requires_grad_()
            rows.register_hook(_adding_to(self.history_grad, index))
        return rows

    def store(self, index: Rows, z: torch.Tensor, roots: Roots | None) -> None:
        """Messages ``z`` of the rows ``index``, computed now by the running chunk; where they
        carry a gradient (from the layer's map or its inputs) and ``roots`` is given, a root of
        its backward, whose gradient is what later readers added to ``message_grad``."""
        if self.messages is None:
            self.messages = z.new_zeros(self.graph.num_local, *z.shape[1:])
            self.message_grad = torch.zeros_like(self.messages)
        self.messages[index.ids] = z.detach()
        self.ready[index.host] = True
        self.carries_grad[index.host] = z.requires_grad
        if roots is not None and z.requires_grad and index.ids.numel():
            roots.append((z, lambda: self.take_grad(index.ids)))

    def _missing(self, index: Rows) -> torch.Tensor:
        """Positions (host) of the rows of ``index`` that have no message this epoch yet."""
        return (~self.ready[index.host]).nonzero().view(-1)

    def ensure(self, index: Rows, compute: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Compute and store the messages of the rows ``index`` that this epoch has none of
        (messages without a gradient to pass on)."""
        positions = self._missing(index)
        if positions.numel():
            missing, _ = index.at(positions)
            self.store(missing, compute(missing.ids), None)

    def fetch(self, index: Rows, compute: Callable[[torch.Tensor], torch.Tensor], roots: Roots) -> torch.Tensor:
        """The messages of the rows ``index``: computed by ``compute(missing rows)`` and stored
        where this epoch has none yet, then read from the table (a leaf whose gradient is added
        to ``message_grad`` where one can pass on). Computed messages that carry a gradient
        stay in the running chunk's graph instead of being read back."""
        positions = self._missing(index)
        if positions.numel():
            missing, at = index.at(positions)
            computed = compute(missing.ids)
            self.store(missing, computed, roots)
            if computed.requires_grad:
                if positions.numel() == index.host.numel():
                    return computed
                return self._read(index).index_copy(0, at, computed)
        return self._read(index)

    def _read(self, index: Rows) -> torch.Tensor:
        read = self.messages[index.ids]
        if bool(self.carries_grad[index.host].any()):
            read.requires_grad_()
            read.register_hook(_adding_to(self.message_grad, index.ids))
        return read

    def compute_history(self, index: torch.Tensor, compute: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        """``compute(index)``, the messages of historical rows."""
        z = compute(index)
        self.two_messages = self.two_messages or z.requires_grad
        return z

    def keep_outflow(self, targets: torch.Tensor, grad: torch.Tensor) -> None:
        if self.outflow is None:
            self.outflow = grad.new_zeros(self.graph.num_inner, grad.shape[1])
        self.outflow[targets] = grad

    def take_grad(self, index: torch.Tensor) -> torch.Tensor:
        """What later chunks sent the messages of ``index`` (cleared where a row has two
        messages, module docstring)."""
        grad = self.message_grad[index]
        if self.two_messages:
            self.message_grad[index] = 0
        return grad


def _adding_to(total: torch.Tensor, index: torch.Tensor) -> Callable[[torch.Tensor], None]:
    """A gradient hook that adds the gradient of rows ``index`` to ``total``."""

    def hook(grad: torch.Tensor) -> None:
        total.index_add_(0, index, grad)

    return hook


class ChunkHalo:
    """Runs chunk ``k``'s message-passing layers (a :class:`~gnntrain.models.gnn.LayerwiseHaloSource`):
    exchanges the fresh rows within the group (``exchange``; None for a group of one), records
    each layer input's rows as current, computes the messages of the rows the chunk produces
    and reads or computes the others' (:class:`LayerTable`), and keeps the tensors computed here
    that later chunks read (:meth:`backward_roots`). Each layer runs in the order chosen for the
    member graph's rows, the rows it maps over an epoch. A layer that aggregates its rows by a
    fixed matrix, with no gradient into historical rows, reads the other chunks' rows where they
    lie (:class:`Chunks`); any other reads them from the table as one tensor."""

    def __init__(self, chunks: Chunks, k: int, tables: dict[int, LayerTable], exchange: HaloExchange | None) -> None:
        self.chunks, self.k, self.tables, self.exchange = chunks, k, tables, exchange
        self.view, self.member = chunks.views[k], chunks.member
        self.roots: Roots = []

    def propagate(self, conv: MessagePassingLayer, h: torch.Tensor, layer: int, graph: LocalGraph,
                  dropout: Dropout, *extra: torch.Tensor) -> torch.Tensor:
        table, view, member = self.tables[layer], self.view, self.member
        transform = conv.transforms_first(member)
        ids = graph.global_ids
        rows, own = view.rows.numel(), view.rows.numel() + view.fresh.numel()
        fresh = self.exchange(h, layer) if self.exchange is not None else h[:0]
        by_operator = conv.aggregates_rows_by_operator(transform) and table.history_grad is None
        # the input features' messages come from the table, so their rows are dropped here only
        # where they are the messages or the layer reads them as root terms
        dropped = by_operator or conv.reads_targets or not table.constant
        h_inner = dropout(h, ids[:rows]) if dropped else h

        def compute(index: torch.Tensor) -> torch.Tensor:
            return conv.message(dropout(table.inputs(index), member.global_ids[index]), transform)

        if table.constant:
            table.x_halo[view.fresh - member.num_inner] = fresh
        else:
            table.current[view.rows] = h.detach()
            table.current[view.fresh] = fresh.detach()
            if table.stale_grad is not None:
                self.roots += [(h, lambda: table.stale_grad[view.rows]),
                               (fresh, lambda: table.stale_grad[view.fresh])]
        if by_operator:
            z = conv.message(torch.cat([h_inner, dropout(fresh, ids[rows:own])]), transform)
            table.store(view.own_rows, z, None)
            table.ensure(view.other_rows, compute)
            graph = replace(graph, operator_source=lambda aggregation: self._split_operator(aggregation, table, z))
        elif table.constant:
            z = table.fetch(view.source_rows, compute, self.roots)
        else:
            z_own = conv.message(torch.cat([h_inner, dropout(fresh, ids[rows:own])]), transform)
            table.store(view.own_rows, z_own, self.roots)
            z = torch.cat([z_own, table.fetch(view.other_rows, lambda index: table.compute_history(index, compute),
                                              self.roots)])
        return conv.update(conv.aggregate(z, h_inner, graph, transform, *extra))

    def _split_operator(self, aggregation: Aggregation, table: LayerTable, z_own: torch.Tensor) -> _SplitOperator:
        """The chunk's matrix of ``aggregation`` reading its other sources from ``table``; the own
        messages ``z_own`` become a root whose gradient is what the other chunks' reads sent."""
        own, others = self.chunks.split(aggregation, self.k)
        if z_own.requires_grad:
            outflow = self.chunks.outflow(aggregation, self.k)
            self.roots.append((z_own, lambda: spmm(outflow, table.outflow) if table.outflow is not None
                               else torch.zeros_like(z_own)))
        return _SplitOperator(own, others, table, self.view.rows)

    def backward_roots(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The tensors this chunk computed that need a gradient, and what later chunks sent them
        (plus, without trick 2, last epoch's historical gradient of the rows it produced)."""
        roots = [(t, grad()) for t, grad in self.roots if t.requires_grad and t.numel()]
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
