"""GCN layer (Kipf & Welling, 2017) on a local graph.

``H' = D^-1/2 (A + I) D^-1/2 H W + b`` with ``D`` the global in-degree plus one: the same
function as PyG's ``GCNConv`` (default ``add_self_loops=True, normalize=True``), with the same
parameter names (``lin.weight``, ``bias``) and initialisation (Glorot weight, zero bias).
The product is evaluated in the cheaper order for the graph's rows
(:class:`~gnntrain.models.gnn.LinearMessageLayer`): ``W`` on every source row and then the
aggregation, or the aggregation and then ``W`` on the target rows.

Kept for the backward, per layer (``N`` target rows, ``S`` source rows: inner and halo, ``b``
bytes per value): aggregating first, ``A h`` (``N d_in b``), all the gradient of ``W`` needs;
mapping first, the layer's input rows (``S d_in b``; the input tensor itself where no dropout
copies it). The aggregation keeps nothing: its backward is ``A^T g`` with the graph's
precomputed ``A^T``. Where the input has a gradient (every layer but the first) and dropout is
on, the keep mask adds ``S d_in`` bytes; a hidden layer's activation keeps its output (``N
d_out b``), which is the next layer's input, counted once.
"""

from __future__ import annotations

import torch
from torch import nn

from gnntrain.data.aggregation import SYMMETRIC
from gnntrain.config.schema import ModelConfig
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models.gnn import GNN, LinearMessageLayer, stack
from gnntrain.models.norm import AllSum
from gnntrain.models.projection import Projected


class GCNLayer(LinearMessageLayer):
    aggregation = SYMMETRIC

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

    @property
    def message_map(self) -> nn.Linear:
        return self.lin

    @property
    def output_bias(self) -> torch.Tensor:
        return self.bias

    def linear_part(self, z: torch.Tensor, h_inner: torch.Tensor | Projected, graph: LocalGraph,
                    transform: bool, bias: torch.Tensor | None = None) -> torch.Tensor:
        return self.aggregate_messages(z, graph, transform, bias)


def build_gcn(config: ModelConfig, in_dim: int, out_dim: int, all_sum: AllSum) -> GNN:
    """``model.layers`` GCN layers (:mod:`gnntrain.models.config`'s ``gcn``)."""
    return stack(config, in_dim, out_dim, all_sum, lambda a, b, last: GCNLayer(a, b))
