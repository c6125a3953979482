"""Model registry: ``model.name`` -> a module that runs on a local graph.

Every model has ``forward(x, graph, halo)`` (``halo(h, layer)`` returns the halo rows of the
input of message-passing layer ``layer``) and ``input_widths`` (one entry per such layer).
``all_sum`` is the differentiable cross-rank sum that ``model.norm=batch`` needs for
whole-graph statistics (identity in a single process).
"""

from __future__ import annotations

from typing import Callable

import torch.nn.functional as F
from torch import nn

from gnntrain.errors import ConfigError
from gnntrain.models.deepgcn import DeepGCN
from gnntrain.models.film import FiLMLayer
from gnntrain.models.gat import GATLayer
from gnntrain.models.gcn import GCNLayer
from gnntrain.models.gcnii import GCNII
from gnntrain.models.gnn import GNN
from gnntrain.models.norm import AllSum, local_sum
from gnntrain.models.sage import SAGELayer

ModelBuilder = Callable[[dict, int, int, AllSum], nn.Module]


def _stack(cfg: dict, in_dim: int, out_dim: int, all_sum: AllSum, make_layer, activation=F.relu) -> GNN:
    return GNN(make_layer, in_dim, cfg["hidden"], out_dim, cfg["layers"], cfg["dropout"], cfg["norm"],
               activation, all_sum)


def _gat(cfg: dict, in_dim: int, out_dim: int, all_sum: AllSum) -> GNN:
    """Hidden layers: ``heads`` heads of width ``hidden / heads``, concatenated; output layer:
    ``out_heads`` heads averaged (the GAT paper: one on Cora and CiteSeer, eight on PubMed).
    ELU between layers, attention dropout ``att_dropout`` in every layer, as in the paper.
    ``config.validate`` checks that ``heads`` divides ``hidden``."""
    heads, att_dropout = cfg["heads"], cfg["att_dropout"]

    def make_layer(a: int, b: int, last: bool) -> nn.Module:
        if last:
            return GATLayer(a, b, heads=cfg["out_heads"], concat=False, att_dropout=att_dropout)
        return GATLayer(a, b // heads, heads=heads, att_dropout=att_dropout)

    return _stack(cfg, in_dim, out_dim, all_sum, make_layer, activation=F.elu)


def _film(cfg: dict, in_dim: int, out_dim: int, all_sum: AllSum) -> GNN:
    """FiLM layers carry their own ReLU (none in the output layer), so the stack adds none;
    the norm follows each hidden layer, as in PyG's GNN-FiLM example."""
    return _stack(cfg, in_dim, out_dim, all_sum, lambda a, b, last: FiLMLayer(a, b, act=not last),
                  activation=nn.Identity())


MODELS: dict[str, ModelBuilder] = {
    "gcn": lambda cfg, i, o, s: _stack(cfg, i, o, s, lambda a, b, last: GCNLayer(a, b)),
    "sage": lambda cfg, i, o, s: _stack(cfg, i, o, s, lambda a, b, last: SAGELayer(a, b)),
    "gat": _gat,
    "gcnii": lambda cfg, i, o, s: GCNII(i, cfg["hidden"], o, cfg["layers"], cfg["dropout"], cfg["alpha"],
                                        cfg["theta"]),
    "deepgcn": lambda cfg, i, o, s: DeepGCN(i, cfg["hidden"], o, cfg["layers"], cfg["dropout"], cfg["norm"],
                                            cfg["t"], cfg["learn_t"], s),
    "film": _film,
}


def build_model(cfg: dict, in_dim: int, out_dim: int, all_sum: AllSum = local_sum) -> nn.Module:
    """Build ``cfg['name']`` from a ``model`` config section (plain dict)."""
    if cfg["name"] not in MODELS:
        raise ConfigError(f"unknown model.name '{cfg['name']}'; valid: {', '.join(sorted(MODELS))}")
    return MODELS[cfg["name"]](cfg, in_dim, out_dim, all_sum)
