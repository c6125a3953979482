"""GCN layer (Kipf & Welling, 2017) on a local graph.

``H' = D^-1/2 (A + I) D^-1/2 H W + b`` with ``D`` the global in-degree plus one: the same
function as PyG's ``GCNConv`` (default ``add_self_loops=True, normalize=True``), with the same
parameter names (``lin.weight``, ``bias``) and initialisation (Glorot weight, zero bias).
The product is evaluated in the cheaper order: transform first when the layer narrows the
width, aggregate first otherwise.
"""

from __future__ import annotations

import torch
from torch import nn

from gnntrain.graph import LocalGraph
from gnntrain.models.gnn import MessagePassingLayer


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
    def _transform_first(self) -> bool:
        return self.lin.out_features <= self.lin.in_features

    def message(self, h: torch.Tensor) -> torch.Tensor:
        return self.lin(h) if self._transform_first else h

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        a = graph.operator("gcn") @ z
        return (a if self._transform_first else self.lin(a)) + self.bias
