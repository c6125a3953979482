"""The graph-parallel family's config: the schema every method's extends (``vanilla``'s), the
family's checks and the wire format of 16-bit halos."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from gnntrain.comm.half_precision import HALF_DTYPES
from gnntrain.config.schema import StrategyConfig, check, choices
from gnntrain.errors import ConfigError

HaloDtype = choices("HaloDtype", *HALF_DTYPES)


@dataclass
class GraphParallelConfig(StrategyConfig):
    """Graph parallelism (``vanilla``); every graph-parallel strategy's schema extends it."""

    halo_dtype: Optional[HaloDtype] = None
    """Format of the training halo rows on the wire, both directions: null (train.dtype), bfloat16 or float16."""


def halo_wire(strategy: dict) -> torch.dtype | None:
    """The 16-bit dtype ``strategy.halo_dtype`` sends training halo rows in; None for train.dtype."""
    name = strategy["halo_dtype"]
    return None if name is None else HALF_DTYPES[str(name)]


def validate(strategy: dict) -> None:
    """The family's range checks (the schemas give the types)."""
    quantized = strategy.get("assign", "fixed") != "fixed" or strategy.get("bits", 32) != 32
    if strategy["halo_dtype"] is not None and quantized:
        raise ConfigError(f"strategy.halo_dtype={strategy['halo_dtype']} with quantized halos (strategy.assign="
                          f"{strategy.get('assign', 'fixed')}, strategy.bits={strategy.get('bits', 32)}) is "
                          "ambiguous; valid: halo_dtype=null, or assign=fixed with bits=32")
    if "gamma" in strategy:
        check("strategy.gamma", strategy["gamma"], 0.0 <= strategy["gamma"] < 1.0, "in [0, 1)")
    if "p" in strategy:
        check("strategy.p", strategy["p"], 0.0 <= strategy["p"] <= 1.0, "in [0, 1]")
    if "bits" in strategy:
        check("strategy.bits", strategy["bits"], strategy["bits"] in (2, 4, 8, 32), "one of 2, 4, 8, 32")
    for key in ("period", "group_size"):
        if key in strategy:
            check(f"strategy.{key}", strategy[key], strategy[key] >= 1, ">= 1")
    if "lambda_" in strategy:
        check("strategy.lambda_", strategy["lambda_"], 0.0 <= strategy["lambda_"] <= 1.0, "in [0, 1]")
    if "solve_time_limit" in strategy:
        check("strategy.solve_time_limit", strategy["solve_time_limit"], strategy["solve_time_limit"] > 0, "> 0")
    if "assign_gap" in strategy:
        check("strategy.assign_gap", strategy["assign_gap"], 0.0 <= strategy["assign_gap"] < 1.0, "in [0, 1)")
