"""Model registry: ``model.name`` -> layer class, stacked by :class:`GNN`."""

from __future__ import annotations

from gnntrain.errors import ConfigError
from gnntrain.models.gcn import GCNLayer
from gnntrain.models.gnn import GNN
from gnntrain.models.sage import SAGELayer

LAYERS = {"gcn": GCNLayer, "sage": SAGELayer}


def build_model(cfg: dict, in_dim: int, out_dim: int) -> GNN:
    """Build ``cfg['name']`` from a ``model`` config section (plain dict)."""
    if cfg["name"] not in LAYERS:
        raise ConfigError(f"unknown model.name '{cfg['name']}'; valid: {', '.join(sorted(LAYERS))}")
    return GNN(LAYERS[cfg["name"]], in_dim, cfg["hidden"], out_dim, cfg["layers"], cfg["dropout"])
