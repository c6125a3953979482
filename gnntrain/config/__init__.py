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


def flatten(tree: dict, prefix: str = "") -> dict:
    """A nested config as ``{"a.b.c": value}``."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


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
