"""GraphSAGE layer with the mean aggregator (Hamilton et al., 2017) on a local graph.

``h_i' = W_l · mean_{j in N(i)} h_j + b + W_r · h_i``, i.e. ``W · [z_i || h_i]`` as PipeGCN and
BNS-GCN write it, with the mean over the node's full (global) in-neighbourhood. Same function,
parameter names (``lin_l`` with bias, ``lin_r`` without) and initialisation as PyG's
``SAGEConv(aggr="mean")``.
"""

from __future__ import annotations

import torch
from torch import nn

from gnntrain.graph import LocalGraph


class SAGELayer(nn.Module):
    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.lin_l = nn.Linear(in_dim, out_dim, bias=True)
        self.lin_r = nn.Linear(in_dim, out_dim, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin_l.reset_parameters()
        self.lin_r.reset_parameters()

    def forward(self, h_inner: torch.Tensor, h_halo: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        adj = graph.operator("mean")
        h = torch.cat([h_inner, h_halo])
        w = self.lin_l.weight
        # The bias is added after aggregation: nodes without in-neighbours still get it.
        neigh = adj @ (h @ w.t()) if w.shape[0] <= w.shape[1] else (adj @ h) @ w.t()
        return neigh + self.lin_l.bias + self.lin_r(h_inner)
