"""Per-rank local graph of graph-parallel training.

Rank ``r`` owns the *inner* nodes ``{v : part[v] == r}``. Its *halo* is the set of nodes owned
by other ranks that have an edge into an inner node. Local ids are inner nodes first (in
global-id order), then halo nodes grouped by owner rank (ascending) and global id, so the halo
rows received from peer ``q`` form one contiguous block.

The local adjacency has one row per inner node (the message targets) and one column per local
node (inner + halo); normalisations use *global* degrees, so an aggregation over a local graph
with all halo rows present equals the same rows of the full-graph aggregation. Degrees and
normalisations are computed in :func:`weight_dtype` (float32 at least: a 16-bit float rounds
degrees above 256, and Reddit's mean degree is about 490) and the weights are rounded to the
training dtype once, as the aggregation matrices are built.

Send plan: for each peer ``q``, the inner nodes that ``q`` has in its halo, in ``q``'s halo
order. Every rank derives its plans from the global edge list and the partition, so no
messages are needed to agree on them.

A *target view* (:meth:`LocalGraph.target_view`) aggregates into a subset of the inner nodes
only (``target_index``), e.g. to compute the rows that read no halo row before the halo
arrives. Every row of a view is the same sum, in the same order, as that row of the whole
local graph.

A graph *sampled from* another (``sampled_from``; built by the graph-parallel family's
sampling, :mod:`gnntrain.strategies.graph_parallel.sampled`) has a subset of its in-edges, each
weighted by ``edge_scale``; its aggregation matrices take their entries' order from the other
graph's instead of sorting again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Callable

import torch

from gnntrain.rng import keyed
from gnntrain.data.aggregation import Aggregation
from gnntrain.timing.clock import Stopwatch
from gnntrain.data.graph_data import GraphData
from gnntrain.data.partition import carve_part
from gnntrain.data.sparse import Orders, SparseOperator, SparsePattern, csr_orders, subset_orders


@dataclass
class LocalGraph:
    rank: int
    world_size: int
    num_inner: int
    num_halo: int
    global_ids: torch.Tensor
    """Global id of every local node (inner then halo); for bookkeeping and tests only."""
    in_degree: torch.Tensor
    """Global in-degree (self-loops excluded) of every local node, in :func:`weight_dtype`."""
    edge_src: torch.Tensor
    """Local source id of every in-edge of an inner node."""
    edge_dst: torch.Tensor
    """Local (inner) target id of every in-edge of an inner node."""
    recv_splits: list[int]
    """Halo rows received from each peer (0 for self)."""
    send_index: torch.Tensor
    """Local inner ids sent to the peers, concatenated in peer order."""
    send_splits: list[int]
    """Rows sent to each peer (0 for self)."""
    x: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    edge_scale: torch.Tensor | None = None
    """Per-edge multiplier of the aggregation weight in a sampled graph, in :func:`weight_dtype`; None: all 1."""
    target_index: torch.Tensor | None = None
    """Local ids of the inner nodes a target view aggregates into, in order; None: all inner nodes."""
    sampled_from: tuple[LocalGraph, torch.Tensor] | None = field(default=None, repr=False)
    """For a sampled graph: the graph it was sampled from and the mask of its kept in-edges."""
    operator_builds: Stopwatch | None = field(default=None, repr=False)
    """Times the building of this graph's aggregation matrices (made with the first one)."""
    operator_source: Callable[[Aggregation], SparseOperator] | None = field(default=None, repr=False)
    """Supplies this graph's aggregation matrices instead of building them: for a view whose
    layer reads some sources' rows from elsewhere (a pipeline chunk reading the other chunks'
    rows from its message tables, :mod:`gnntrain.parallel.history`)."""
    _operators: dict[Aggregation, SparseOperator] = field(default_factory=dict, repr=False)
    _entry_orders: dict[Aggregation, Orders] = field(default_factory=dict, repr=False)
    _patterns: dict[Aggregation, SparsePattern] = field(default_factory=dict, repr=False)

    def to(self, device: torch.device) -> LocalGraph:
        """This graph with every tensor on ``device`` (where training runs); everything derived
        from it (aggregation matrices, views, sampled graphs) is built there too."""
        moved = {f.name: getattr(self, f.name).to(device) for f in fields(self)
                 if isinstance(getattr(self, f.name), torch.Tensor)}
        return replace(self, **moved, operator_builds=None, _operators={}, _entry_orders={}, _patterns={})

    @property
    def device(self) -> torch.device:
        return self.edge_src.device

    @property
    def dtype(self) -> torch.dtype:
        """The training dtype: the features', and the aggregation matrices' values'."""
        return self.x.dtype

    @property
    def num_local(self) -> int:
        return self.num_inner + self.num_halo

    @property
    def num_targets(self) -> int:
        """Rows of this graph's aggregations: the inner nodes, or a target view's subset."""
        return self.num_inner if self.target_index is None else self.target_index.numel()

    def target_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The rows of ``x`` (indexed by local id, at least the inner nodes) of the targets:
        ``x`` itself where it holds just the inner rows (so its backward is not a slice's,
        which zero-fills a gradient of ``x``'s size and copies into it)."""
        if self.target_index is not None:
            return x[self.target_index]
        return x if len(x) == self.num_inner else x[: self.num_inner]

    @cached_property
    def self_loop_edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(Local source id, target row) of every in-edge of a target plus one self-loop per
        target, for layers that compute per-edge values (attention, modulation)."""
        loop_src = self.target_rows(torch.arange(self.num_inner, device=self.device))
        loop_dst = torch.arange(self.num_targets, device=self.device)
        return torch.cat([self.edge_src, loop_src]), torch.cat([self.edge_dst, loop_dst])

    @cached_property
    def self_loop_edge_ids(self) -> torch.Tensor:
        """:func:`gnntrain.rng.keyed.pair_ids` of the global (source, target) ids of
        :attr:`self_loop_edges`: what per-edge keyed draws (attention dropout) are keyed by."""
        src, dst = self.self_loop_edges
        return keyed.pair_ids(self.global_ids[src], self.target_rows(self.global_ids)[dst])

    def operator(self, aggregation: Aggregation) -> SparseOperator:
        """``aggregation``'s ``[targets, local]`` matrix over this graph (see
        :class:`~gnntrain.data.aggregation.Aggregation`), built once per aggregation."""
        if self.operator_source is not None:
            return self.operator_source(aggregation)
        if aggregation not in self._operators:
            if self.operator_builds is None:
                self.operator_builds = Stopwatch(self.device)
            with self.operator_builds:
                self._operators[aggregation] = self._build_operator(aggregation)
        return self._operators[aggregation]

    @property
    def operator_build_time(self) -> float:
        """Seconds spent building this graph's aggregation matrices so far (on the device's
        timeline, :mod:`gnntrain.timing.clock`)."""
        return 0.0 if self.operator_builds is None else self.operator_builds.seconds

    def entry_orders(self, aggregation: Aggregation) -> Orders:
        """The CSR orders of ``aggregation``'s entries, sorted once (for the graphs sampled from this one)."""
        if aggregation not in self._entry_orders:
            self._entry_orders[aggregation] = csr_orders(*aggregation.entries(self), (self.num_targets, self.num_local))
        return self._entry_orders[aggregation]

    def pattern(self, aggregation: Aggregation) -> SparsePattern:
        """Where ``aggregation``'s matrix has entries, for layers that compute their weights
        (attention on :data:`~gnntrain.data.aggregation.SYMMETRIC`'s entries: every in-edge of a
        target and its self-loop, in :attr:`self_loop_edges` order)."""
        if aggregation not in self._patterns:
            dst, src = aggregation.entries(self)
            self._patterns[aggregation] = SparsePattern(dst, src, (self.num_targets, self.num_local),
                                                        self._orders(aggregation))
        return self._patterns[aggregation]

    def _orders(self, aggregation: Aggregation) -> Orders:
        """CSR orders of ``aggregation``'s entries; a sampled graph filters its parent's."""
        if self.sampled_from is None:
            return self.entry_orders(aggregation)
        parent, edge_keep = self.sampled_from
        parent_orders = parent.entry_orders(aggregation)
        self_loops = torch.ones(parent_orders[0].numel() - edge_keep.numel(), dtype=torch.bool, device=self.device)
        return subset_orders(parent_orders, torch.cat([edge_keep, self_loops]))

    def operator_entries(self, aggregation: Aggregation) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(Target row, local source id, value) of each entry of :meth:`operator`'s matrix, the
        values in :func:`weight_dtype` (the matrix rounds them to the training dtype)."""
        dst, src = aggregation.entries(self)
        return dst, src, aggregation.values(self, dst, src)

    def _build_operator(self, aggregation: Aggregation) -> SparseOperator:
        dst, src, value = self.operator_entries(aggregation)
        return SparseOperator(dst, src, value.to(self.dtype), (self.num_targets, self.num_local),
                              self._orders(aggregation))

    def target_view(self, targets: torch.Tensor, with_halo: bool) -> LocalGraph:
        """This graph aggregating into the inner nodes ``targets`` (ascending local ids) only:
        their in-edges, renumbered to rows ``0..len(targets)-1``. Without the halo the view's
        sources are the inner nodes, so no target may read a halo row. Views are for
        aggregation; exchanges use the parent's send plan."""
        is_target = torch.zeros(self.num_inner, dtype=torch.bool, device=self.device)
        is_target[targets] = True
        keep = is_target[self.edge_dst]
        num_halo = self.num_halo if with_halo else 0
        row = torch.cumsum(is_target, 0) - 1
        return replace(
            self,
            num_halo=num_halo,
            global_ids=self.global_ids[: self.num_inner + num_halo],
            in_degree=self.in_degree[: self.num_inner + num_halo],
            edge_src=self.edge_src[keep],
            edge_dst=row[self.edge_dst[keep]],
            recv_splits=self.recv_splits if with_halo else [0] * self.world_size,
            edge_scale=None if self.edge_scale is None else self.edge_scale[keep],
            target_index=targets,
            sampled_from=None,
            operator_builds=None,
            _operators={},
            _entry_orders={},
            _patterns={},
        )


def weight_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of degrees and aggregation weights when training in ``dtype``: float32, or
    float64 in float64 runs (so those stay exact against float64 references)."""
    return torch.promote_types(dtype, torch.float32)


def local_graph_from_part(fields: dict, dtype: torch.dtype = torch.float32) -> LocalGraph:
    """The local graph of a carved part (:func:`~gnntrain.data.partition.carve_part`, or a part
    file); features in the training dtype ``dtype``, degrees in :func:`weight_dtype`."""
    return LocalGraph(**{**fields, "x": fields["x"].to(dtype), "in_degree": fields["in_degree"].to(weight_dtype(dtype))})


def build_local_graph(data: GraphData, part: torch.Tensor, rank: int, world_size: int,
                      dtype: torch.dtype = torch.float32) -> LocalGraph:
    """Carve rank ``rank``'s local graph out of the whole graph; features (and hence the
    aggregation matrices) in the training dtype ``dtype``."""
    return local_graph_from_part(carve_part(data, part, rank, world_size), dtype)
