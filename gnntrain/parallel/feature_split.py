"""Tensor parallelism's mechanism: dense maps on a block of rows, aggregation on a slice of
columns, and the all-to-all transposes between the two layouts.

Of ``W`` ranks, rank ``r`` holds the rows ``R_r`` of every layer input and output (the ``r``-th
of ``W`` contiguous, near-equal blocks of node ids: the *vertex split*), on which every row-wise
map runs (linear maps, norms, activations, dropout, the loss). An aggregation ``A Z`` is a map of
columns: with the whole graph's ``A`` on every rank, rank ``r`` computes ``A Z[:, c_r]`` for its
slice ``c_r`` of the columns (the ``r``-th of ``W`` contiguous, near-equal slices: the *feature
split*) with no row from anyone, so the load is balanced whatever the graph's shape. Between
the two layouts one all-to-all moves each block ``Z[R_q, c_k]`` from rank ``q`` to rank ``k``:

* :meth:`FeatureSplit.to_columns`: ``[|R_r|, d]`` rows to ``[N, |c_r|]`` columns;
* :meth:`FeatureSplit.to_rows`: the reverse.

Each is the other's backward. A rank keeps its own block ``Z[R_r, c_r]`` and sends the rest, so
one transpose of a width-``d`` tensor sends ``b * sum_{q != k} |R_q| |c_k|`` bytes over all
ranks (``b`` bytes per value): :func:`transpose_bytes`. An aggregation costs two transposes
forward (rows to columns, then its result back to rows) and two backward, the latter only where
its input needs a gradient.

:class:`TransposedAggregation` runs a whole message-passing layer this way
(:class:`~gnntrain.models.gnn.LayerwiseHaloSource`), for layers whose only cross-row operation
is ``graph.operator(aggregation) @ z`` (GCN, GraphSAGE, GCNII): every other step of the layer
is row-wise and runs on the rank's rows unchanged, so each output row is the same function of
the same inputs as in a single process.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import Communicator
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import Dropout, MessagePassingLayer
from gnntrain.models.projection import Projected
from gnntrain.data.sparse import SparseOperator


def even_blocks(n: int, parts: int) -> list[int]:
    """Sizes of ``parts`` contiguous blocks of ``n`` items, near-equal: block ``k`` has
    ``(k + 1) n // parts - k n // parts``."""
    return [(k + 1) * n // parts - k * n // parts for k in range(parts)]


def transpose_bytes(rows: list[int], width: int, value_bytes: int) -> int:
    """Bytes one transpose of a ``[sum(rows), width]`` tensor sends over all ranks (module docstring)."""
    columns = even_blocks(width, len(rows))
    return value_bytes * (sum(rows) * width - sum(r * c for r, c in zip(rows, columns)))


class FeatureSplit:
    """The two layouts of rank ``comm.rank`` among ``comm.world_size`` for a graph of ``num_nodes``
    nodes, and the transposes between them over ``comm``, recorded as ``kind`` + ``_fwd`` in
    the forward pass and ``_bwd`` in the backward."""

    def __init__(self, comm: Communicator, num_nodes: int, kind: str = "transpose") -> None:
        self.comm, self.kind = comm, kind
        self.row_sizes = even_blocks(num_nodes, comm.world_size)
        start = sum(self.row_sizes[: comm.rank])
        self.rows = slice(start, start + self.row_sizes[comm.rank])

    def columns(self, width: int) -> list[int]:
        return even_blocks(width, self.comm.world_size)

    def to_columns(self, z: torch.Tensor, direction: str) -> torch.Tensor:
        """This rank's column slice of the whole tensor whose rows ``R_r`` are ``z``."""
        me, columns = self.comm.rank, self.columns(z.shape[1])
        pieces = z.split(columns, dim=1)
        send = [p.reshape(-1) if k != me else p.new_empty(0) for k, p in enumerate(pieces)]
        recv_splits = [n * columns[me] if q != me else 0 for q, n in enumerate(self.row_sizes)]
        arrived = self.comm.all_to_all_start(torch.cat(send), [t.numel() for t in send], recv_splits,
                                             f"{self.kind}_{direction}").wait().split(recv_splits)
        blocks = [pieces[me] if q == me else arrived[q].view(n, columns[me]) for q, n in enumerate(self.row_sizes)]
        return torch.cat(blocks)

    def to_rows(self, a: torch.Tensor, width: int, direction: str) -> torch.Tensor:
        """This rank's rows ``R_r`` of the whole width-``width`` tensor whose columns ``c_r`` are ``a``."""
        me, columns = self.comm.rank, self.columns(width)
        pieces = a.split(self.row_sizes)
        send = [p.reshape(-1) if k != me else p.new_empty(0) for k, p in enumerate(pieces)]
        recv_splits = [self.row_sizes[me] * c if q != me else 0 for q, c in enumerate(columns)]
        arrived = self.comm.all_to_all_start(torch.cat(send), [t.numel() for t in send], recv_splits,
                                             f"{self.kind}_{direction}").wait().split(recv_splits)
        blocks = [pieces[me] if q == me else arrived[q].view(self.row_sizes[me], c) for q, c in enumerate(columns)]
        return torch.cat(blocks, dim=1)


class _ToColumns(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z: torch.Tensor, split: FeatureSplit) -> torch.Tensor:  # type: ignore[override]
        ctx.split, ctx.width = split, z.shape[1]
        return split.to_columns(z, "fwd")

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return ctx.split.to_rows(grad.contiguous(), ctx.width, "bwd"), None


class _ToRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a: torch.Tensor, split: FeatureSplit, width: int) -> torch.Tensor:  # type: ignore[override]
        ctx.split = split
        return split.to_rows(a, width, "fwd")

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        return ctx.split.to_columns(grad.contiguous(), "bwd"), None, None


class TransposedOperator:
    """``operator @ z`` for the rows ``R_r`` of the product, given the rows ``R_r`` of ``z``:
    transpose to columns, multiply by the whole graph's ``operator``, transpose back."""

    def __init__(self, operator: SparseOperator, split: FeatureSplit) -> None:
        self.operator, self.split = operator, split

    def __matmul__(self, z: torch.Tensor) -> torch.Tensor:
        columns = _ToColumns.apply(z, self.split)
        return _ToRows.apply(self.operator @ columns, self.split, z.shape[1])


class TransposedAggregation:
    """Runs each message-passing layer on the rows of one rank (module docstring): ``whole`` is
    the whole graph (on every rank), ``rows`` the rank's rows as a graph of inner nodes only whose
    aggregations are :class:`TransposedOperator` s over ``whole``'s. The order of a layer (map
    first or aggregate first) is chosen for the whole graph, so every rank transposes the same
    width."""

    def __init__(self, whole: LocalGraph, split: FeatureSplit) -> None:
        self.whole, self.split = whole, split
        self.rows = rows_view(whole, split)

    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        return h[:0]

    def propagate(self, conv: MessagePassingLayer, h: torch.Tensor, layer: int, graph: LocalGraph,
                  dropout: Dropout, *extra: torch.Tensor) -> torch.Tensor:
        transform = isinstance(h, Projected) or conv.transforms_first(self.whole)
        h_inner = conv.read_inputs(dropout(h, self.rows.global_ids), transform)
        return conv.update(conv.aggregate(conv.message(h_inner, transform), h_inner, self.rows, transform, *extra))


def rows_view(whole: LocalGraph, split: FeatureSplit) -> LocalGraph:
    """``whole``'s rows ``R_r`` as a graph with no halo and no edges of its own: its features,
    labels, masks and degrees are those rows', its aggregations go through the transposes."""
    rows = split.rows
    operators: dict = {}

    def transposed(aggregation) -> TransposedOperator:
        if aggregation not in operators:
            operators[aggregation] = TransposedOperator(whole.operator(aggregation), split)
        return operators[aggregation]

    empty = whole.edge_src[:0]
    return LocalGraph(rank=split.comm.rank, world_size=split.comm.world_size, num_inner=rows.stop - rows.start,
                      num_halo=0, global_ids=whole.global_ids[rows], in_degree=whole.in_degree[rows],
                      edge_src=empty, edge_dst=empty, recv_splits=[0] * split.comm.world_size, send_index=empty,
                      send_splits=[0] * split.comm.world_size, x=whole.x[rows], y=whole.y[rows],
                      train_mask=whole.train_mask[rows], val_mask=whole.val_mask[rows],
                      test_mask=whole.test_mask[rows], operator_source=transposed)
