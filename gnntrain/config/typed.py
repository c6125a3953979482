"""The run's config as typed sections, at the strategy and model boundaries.

The job handles its config as plain data (what Hydra composed, resolved, JSON-ready): the
launcher, the data, calibration, checkpoints and the records read and write it so. A strategy
and a model see it typed: :func:`run_config` gives the root schema's dataclass
(:class:`~gnntrain.config.schema.RootConfig`) whose sections are instances of their schemas,
the strategy's and the model's those they registered (``run.strategy.chunks``,
``run.model.hidden``, ``run.train.dtype``), so a misspelt key fails where it is written and an
editor knows every key.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gnntrain.config.schema import DatasetConfig, RootConfig, SyntheticConfig, typed


def dataset_config(section: Any) -> DatasetConfig:
    """A dataset section as the schema its keys belong to (the synthetic generator's, or the plain one)."""
    if isinstance(section, DatasetConfig):
        return section
    plain = {f.name for f in dataclasses.fields(DatasetConfig)}
    return typed(DatasetConfig if set(section) <= plain else SyntheticConfig, section)


def run_config(cfg: dict | RootConfig) -> RootConfig:
    """The plain run config ``cfg`` with every section typed."""
    if isinstance(cfg, RootConfig):
        return cfg
    from gnntrain.models.registry import model_config
    from gnntrain.strategies.registry import strategy_config

    by_option = {"dataset": dataset_config, "model": model_config, "strategy": strategy_config}
    sections = {}
    for field in dataclasses.fields(RootConfig):
        value, schema = cfg[field.name], field.metadata.get("schema")
        if field.name in by_option:
            value = by_option[field.name](value)
        elif schema is not None:
            value = typed(schema, value)
        sections[field.name] = value
    return RootConfig(**sections)
