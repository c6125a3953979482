"""The run's config as typed sections: the one representation of a config after composition.

Hydra composes a plain, resolved config; :func:`run_config` turns it, once, into the root
schema's dataclass (:class:`~gnntrain.config.schema.RootConfig`) whose sections are instances of
their schemas, the strategy's and the model's those they registered (``run.strategy.chunks``,
``run.model.hidden``, ``run.train.dtype``), so a misspelt key fails where it is written and an
editor knows every key. Which dataclass a group's option has is the caller's to say
(``option_schema``): the registries of models, strategies and dataset sources sit above this
package.
:func:`plain` gives a section back as plain data, for the files written for users and for keys
made of a config's values.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from gnntrain.errors import ConfigError
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gnntrain.config import one_line
from gnntrain.config.schema import RootConfig, typed

OptionSchema = Callable[[str, str], type]
"""``(group, name)`` -> the config dataclass of the ``model`` or ``strategy`` option of that name,
or of the ``dataset`` source of that name."""


def run_config(cfg: dict | RootConfig, option_schema: OptionSchema) -> RootConfig:
    """The plain run config ``cfg`` with every section typed; ``option_schema`` names the
    dataclass of the model and the strategy it chose."""
    if isinstance(cfg, RootConfig):
        return cfg
    known = [field.name for field in dataclasses.fields(RootConfig)]
    unknown = sorted(set(cfg) - set(known))
    if unknown:
        raise ConfigError(f"{unknown[0]} is not a gnntrain key (added with +{unknown[0]}=...?); valid: "
                          f"{', '.join(known)}, each with the keys of its section")
    sections = {}
    for field in dataclasses.fields(RootConfig):
        value, schema = cfg[field.name], field.metadata.get("schema")
        try:
            if field.name == "dataset":
                value = typed(option_schema("dataset", value["source"]), value)
            elif field.name in ("model", "strategy"):
                value = typed(option_schema(field.name, value["name"]), value)
            elif schema is not None:
                value = typed(schema, value)
        except OmegaConfBaseException as exc:  # a key or value its schema does not have (dataset.source=file)
            raise ConfigError(f"{field.name}: {one_line(exc)}") from None
        sections[field.name] = value
    return RootConfig(**sections)


def plain(section: Any) -> Any:
    """A typed section (or the whole run) as plain data, enums as their values: what a
    composed config held."""
    return OmegaConf.to_container(OmegaConf.structured(section), enum_to_str=True)
