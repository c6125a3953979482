"""The aggregation matrices a layer may declare: which entries a local graph's matrix has and
the value of each, computed from the graph (:meth:`gnntrain.data.local_graph.LocalGraph.operator`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import torch

if TYPE_CHECKING:
    from gnntrain.data.local_graph import LocalGraph


@dataclass(frozen=True)
class Aggregation:
    """A normalised ``[targets, local]`` aggregation matrix of a local graph.

    Its entries are every in-edge of a target (in the graph's edge order) and, with
    ``self_loops``, then one self-loop per target at the target's own column (in target order:
    :attr:`~gnntrain.data.local_graph.LocalGraph.self_loop_edges`). ``normalise(graph, dst, src)`` gives
    the value of the entries ``(dst, src)`` (target row, local source id) from the graph's global
    in-degrees, in their dtype. In a sampled graph each in-edge's value is then multiplied by its
    ``edge_scale``; the degrees stay the full graph's and self-loops keep their value.
    """

    name: str
    self_loops: bool
    normalise: Callable[[LocalGraph, torch.Tensor, torch.Tensor], torch.Tensor]

    def entries(self, graph: LocalGraph) -> tuple[torch.Tensor, torch.Tensor]:
        """(Target row, local source id) of each entry of ``graph``'s matrix."""
        if self.self_loops:
            src, dst = graph.self_loop_edges
            return dst, src
        return graph.edge_dst, graph.edge_src

    def num_entries(self, graph: LocalGraph) -> int:
        """How many entries ``graph``'s matrix has (without building it)."""
        return graph.edge_src.numel() + (graph.num_targets if self.self_loops else 0)

    def values(self, graph: LocalGraph, dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        """The value of each entry ``(dst, src)`` of :meth:`entries`, in the degrees' dtype."""
        value = self.normalise(graph, dst, src)
        if graph.edge_scale is not None:
            value[: graph.edge_src.numel()] *= graph.edge_scale
        return value


def _symmetric(graph: LocalGraph, dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    dinv = (graph.in_degree + 1.0).rsqrt()
    return dinv[src] * graph.target_rows(dinv)[dst]


def _mean(graph: LocalGraph, dst: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    return 1.0 / graph.target_rows(graph.in_degree)[dst]


SYMMETRIC = Aggregation("gcn", True, _symmetric)
"""``D^-1/2 (A + I) D^-1/2`` with ``D = in_degree + 1`` (Kipf & Welling): GCN's and GCNII's
matrix, and the entries GAT's attention weighs."""

MEAN = Aggregation("mean", False, _mean)
"""``D^-1 A`` with ``D = in_degree``: the mean over the in-neighbours (rows of isolated nodes
are zero, having no entry): SAGE's."""
