"""Model registry: ``model.name`` -> a module that runs on a local graph.

Every model has ``forward(x, graph, halo)`` (``halo(h, layer)`` returns the halo rows of the
input of message-passing layer ``layer``) and ``input_widths`` (one entry per such layer).
"""

from __future__ import annotations

from typing import Callable

import torch.nn.functional as F
from torch import nn

from gnntrain.errors import ConfigError
from gnntrain.models.gat import GATLayer
from gnntrain.models.gcn import GCNLayer
from gnntrain.models.gcnii import GCNII
from gnntrain.models.gnn import GNN
from gnntrain.models.sage import SAGELayer


def _stack(cfg: dict, in_dim: int, out_dim: int, make_layer, activation=F.relu) -> GNN:
    return GNN(make_layer, in_dim, cfg["hidden"], out_dim, cfg["layers"], cfg["dropout"], cfg["norm"], activation)


def _gat(cfg: dict, in_dim: int, out_dim: int) -> GNN:
    """Hidden layers: ``heads`` heads of width ``hidden / heads``, concatenated; output layer:
    one head. ELU between layers, as in the GAT paper. ``config.validate`` checks that
    ``heads`` divides ``hidden``."""
    heads = cfg["heads"]

    def make_layer(a: int, b: int, last: bool) -> nn.Module:
        return GATLayer(a, b, heads=1, concat=False) if last else GATLayer(a, b // heads, heads=heads)

    return _stack(cfg, in_dim, out_dim, make_layer, activation=F.elu)


MODELS: dict[str, Callable[[dict, int, int], nn.Module]] = {
    "gcn": lambda cfg, i, o: _stack(cfg, i, o, lambda a, b, last: GCNLayer(a, b)),
    "sage": lambda cfg, i, o: _stack(cfg, i, o, lambda a, b, last: SAGELayer(a, b)),
    "gat": _gat,
    "gcnii": lambda cfg, i, o: GCNII(i, cfg["hidden"], o, cfg["layers"], cfg["dropout"], cfg["alpha"], cfg["theta"]),
}


def build_model(cfg: dict, in_dim: int, out_dim: int) -> nn.Module:
    """Build ``cfg['name']`` from a ``model`` config section (plain dict)."""
    if cfg["name"] not in MODELS:
        raise ConfigError(f"unknown model.name '{cfg['name']}'; valid: {', '.join(sorted(MODELS))}")
    return MODELS[cfg["name"]](cfg, in_dim, out_dim)
