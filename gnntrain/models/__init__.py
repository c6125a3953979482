"""Model registry: ``model.name`` -> a module that runs on a local graph.

Every model has ``forward(x, graph, halo)`` (``halo(h, layer)`` returns the halo rows of the
input of message-passing layer ``layer``) and ``input_widths`` (one entry per such layer).
``all_sum`` is the differentiable cross-rank sum that ``model.norm=batch`` needs for
whole-graph statistics (identity in a single process). Each model registers itself beside its
layer (:mod:`gnntrain.models.registry`).
"""

from __future__ import annotations

from torch import nn

from gnntrain.config.schema import ModelConfig
from gnntrain.models import deepgcn, film, gat, gcn, gcnii, sage  # noqa: F401 - each registers its model
from gnntrain.models.norm import AllSum, local_sum
from gnntrain.models.registry import MODELS, ModelSpec, model_spec, register_model

__all__ = ["MODELS", "ModelSpec", "build_model", "model_spec", "register_model"]


def build_model(config: ModelConfig, in_dim: int, out_dim: int, all_sum: AllSum = local_sum) -> nn.Module:
    """The model the typed ``model`` config section names."""
    return model_spec(config.name).build(config, in_dim, out_dim, all_sum)
