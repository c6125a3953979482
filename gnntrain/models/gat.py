"""Graph attention layer (Veličković et al., 2018) on a local graph.

``z = W h``; for every in-edge ``j -> i`` of an inner node and its self-loop,
``e_ij = LeakyReLU(a_src · z_j + a_dst · z_i)`` per head, ``alpha_ij = softmax_j(e_ij)`` over
node ``i``'s *full* in-neighbourhood (halo neighbours included, so the softmax equals the
full-graph one), ``h_i' = ||_heads sum_j alpha_ij z_j`` (or the mean over heads) ``+ b``.
Same function, parameter names and initialisation as PyG's ``GATConv`` (self-loops added).

Attention dropout (the paper's Sec. 3.3: "dropout ... applied to the normalized attention
coefficients", PyG's ``GATConv(dropout=...)``): in training each ``alpha_ij`` of each head is
dropped with probability ``att_dropout`` after the softmax and the kept ones scaled up. The
mask is keyed (:func:`gnntrain.rng.random16.dropout`) by the step's edge key (:attr:`edge_key`,
set by the model for each step), the edge's global ``(source, target)`` ids and the head, so it
is one mask per edge whichever rank, pipeline chunk or mini-batch computes the edge.

The halo exchange moves the layer *input* ``h`` once; ``W`` is applied to halo rows locally,
so bytes do not grow with the number of heads. The weighted sum runs as one sparse product per
head over the graph's edge pattern (:func:`gnntrain.data.sparse.weighted_sum`), never forming the
``[edges, heads, channels]`` messages.

Kept for the backward, per layer (``N`` target rows, ``S`` source rows, ``E`` in-edges, ``K``
heads of ``C`` channels, ``b`` bytes per value): the input rows (``S d_in b``, the gradient of
``W``), the messages ``z`` (``S K C b``: the attention scores' and the weighted sum's
gradients), and per edge or self-loop and head the coefficient ``alpha`` (``b``) and whether its
raw score was positive (1 byte; :func:`~gnntrain.models.edge_ops.edge_softmax`); with attention
dropout, the dropped coefficients the sum weighs by (``b``) and their mask (1 byte). The edges'
endpoint ids are the graph's own tensors. With dropout on, the input rows' keep mask adds ``S
d_in`` bytes where the input has a gradient.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from gnntrain.data.aggregation import SYMMETRIC
from gnntrain.data.local_graph import LocalGraph
from gnntrain.models import rows
from gnntrain.models.edge_ops import edge_softmax
from gnntrain.models.gnn import GNN, MessagePassingLayer, stack
from gnntrain.models.norm import AllSum
from gnntrain.models.projection import Projected, project
from gnntrain.models.config import GATConfig
from gnntrain.rng.random16 import dropout
from gnntrain.data.sparse import weighted_sum


class GATLayer(MessagePassingLayer):
    def __init__(self, in_dim: int, out_dim: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, att_dropout: float = 0.0) -> None:
        super().__init__()
        self.in_dim, self.heads, self.out_dim, self.concat = in_dim, heads, out_dim, concat
        self.negative_slope, self.att_dropout = negative_slope, att_dropout
        self.lin = nn.Linear(in_dim, heads * out_dim, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_dim))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_dim))
        self.bias = nn.Parameter(torch.empty(heads * out_dim if concat else out_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyG's ``GATConv`` initialisation, drawn in its order: Glorot-uniform ``W`` and attention
        vectors, each attention vector with the bound ``sqrt(6 / (heads + channels))`` of its
        last two sizes (torch's ``xavier_uniform_`` on the ``1 x heads x channels`` tensor would
        take ``heads channels + channels``, a bound 2.1 times narrower at 8 x 8), zero bias."""
        nn.init.xavier_uniform_(self.lin.weight)
        bound = math.sqrt(6.0 / (self.heads + self.out_dim))
        for att in (self.att_src, self.att_dst):
            nn.init.uniform_(att, -bound, bound)
        nn.init.zeros_(self.bias)

    @property
    def input_maps(self) -> list[nn.Linear]:
        return [self.lin]

    def message(self, h: torch.Tensor | Projected, transform: bool) -> torch.Tensor:
        if not isinstance(h, Projected):
            rows.add(h.shape[0])
        return project(self.lin, h).view(-1, self.heads, self.out_dim)

    def aggregate(self, z: torch.Tensor, h_inner: torch.Tensor, graph: LocalGraph, transform: bool) -> torch.Tensor:
        n = graph.num_targets
        src, dst = graph.self_loop_edges
        score_src = (z * self.att_src).sum(-1)
        score_dst = (graph.target_rows(z) * self.att_dst).sum(-1)
        alpha = edge_softmax(score_src.index_select(0, src) + score_dst.index_select(0, dst), dst, n,
                             self.negative_slope)
        if self.training and self.att_dropout:
            alpha = dropout(alpha, self.att_dropout, True, self.edge_key, graph.self_loop_edge_ids)
        out = weighted_sum(graph.pattern(SYMMETRIC), alpha, z)
        out = out.reshape(n, -1) if self.concat else out.mean(dim=1)
        return out + self.bias


def build_gat(config: GATConfig, in_dim: int, out_dim: int, all_sum: AllSum) -> GNN:
    """Hidden layers: ``heads`` heads of width ``hidden / heads``, concatenated; output layer:
    ``out_heads`` heads averaged (the GAT paper: one on Cora and CiteSeer, eight on PubMed).
    ELU between layers, attention dropout ``att_dropout`` in every layer, as in the paper.
    :func:`~gnntrain.models.config.validate_gat` checks that ``heads`` divides ``hidden``."""
    heads, att_dropout = config.heads, config.att_dropout

    def make_layer(a: int, b: int, last: bool) -> nn.Module:
        if last:
            return GATLayer(a, b, heads=config.out_heads, concat=False, att_dropout=att_dropout)
        return GATLayer(a, b // heads, heads=heads, att_dropout=att_dropout)

    return stack(config, in_dim, out_dim, all_sum, make_layer, activation=F.elu)
