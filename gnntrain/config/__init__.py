"""Structured config: the single source of truth for every key ``gnntrain`` accepts.

Hydra composes ``conf/config.yaml`` with one option from each group (``dataset``, ``model``,
``strategy``, ``cluster``); each option's YAML starts from a schema (stored in the
``schema/<group>`` config group): the root ones of :mod:`gnntrain.config.schema`, or a strategy
family's own, so a misspelt key or a value of the wrong type fails at composition time instead
of deep inside a worker. Every component checks what types cannot express itself
(:mod:`gnntrain.job.validation` runs the checks). This package imports nothing of gnntrain above it:
the registries of models and strategies, which extend its schemas, sit above it.
"""

from __future__ import annotations

from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from gnntrain.errors import ConfigError


def flatten(tree: dict, prefix: str = "") -> dict:
    """A nested config as ``{"a.b.c": value}``."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


SET_BY_GNNTRAIN = {"network.calibration": "network.calibrate_share=<share> (gnntrain records what it chose here)",
                   "wandb.run": "wandb.project, wandb.group, wandb.name (gnntrain keeps the run it made here)"}
"""Keys of the config that gnntrain fills in itself, with what a user sets instead."""


def refuse_set_by_gnntrain(overrides: list[str]) -> None:
    """One line for an override of a key gnntrain fills in itself (:data:`SET_BY_GNNTRAIN`), which
    Hydra would otherwise merge into a null mapping with an ``AttributeError``."""
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        for internal, instead in SET_BY_GNNTRAIN.items():
            if "=" in override and (key == internal or key.startswith(internal + ".")):
                raise ConfigError(f"{key} is set by gnntrain, not an option; valid: {instead}")


def one_line(exc: BaseException) -> str:
    """The user-facing line for an error: ours as they are; a composition error naming the
    valid choices or keys."""
    if isinstance(exc, MissingConfigException) and exc.missing_cfg_file:
        group, _, option = exc.missing_cfg_file.rpartition("/")
        choices = ", ".join(sorted(exc.options or []))
        return f"unknown {group or 'config'} '{option}'; valid: {choices}"
    cause = exc.__cause__ if isinstance(exc, HydraException) and exc.__cause__ else exc
    if isinstance(cause, OmegaConfBaseException):
        key = getattr(cause, "full_key", None)
        msg = str(cause).splitlines()[0]
        valid = _valid_keys(cause)
        return f"{key}: {msg}{valid}" if key else msg + valid
    return " ".join(str(exc).split())


def _valid_keys(cause: OmegaConfBaseException) -> str:
    parent = getattr(cause, "parent_node", None)
    if isinstance(cause, (ConfigKeyError, ConfigAttributeError)) and isinstance(parent, DictConfig):
        return f" (valid keys here: {', '.join(str(k) for k in parent.keys())})"
    return ""
