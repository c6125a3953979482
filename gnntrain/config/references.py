"""A class or function that a declaration names without importing it: given directly, or as
``"module:attribute"``, imported on first use. The registries' declarations name the built-in
implementations this way, so that reading what a strategy or model offers (``--help``, the
config store, validation) never imports torch."""

from __future__ import annotations

import importlib
from typing import Any, Union

Reference = Union[type, Any, str]
"""What a declaration names: the object itself, or ``"module:attribute"``."""


def resolve(reference: Reference) -> Any:
    """The object ``reference`` names, its module imported where it is given by name."""
    if not isinstance(reference, str):
        return reference
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def reference_name(reference: Reference) -> str:
    """Where ``reference`` lives, as ``module:attribute``, without importing it."""
    if isinstance(reference, str):
        return reference
    return f"{reference.__module__}:{reference.__qualname__}"
