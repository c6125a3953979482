"""The graph-parallel family's config: the schema every method's extends, the one with 16-bit
halos that ``vanilla`` and the built-in methods extend, the checks the quantizing methods
share and the wire format of 16-bit halos."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from gnntrain.comm.half_precision import HALF_DTYPES
from gnntrain.config.schema import StrategyConfig, check, choices
from gnntrain.errors import ConfigError

HaloDtype = choices("HaloDtype", *HALF_DTYPES, module=__name__)


@dataclass
class GraphParallelConfig(StrategyConfig):
    """Graph parallelism: every graph-parallel method's schema extends it (directly where the
    method sends its training halos its own way, as a compression plugin does)."""


@dataclass
class HalfHalosConfig(GraphParallelConfig):
    """Graph parallelism whose training halos go through the family's halo exchanges
    (:class:`~gnntrain.parallel.halo.HaloExchange` built with :func:`halo_wire`), so that
    ``strategy.halo_dtype`` sets their format: ``vanilla``'s, and the schema every built-in
    graph-parallel method extends. A method that sends its training halos otherwise extends
    :class:`GraphParallelConfig`, so that the key is neither offered (``--help``) nor accepted."""

    halo_dtype: Optional[HaloDtype] = None
    """Format of the training halo rows on the wire, both directions: null (train.dtype), bfloat16 or float16."""


def halo_wire(config: GraphParallelConfig) -> torch.dtype | None:
    """The 16-bit dtype ``strategy.halo_dtype`` sends training halo rows in; None for train.dtype
    and for a method without the key."""
    if not isinstance(config, HalfHalosConfig) or config.halo_dtype is None:
        return None
    return HALF_DTYPES[str(config.halo_dtype)]


QUANTIZED_WIDTHS = (2, 4, 8, 32)
"""The halo message widths a quantizing method may send (32: unquantized)."""


def check_bits(bits: int) -> None:
    """``strategy.bits`` is a width AdaQP's codec sends (:data:`QUANTIZED_WIDTHS`)."""
    check("strategy.bits", bits, bits in QUANTIZED_WIDTHS, "one of 2, 4, 8, 32")


def check_one_halo_format(config: HalfHalosConfig, assign: str, bits: int) -> None:
    """16-bit halos and quantized ones exclude each other: a method that quantizes its halos
    (``assign`` other than fixed, or ``bits`` below 32) refuses ``strategy.halo_dtype``."""
    if halo_wire(config) is not None and (assign != "fixed" or bits != 32):
        raise ConfigError(f"strategy.halo_dtype={config.halo_dtype} with quantized halos (strategy.assign={assign}, "
                          f"strategy.bits={bits}) is ambiguous; valid: halo_dtype=null, or assign=fixed with bits=32")
