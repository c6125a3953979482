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
from gnntrain.models.gnn import MessagePassingLayer
from gnntrain.models.projection import Projected, project


class SAGELayer(MessagePassingLayer):
    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim = in_dim
        self.lin_l = nn.Linear(in_dim, out_dim, bias=True)
        self.lin_r = nn.Linear(in_dim, out_dim, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin_l.reset_parameters()
        self.lin_r.reset_parameters()

    @property
    def input_maps(self) -> list[nn.Linear]:
        return [self.lin_l, self.lin_r]

    def _transform_first(self, h: torch.Tensor | Projected) -> bool:
        return isinstance(h, Projected) or self.lin_l.out_features <= self.lin_l.in_features

    def message(self, h: torch.Tensor | Projected) -> torch.Tensor:
        return project(self.lin_l, h, bias=False) if self._transform_first(h) else h

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor | Projected, graph: LocalGraph) -> torch.Tensor:
        neigh = graph.operator("mean") @ z
        if not self._transform_first(h_inner):
            neigh = neigh @ self.lin_l.weight.t()
        # The bias is added after aggregation: nodes without in-neighbours still get it.
        return neigh + self.lin_l.bias + project(self.lin_r, graph.target_rows(h_inner))
