"""The model registry: every model declares itself once with :func:`register_model`: its name
(``model=<name>``), how to build it (the function, or where it lives, ``"module:function"``,
imported when a job builds the model), its config dataclass, whose defaults are the model's
paper settings, and the checks of its own keys. The built-in models declare themselves in
:mod:`gnntrain.models.config`, which imports no torch. The config store offers ``model=<name>``
built from that dataclass (no YAML repeats a default), and ``--help`` and the docs describe its
keys from the dataclass's attribute docstrings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from gnntrain.config.schema import ModelConfig, check, check_finite, registered
from gnntrain.models.decay import parameter_decays
from gnntrain.config.references import resolve

if TYPE_CHECKING:
    from torch import nn

    from gnntrain.models.norm import AllSum


@dataclass(frozen=True)
class ModelSpec:
    name: str
    """``model=<name>``."""
    builder: Union[Callable[[ModelConfig, int, int, AllSum], nn.Module], str]
    """``builder(config, input width, output width, all_sum)``: the model, on one rank, from its
    typed config (an instance of ``config``); the function, or ``"module:function"``."""
    config: type[ModelConfig] = ModelConfig
    """Its config dataclass (extends :class:`~gnntrain.config.schema.ModelConfig`), with its paper's defaults."""
    validate: Optional[Callable[[Any], None]] = None
    """Checks of its own keys that their types cannot express, given its typed section (an
    instance of ``config``)."""

    def build(self, config: ModelConfig, in_dim: int, out_dim: int, all_sum: AllSum) -> nn.Module:
        """The model, on one rank (the builder imported if named)."""
        return resolve(self.builder)(config, in_dim, out_dim, all_sum)

    def check(self, config: ModelConfig, weight_decay: float) -> None:
        """The checks every model's section takes (sizes, dropout, ``model.decay_groups`` against
        the parameters of a small instance, whose other parameters take ``weight_decay``), then
        the model's own."""
        check("model.layers", config.layers, 1 <= config.layers <= MAX_LAYERS,
              f"in 1..{MAX_LAYERS} (the deepest of the papers: DeeperGCN's 112, GCNII's 64)")
        check("model.hidden", config.hidden, config.hidden >= 1, ">= 1")
        check("model.dropout", config.dropout, 0.0 <= config.dropout < 1.0, "in [0, 1)")
        if self.validate is not None:
            self.validate(config)
        for g, group in enumerate(config.decay_groups):
            decay = group.weight_decay
            check_finite(f"model.decay_groups[{g}].weight_decay", decay, decay >= 0, ">= 0")
        if config.decay_groups:
            from gnntrain.models.norm import local_sum

            names = [name for name, _ in self.build(config, 2, 2, local_sum).named_parameters()]
            parameter_decays(names, config.decay_groups, weight_decay)


MAX_LAYERS = 1000
"""The deepest model a run takes: deeper ones spent minutes building before the memory estimate
could refuse them."""

MODELS: dict[str, ModelSpec] = {}
"""Every registered model, by name."""


def register_model(spec: ModelSpec) -> ModelSpec:
    if not issubclass(spec.config, ModelConfig):
        raise TypeError(f"model {spec.name!r}: its config {spec.config.__name__} must extend ModelConfig")
    MODELS[spec.name] = spec
    return spec


def model_spec(name: str) -> ModelSpec:
    """The registered model ``name``; ConfigError naming the valid ones otherwise."""
    return registered(MODELS, "model.name", name)

