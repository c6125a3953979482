"""A small JSON file that may come from someone else (a cached or given profile), read only
where it is what it claims: a regular file, not a link, under a size bound, holding an object
of the expected version and keys, whose numbers under the keys that hold measurements are finite
and not negative. Anything else is a
one-line :class:`~gnntrain.errors.ConfigError` naming the file and what is wrong; nothing in it
runs (JSON builds only plain data)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from gnntrain.errors import ConfigError
from gnntrain.storage.files import open_regular

MAX_BYTES = 1 << 20


def read_checked(path: Path, what: str, version: int, keys: set[str], measured: set[str],
                 limit: int = MAX_BYTES) -> dict:
    """``path``'s object (module docstring): ``version`` under ``"version"``, at least ``keys``;
    every number under the ``measured`` keys finite and >= 0."""
    try:
        opened = open_regular(path, follow_links=False)
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot be read ({exc.strerror}); valid: a regular file, not a link") from None
    except ValueError:
        raise ConfigError(f"{what} {path}: not a regular file; valid: a regular file") from None
    with opened as fh:
        info = os.fstat(fh.fileno())
        if info.st_size > limit:
            raise ConfigError(f"{what} {path}: {info.st_size} bytes; valid: at most {limit}")
        raw = fh.read(limit + 1)
    try:
        fields = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{what} {path}: not JSON ({exc}); delete it to measure it again") from None
    if not isinstance(fields, dict) or fields.get("version") != version:
        found = fields.get("version") if isinstance(fields, dict) else type(fields).__name__
        raise ConfigError(f"{what} {path}: version {found!r}; valid: {version} (delete it to measure it again)")
    missing = keys - fields.keys()
    if missing:
        raise ConfigError(f"{what} {path}: no {', '.join(sorted(missing))}; valid: a file with {', '.join(sorted(keys))}")
    bad = [f"{key}={value!r}" for key, value in _numbers({k: fields[k] for k in measured}) if not (math.isfinite(value) and value >= 0)]
    if bad:
        raise ConfigError(f"{what} {path}: {bad[0]}; valid: finite numbers >= 0")
    return fields


def _numbers(value: Any, key: str = "") -> list[tuple[str, float]]:
    """Every number in ``value`` with the key it sits under (booleans are not numbers here)."""
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, float)):
        return [(key, float(value))]
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _numbers(v, str(k))]
    if isinstance(value, list):
        return [pair for v in value for pair in _numbers(v, key)]
    return []
