"""GNN-FiLM layer (Brockschmidt, 2020), one edge type, on a local graph.

Messages are modulated feature-wise by the *target*: ``[beta_i, gamma_i] = F h_i + b_F`` and
``m_ij = act(gamma_i * (W h_j) + beta_i)`` for each in-edge ``j -> i``; plus a modulated skip
term, ``h_i' = act(gamma'_i * (W' h_i) + beta'_i) + mean_{j in N(i)} m_ij`` with
``[beta'_i, gamma'_i] = F' h_i``. ``act`` is ReLU (none in the output layer). The mean runs
over node ``i``'s full (global) in-neighbourhood (in a sampled graph each message is weighted
by its ``edge_scale`` and the divisor stays the full degree), so halo rows are needed only as sources:
the exchange moves the layer input once and ``W`` is applied to halo rows locally. Same
function as PyG's ``FiLMConv`` (``lins.0 -> lin``, ``films.0 -> film``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gnntrain.data.local_graph import LocalGraph
from gnntrain.models import rows
from gnntrain.models.edge_ops import edge_sum
from gnntrain.models.gnn import GNN, MessagePassingLayer, stack
from gnntrain.models.norm import AllSum
from gnntrain.models.projection import Projected, project
from gnntrain.models.config import FiLMConfig


class FiLMLayer(MessagePassingLayer):
    reads_targets = True

    def __init__(self, in_dim: int, out_dim: int, act: bool = True) -> None:
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.act = F.relu if act else (lambda h: h)
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.film = nn.Linear(in_dim, 2 * out_dim)
        self.lin_skip = nn.Linear(in_dim, out_dim, bias=False)
        self.film_skip = nn.Linear(in_dim, 2 * out_dim, bias=False)

    @property
    def input_maps(self) -> list[nn.Linear]:
        return [self.lin, self.film, self.lin_skip, self.film_skip]

    def message(self, h: torch.Tensor | Projected, transform: bool) -> torch.Tensor:
        if not isinstance(h, Projected):
            rows.add(h.shape[0])
        return project(self.lin, h)

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor | Projected, graph: LocalGraph,
                  transform: bool) -> torch.Tensor:
        src, dst = graph.edge_src, graph.edge_dst
        root = graph.target_rows(h_inner)
        beta, gamma = project(self.film_skip, root).split(self.out_dim, dim=-1)
        skip = self.act(gamma * project(self.lin_skip, root) + beta)
        beta, gamma = project(self.film, root).split(self.out_dim, dim=-1)
        messages = self.act(gamma[dst] * z[src] + beta[dst])
        weight = 1.0 / graph.target_rows(graph.in_degree).clamp(min=1)[dst]
        if graph.edge_scale is not None:
            weight = weight * graph.edge_scale
        return skip + edge_sum(messages * weight.to(messages.dtype).unsqueeze(-1), dst, graph.num_targets)


def build_film(config: FiLMConfig, in_dim: int, out_dim: int, all_sum: AllSum) -> GNN:
    """FiLM layers carry their own ReLU (none in the output layer), so the stack adds none;
    the norm follows each hidden layer, as in PyG's GNN-FiLM example."""
    return stack(config, in_dim, out_dim, all_sum, lambda a, b, last: FiLMLayer(a, b, act=not last),
                 activation=nn.Identity())
