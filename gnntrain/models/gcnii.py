"""GCNII (Chen et al., 2020): deep GCN with initial residual and identity mapping.

``H_0 = ReLU(W_in X)``; for layer ``l = 1..L``:
``S = (1 - alpha) P H_{l-1} + alpha H_0``, ``H_l = ReLU((1 - beta_l) S + beta_l S W_l)`` with
``P = D^-1/2 (A + I) D^-1/2`` (global degrees) and ``beta_l = log(theta / l + 1)`` (the paper's
``lambda`` is ``theta``; ``log(lambda/l + 1) ~ lambda/l``); output ``W_out H_L``. Dropout
before every layer, as in the paper; a convolution's halo rows get theirs after they arrive
(see :mod:`gnntrain.models.gnn`).

``model.layers`` counts the ``L`` GCNII convolutions, not the input and output linear maps
(the paper's "64 layers" are convolutions). Only convolution inputs are exchanged; the initial
residual ``H_0`` uses the rank's own rows and needs no halo. The convolution equals PyG's
``GCN2Conv(shared_weights=True)`` given the same ``weight1``, with its fused operations: ``S``
in one ``lerp``, ``H_l`` in one ``addmm``.

Kept for the backward (``N`` target rows, ``S`` source rows: inner and halo, ``b`` bytes per
value): per convolution, ``S`` (``N d b``, the gradient of ``weight1``) and the ReLU's output (``N d
b``); with dropout on, the keep mask of the input rows (``S d`` bytes). The propagation keeps
nothing (its backward uses the graph's precomputed transpose), nor do the ``lerp``'s and the
``addmm``'s scalar weights. Around the convolutions: the input map keeps the input rows (``N F
b``) and ``H_0`` (``N d b``); the output map its dropped input and mask.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from gnntrain.data.aggregation import SYMMETRIC
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models import rows
from gnntrain.models.gnn import (
    Block, Extra, HaloSource, MessagePassingLayer, MessagePassingModel, propagate, row_block, squared_weight_sums,
)
from gnntrain.models.projection import Projected, project
from gnntrain.models.config import GCNIIConfig
from gnntrain.models.norm import AllSum


class GCNIILayer(MessagePassingLayer):
    aggregation = SYMMETRIC

    def __init__(self, channels: int, alpha: float, theta: float, layer: int) -> None:
        super().__init__()
        self.in_dim = channels
        self.alpha = alpha
        self.beta = math.log(theta / layer + 1.0)
        self.weight1 = nn.Parameter(torch.empty(channels, channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.weight1)

    def aggregates_rows_by_operator(self, transform: bool) -> bool:
        return True

    def squared_weight_sums(self, graph: LocalGraph) -> torch.Tensor:
        return squared_weight_sums(graph, self.aggregation, 1.0 - self.alpha)

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor, graph: LocalGraph, transform: bool,
                  h0: torch.Tensor) -> torch.Tensor:
        s = torch.lerp(graph.operator(self.aggregation) @ z, graph.target_rows(h0), self.alpha)
        rows.add(s.shape[0])
        return torch.addmm(s, s, self.weight1, beta=1.0 - self.beta, alpha=self.beta)


class GCNII(MessagePassingModel):
    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int, dropout: float,
                 alpha: float, theta: float) -> None:
        super().__init__()
        self.lin_in = nn.Linear(in_dim, hidden)
        self.convs = nn.ModuleList(GCNIILayer(hidden, alpha, theta, layer) for layer in range(1, layers + 1))
        self.lin_out = nn.Linear(hidden, out_dim)
        self.dropout = dropout

    @property
    def input_maps(self) -> list[nn.Linear]:
        return [self.lin_in]

    @property
    def input_site(self) -> int:
        return len(self.convs)

    @property
    def blocks(self) -> list[Block]:
        return [Block(None, [self.lin_in], self._input), *(self._conv_block(i) for i in range(len(self.convs))),
                row_block([self.lin_out], self._output)]

    def _input(self, x: torch.Tensor | Projected, extra: Extra, graph: LocalGraph,
               halo: HaloSource) -> tuple[torch.Tensor, Extra]:
        if not isinstance(x, Projected):
            rows.add(x.shape[0])
            x = self.drop_input(x, graph.global_ids[: x.shape[0]])
        h0 = F.relu(project(self.lin_in, x))
        return h0, {**extra, "h0": h0}

    def _output(self, h: torch.Tensor, graph: LocalGraph) -> torch.Tensor:
        return self.lin_out(self.dropout_at(len(self.convs) + 1)(h, graph.global_ids[: h.shape[0]]))

    def _conv_block(self, i: int) -> Block:
        conv = self.convs[i]

        def run(h: torch.Tensor, extra: Extra, graph: LocalGraph, halo: HaloSource) -> tuple[torch.Tensor, Extra]:
            return F.relu(propagate(conv, h, i, graph, halo, self.dropout_at(i), extra["h0"])), extra

        return Block(i, [conv], run, carries=("h0",))


def build_gcnii(config: GCNIIConfig, in_dim: int, out_dim: int, all_sum: AllSum) -> GCNII:
    """GCNII with ``model.layers`` convolutions (:mod:`gnntrain.models.config`'s ``gcnii``)."""
    return GCNII(in_dim, config.hidden, out_dim, config.layers, config.dropout, config.alpha, config.theta)
