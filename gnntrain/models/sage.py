"""GraphSAGE layer with the mean aggregator (Hamilton et al., 2017) on a local graph.

``h_i' = W_l · mean_{j in N(i)} h_j + b + W_r · h_i``, i.e. ``W · [z_i || h_i]`` as PipeGCN and
BNS-GCN write it, with the mean over the node's full (global) in-neighbourhood. Same function,
parameter names (``lin_l`` with bias, ``lin_r`` without) and initialisation as PyG's
``SAGEConv(aggr="mean")``. ``W_l`` runs before or after the mean, whichever is cheaper for the
graph's rows (:class:`~gnntrain.models.gnn.LinearMessageLayer`); mapping first, ``W_l`` and
``W_r`` run as one product of the stacked weights (:meth:`LinearMessageLayer.read_inputs`).

Kept for the backward, per layer (``N`` target rows, ``S`` source rows: inner and halo, ``b``
bytes per value): aggregating first, ``mean_j h_j`` and the targets' own rows (``2 N d_in b``:
the gradients of ``W_l`` and ``W_r``); mapping first, the input rows once for both maps (``S
d_in b``) and, where the input has a gradient, the stacked weight. Where the input has a
gradient and dropout is on, the keep mask adds ``S d_in`` bytes; a hidden layer's activation
keeps its output (``N d_out b``), the next layer's input, counted once.
"""

from __future__ import annotations

import torch
from torch import nn

from gnntrain.data.aggregation import MEAN
from gnntrain.data.local_graph import LocalGraph
from gnntrain.config.schema import ModelConfig
from gnntrain.models.gnn import GNN, LinearMessageLayer, stack
from gnntrain.models.norm import AllSum
from gnntrain.models.projection import Projected, project


class SAGELayer(LinearMessageLayer):
    aggregation = MEAN
    reads_targets = True

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

    @property
    def message_map(self) -> nn.Linear:
        return self.lin_l

    @property
    def output_bias(self) -> torch.Tensor:
        # added after aggregation: nodes without in-neighbours still get it
        return self.lin_l.bias

    def linear_part(self, z: torch.Tensor, h_inner: torch.Tensor | Projected, graph: LocalGraph,
                    transform: bool, bias: torch.Tensor | None = None) -> torch.Tensor:
        own = project(self.lin_r, graph.target_rows(h_inner), False if bias is None else bias)
        return self.aggregate_messages(z, graph, transform, own)

    def aggregated_inputs(self, h: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        """``[mean_j h_j || h_i]``: the mean over the in-neighbours beside the target's own row."""
        return torch.cat([super().aggregated_inputs(h, graph), graph.target_rows(h)], dim=1)

    def from_aggregated(self, a: torch.Tensor) -> torch.Tensor:
        neighbours, own = a.split(self.in_dim, dim=1)
        return super().from_aggregated(neighbours) + own @ self.lin_r.weight.t()


def build_sage(config: ModelConfig, in_dim: int, out_dim: int, all_sum: AllSum) -> GNN:
    """``model.layers`` GraphSAGE layers (:mod:`gnntrain.models.config`'s ``sage``)."""
    return stack(config, in_dim, out_dim, all_sum, lambda a, b, last: SAGELayer(a, b))
