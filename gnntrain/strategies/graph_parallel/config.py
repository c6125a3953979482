"""Config schemas and checks of the graph-parallel family (stored as ``schema/strategy/<name>``
by :func:`gnntrain.config.register_schemas`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from gnntrain.comm.half_precision import HALF_DTYPES
from gnntrain.config.schema import StrategyConfig, check, choices
from gnntrain.errors import ConfigError

HaloDtype = choices("HaloDtype", *HALF_DTYPES)
Smoothing = choices("Smoothing", "none", "f", "g", "gf")
SmoothingStart = choices("SmoothingStart", "zero", "first")


@dataclass
class GraphParallelConfig(StrategyConfig):
    """Graph parallelism (``vanilla``); every graph-parallel strategy's schema extends it."""

    halo_dtype: Optional[HaloDtype] = None
    """Format of the training halo rows on the wire, both directions: null (train.dtype), bfloat16 or float16."""


def halo_wire(strategy: dict) -> torch.dtype | None:
    """The 16-bit dtype ``strategy.halo_dtype`` sends training halo rows in; None for train.dtype."""
    name = strategy["halo_dtype"]
    return None if name is None else HALF_DTYPES[str(name)]


@dataclass
class PipeGCNConfig(GraphParallelConfig):
    """PipeGCN: halo exchanges one epoch stale, overlapped with compute."""

    smooth: Smoothing = Smoothing.none
    """Smooth the stale boundary features (f), gradients (g), both (gf) or none."""
    gamma: float = 0.95
    """Weight of the smoothing's moving average."""
    smooth_start: SmoothingStart = SmoothingStart.zero
    """Where the moving average starts: zero (the authors' helper/feature_buffer.py) or the first value received."""
    track_staleness_error: bool = False
    """Log the per-layer error of the stale values against fresh ones (costs an extra exchange)."""
    bits: int = 32
    """Width of the stale halo messages: 32 (unquantized) or 2/4/8 (AdaQP's codec)."""
    seed: int = 0
    """Seed of the quantization's stochastic rounding."""


@dataclass
class SamplingConfig(GraphParallelConfig):
    """BNS-GCN (``bns``) and its edge-sampling baselines (``bes``, ``dropedge``)."""

    p: float = 0.1
    """Keep each boundary node with this probability (the baselines drop as many edges as that drops)."""
    seed: int = 0
    """Seed of the per-epoch samples."""


BitAssignment = choices("BitAssignment", "adaptive", "uniform", "fixed")


@dataclass
class AdaQPConfig(GraphParallelConfig):
    """AdaQP: quantized halo messages with adaptively assigned bit-widths."""

    assign: BitAssignment = BitAssignment.adaptive
    """How the per-message bit-widths are picked: adaptive (the variance-time MILP), uniform (random over 2, 4, 8) or fixed."""
    bits: int = 8
    """The width under assign=fixed: 2, 4, 8 or 32 (unquantized)."""
    period: int = 50
    """Epochs between adaptive re-assignments."""
    group_size: int = 100
    """Messages per group that share one bit-width in the assignment."""
    lambda_: float = 0.5
    """Weight of the variance term against the time term in the assignment's objective (Eq. 12)."""
    normalize: bool = False
    """Divide the objective's two terms by their worst cases (false: the paper's raw terms, variance and seconds)."""
    assign_gap: float = 0.01
    """Largest relative gap to the MILP optimum an assignment may have (0 solves it exactly by branch and bound)."""
    solve_time_limit: float = 10.0
    """Seconds of branch and bound per problem; then the best plan found (at worst the rounded relaxation)."""
    overlap: bool = False
    """Compute the central nodes while the marginal nodes' halo rows are in flight."""
    seed: int = 0
    """Seed of the stochastic rounding and the uniform assignment."""


SCHEMAS = {"vanilla": GraphParallelConfig, "pipegcn": PipeGCNConfig, "sampling": SamplingConfig, "adaqp": AdaQPConfig}


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
