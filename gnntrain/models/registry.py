"""The model registry: every model declares itself once, beside its layer, with
:func:`register_model`: its name (``model=<name>``), how to build it, and its config dataclass,
whose defaults are the model's paper settings. The config store offers ``model=<name>`` built
from that dataclass (no YAML repeats a default), and ``--help`` and the docs describe its keys
from the dataclass's attribute docstrings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import nn

from gnntrain.config.schema import ModelConfig, registered, typed
from gnntrain.models.norm import AllSum


@dataclass(frozen=True)
class ModelSpec:
    name: str
    """``model=<name>``."""
    build: Callable[[ModelConfig, int, int, AllSum], nn.Module]
    """``build(config, input width, output width, all_sum)``: the model, on one rank, from its
    typed config (an instance of ``config``)."""
    config: type[ModelConfig] = ModelConfig
    """Its config dataclass (extends :class:`~gnntrain.config.schema.ModelConfig`), with its paper's defaults."""


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


def model_config(section: Any) -> ModelConfig:
    """A ``model`` section (plain, or typed already) as its registered model's config dataclass."""
    name = section.name if isinstance(section, ModelConfig) else section["name"]
    return typed(model_spec(name).config, section)
