"""GCN layer (Kipf & Welling, 2017) on a local graph.

``H' = D^-1/2 (A + I) D^-1/2 H W + b`` with ``D`` the global in-degree plus one: the same
function as PyG's ``GCNConv`` (default ``add_self_loops=True, normalize=True``), with the same
parameter names (``lin.weight``, ``bias``) and initialisation (Glorot weight, zero bias).
The product is evaluated in the cheaper order for the graph's rows
(:func:`gnntrain.models.gnn.transform_first`): ``W`` on every source row and then the
aggregation, or the aggregation and then ``W`` on the target rows.
"""

from __future__ import annotations

import torch
from torch import nn

from gnntrain.graph import LocalGraph
from gnntrain.models import rows
from gnntrain.models.gnn import MessagePassingLayer, transform_first
from gnntrain.models.projection import Projected, project


class GCNLayer(MessagePassingLayer):
    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.empty(out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.lin.weight)
        nn.init.zeros_(self.bias)

    @property
    def input_maps(self) -> list[nn.Linear]:
        return [self.lin]

    def transforms_first(self, graph: LocalGraph) -> bool:
        entries = graph.edge_src.numel() + graph.num_targets
        return transform_first(graph.num_local, graph.num_targets, entries, self.in_dim, self.lin.out_features)

    def aggregates_rows_by_operator(self, transform: bool) -> bool:
        return not transform

    def message(self, h: torch.Tensor | Projected, transform: bool) -> torch.Tensor:
        if not transform:
            return h
        if not isinstance(h, Projected):
            rows.add(h.shape[0])
        return project(self.lin, h)

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor | Projected, graph: LocalGraph,
                  transform: bool) -> torch.Tensor:
        a = graph.operator("gcn") @ z
        if not transform:
            rows.add(a.shape[0])
            a = self.lin(a)
        return a + self.bias
