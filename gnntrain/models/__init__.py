"""Model registry: ``model.name`` -> a module that runs on a local graph.

Every model has ``forward(x, graph, halo)`` (``halo(h, layer)`` returns the halo rows of the
input of message-passing layer ``layer``) and ``input_widths`` (one entry per such layer).
``all_sum`` is the differentiable cross-rank sum that ``model.norm=batch`` needs for
whole-graph statistics (identity in a single process). The built-in models are declared in
:mod:`gnntrain.models.config` (:mod:`gnntrain.models.registry`), which imports no torch; each
model's layers and builder are in its own module, imported when a job builds the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from gnntrain.config.schema import ModelConfig
from gnntrain.models import config as _declarations  # noqa: F401 - registers the built-in models
from gnntrain.models.registry import MODELS, ModelSpec, model_spec, register_model

if TYPE_CHECKING:
    from torch import nn

    from gnntrain.models.norm import AllSum

__all__ = ["MODELS", "ModelSpec", "build_model", "model_spec", "register_model"]


def build_model(config: ModelConfig, in_dim: int, out_dim: int, all_sum: Optional[AllSum] = None) -> nn.Module:
    """The model the typed ``model`` config section names (``all_sum``: the cross-rank sum of
    ``model.norm=batch``; None: this rank's own, :func:`~gnntrain.models.norm.local_sum`)."""
    if all_sum is None:
        from gnntrain.models.norm import local_sum

        all_sum = local_sum
    return model_spec(config.name).build(config, in_dim, out_dim, all_sum)
