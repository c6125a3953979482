"""The lists of config keys that play a part beyond their value, read from the root schemas'
field metadata (:data:`~gnntrain.config.schema.ROLE`), so a key added to one of them with its part
is in every list that needs it:

* :data:`~gnntrain.config.schema.PLACE` and :data:`~gnntrain.config.schema.CONDUCT` keys may
  change on resume (:mod:`gnntrain.engine.checkpoint`); place keys never tell runs apart in a
  table (:mod:`gnntrain.report`); neither kind is part of a dataset's cache key
  (:func:`gnntrain.data.job.dataset_key`);
* :data:`~gnntrain.config.schema.WORKLOAD` keys are the setting network calibration measures and
  caches per (:mod:`gnntrain.job.calibration`).

A root section whose field plays a part passes it to every key in it. The walk reads the base
schema of each section (:func:`~gnntrain.config.schema.section`), not the schemas of a group's
options: a model's or a strategy's own keys play a part only through their whole section (the
model's are workload) or where their reader looks at the field itself (calibration reads a
strategy's workload options from its dataclass). Keys are dotted (``train.epochs``), a whole
section is its name (``wandb``); :func:`plays` tells whether a flattened key is one of them or
lies under one.
"""

from __future__ import annotations

import dataclasses

from gnntrain.config.schema import CONDUCT, PLACE, ROLE, WORKLOAD, RootConfig

PARTS = (PLACE, CONDUCT, WORKLOAD)


def keys_playing(*parts: str, root: type = RootConfig) -> tuple[str, ...]:
    """The dotted keys of ``root`` (and whole sections) that play one of ``parts``."""
    keys = []
    for field in dataclasses.fields(root):
        schema = field.metadata.get("schema")
        if field.metadata.get(ROLE) in parts:
            keys.append(field.name)
        elif schema is not None:
            keys.extend(f"{field.name}.{key}" for key in keys_playing(*parts, root=schema))
    return tuple(keys)


def plays(key: str, keys: tuple[str, ...]) -> bool:
    """Whether the flattened ``key`` is one of ``keys`` or lies under one (``wandb`` holds
    ``wandb.mode``); ``partition.dir`` does not hold ``partition.dirs``."""
    return any(key == k or key.startswith(k + ".") for k in keys)


def part_of(key: str) -> str | None:
    """The part the root config's dotted ``key`` plays, None where it plays none."""
    return next((part for part in PARTS if plays(key, keys_playing(part))), None)


def section_keys_playing(section: str, *parts: str) -> tuple[str, ...]:
    """The keys of root section ``section`` that play one of ``parts``, without the section's name."""
    prefix = f"{section}."
    return tuple(key[len(prefix):] for key in keys_playing(*parts) if key.startswith(prefix))


def setting(flat: dict) -> dict:
    """The workload keys of a flattened config (``section.key`` -> value), place keys left out:
    what shapes the work of an epoch, whoever runs it."""
    workload, places = keys_playing(WORKLOAD), keys_playing(PLACE)
    return {key: value for key, value in flat.items() if plays(key, workload) and not plays(key, places)}
