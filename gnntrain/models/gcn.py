"""GCN layer (Kipf & Welling, 2017) on a local graph.

``H' = D^-1/2 (A + I) D^-1/2 H W + b`` with ``D`` the global in-degree plus one: the same
function as PyG's ``GCNConv`` (default ``add_self_loops=True, normalize=True``), with the same
parameter names (``lin.weight``, ``bias``) and initialisation (Glorot weight, zero bias).
The product is evaluated in the cheaper order: transform first when the layer narrows the
width, aggregate first otherwise (always transform first on projected input rows, see
:mod:`gnntrain.models.projection`).
"""

from __future__ import annotations

import torch
from torch import nn

from gnntrain.graph import LocalGraph
from gnntrain.models.gnn import MessagePassingLayer
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

    def _transform_first(self, h: torch.Tensor | Projected) -> bool:
        return isinstance(h, Projected) or self.lin.out_features <= self.lin.in_features

    def message(self, h: torch.Tensor | Projected) -> torch.Tensor:
        return project(self.lin, h) if self._transform_first(h) else h

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor | Projected, graph: LocalGraph) -> torch.Tensor:
        a = graph.operator("gcn") @ z
        return (a if self._transform_first(h_inner) else self.lin(a)) + self.bias
