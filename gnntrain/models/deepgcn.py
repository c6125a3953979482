"""DeeperGCN (Li et al., 2020): GENConv layers in pre-activation residual (res+) blocks.

GENConv, softmax aggregation with inverse temperature ``t`` (learnable with ``learn_t``):
``m_j = ReLU(h_j) + eps``, ``a_i = sum_{j in N(i)} softmax_j(t m_j) * m_j`` per channel over
node ``i``'s full in-neighbourhood (halo included; no self-loop), ``h_i' = MLP(a_i + h_i)``
with ``MLP = Linear(C, 2C) -> norm -> ReLU -> Linear(2C, C)`` (no biases). Same function and
parameters as PyG's ``GENConv(C, C, aggr="softmax")`` with ``norm`` given; ``model.norm=batch``
uses the cross-rank batch norm of :mod:`gnntrain.models.norm`, so it equals PyG's
``BatchNorm1d`` over the whole graph.

Model (the res+ stack of PyG's ``DeepGCNLayer`` and its ogbn-proteins example):
``h_0 = W_in x``; ``h_1 = GEN_1(h_0)``; ``h_l = h_{l-1} + GEN_l(dropout(ReLU(norm_l(h_{l-1}))))``
for ``l = 2..L``; ``out = W_out dropout(ReLU(norm_1(h_L)))``. ``model.layers`` counts the ``L``
GENConv layers (HopGNN's "seven layers"), not the input and output linear maps. The halo
exchange moves each GENConv's input before dropout, i.e. rows after the owner's norm and
activation; the receiver applies dropout to them (see :mod:`gnntrain.models.gnn`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gnntrain.data.local_graph import LocalGraph
from gnntrain.models import rows
from gnntrain.models.edge_ops import edge_softmax, edge_sum
from gnntrain.models.gnn import (
    Block, Extra, HaloSource, MessagePassingLayer, MessagePassingModel, propagate, row_block,
)
from gnntrain.models.projection import Projected, project
from gnntrain.models.norm import AllSum, local_sum, make_norm
from gnntrain.models.config import DeepGCNConfig


class GENLayer(MessagePassingLayer):
    reads_targets = True

    def __init__(self, channels: int, t: float = 1.0, learn_t: bool = True, norm: str = "layer",
                 all_sum: AllSum = local_sum, expansion: int = 2, eps: float = 1e-7) -> None:
        super().__init__()
        self.in_dim = channels
        self.eps = eps
        self.t = nn.Parameter(torch.full((1,), t)) if learn_t else t
        self.mlp = nn.Sequential(
            nn.Linear(channels, channels * expansion, bias=False),
            make_norm(norm, channels * expansion, all_sum),
            nn.ReLU(),
            nn.Linear(channels * expansion, channels, bias=False),
        )

    def message(self, h: torch.Tensor, transform: bool) -> torch.Tensor:
        return F.relu(h) + self.eps

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor, graph: LocalGraph, transform: bool) -> torch.Tensor:
        n = graph.num_targets
        m = z[graph.edge_src]
        alpha = edge_softmax(m * self.t, graph.edge_dst, n)
        return edge_sum(alpha * m, graph.edge_dst, n) + graph.target_rows(h_inner)

    def update(self, a: torch.Tensor) -> torch.Tensor:
        rows.add(a.shape[0])
        return self.mlp(a)


class DeepGCN(MessagePassingModel):
    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float, norm: str,
                 t: float, learn_t: bool, all_sum: AllSum = local_sum) -> None:
        super().__init__()
        self.lin_in = nn.Linear(in_dim, hidden)
        self.convs = nn.ModuleList(GENLayer(hidden, t, learn_t, norm, all_sum) for _ in range(layers))
        self.norms = nn.ModuleList(make_norm(norm, hidden, all_sum) for _ in range(layers))
        self.lin_out = nn.Linear(hidden, out_dim)
        self.dropout = dropout

    @property
    def input_maps(self) -> list[nn.Linear]:
        return [self.lin_in]

    @property
    def input_dropout(self) -> float:
        return 0.0

    @property
    def blocks(self) -> list[Block]:
        return [row_block([self.lin_in], self._input), *(self._gen_block(i) for i in range(len(self.convs))),
                row_block([self.norms[0], self.lin_out], self._output)]

    def _input(self, x: torch.Tensor | Projected, graph: LocalGraph) -> torch.Tensor:
        if not isinstance(x, Projected):
            rows.add(x.shape[0])
        return project(self.lin_in, x)

    def _output(self, h: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        h = F.relu(self.norms[0](h))
        return self.lin_out(self.dropout_at(len(self.convs))(h, graph.global_ids[: h.shape[0]]))

    def _gen_block(self, i: int) -> Block:
        """GENConv 1 alone (no dropout on its input); GENConv ``i > 1`` in a res+ block."""
        conv, norm = self.convs[i], self.norms[i]

        def first(h: torch.Tensor, extra: Extra, graph: LocalGraph, halo: HaloSource) -> tuple[torch.Tensor, Extra]:
            return propagate(conv, h, 0, graph, halo, lambda h, ids: h), extra

        def res_plus(h: torch.Tensor, extra: Extra, graph: LocalGraph, halo: HaloSource) -> tuple[torch.Tensor, Extra]:
            return graph.target_rows(h) + propagate(conv, F.relu(norm(h)), i, graph, halo, self.dropout_at(i)), extra

        return Block(0, [conv], first) if i == 0 else Block(i, [conv, norm], res_plus)


def build_deepgcn(config: DeepGCNConfig, in_dim: int, out_dim: int, all_sum: AllSum) -> DeepGCN:
    """DeeperGCN with ``model.layers`` res+ blocks (:mod:`gnntrain.models.config`'s ``deepgcn``)."""
    return DeepGCN(in_dim, config.hidden, out_dim, config.layers, config.dropout, config.norm, config.t, config.learn_t,
                   all_sum)
