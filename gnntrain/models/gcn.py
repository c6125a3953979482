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


class GCNLayer(nn.Module):
    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.empty(out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.lin.weight)
        nn.init.zeros_(self.bias)

    def forward(self, h_inner: torch.Tensor, h_halo: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        adj = graph.operator("gcn")
        h = torch.cat([h_inner, h_halo])
        if self.lin.out_features <= self.lin.in_features:
            return adj @ self.lin(h) + self.bias
        return self.lin(adj @ h) + self.bias
