"""Config schemas and checks of the graph-parallel family (stored as ``schema/strategy/<name>``
by :func:`gnntrain.config.register_schemas`)."""

from __future__ import annotations

from dataclasses import dataclass
from gnntrain.config.schema import StrategyConfig, check, choices


Smoothing = choices("Smoothing", "none", "f", "g", "gf")


@dataclass
class PipeGCNConfig(StrategyConfig):
    """PipeGCN: ``smooth`` the stale boundary features (f), gradients (g) or both (gf) with a
    moving average of weight ``gamma``; ``track_staleness_error`` logs the per-layer error of
    the stale values against fresh ones (costs an extra exchange)."""

    smooth: Smoothing = Smoothing.none
    gamma: float = 0.95
    track_staleness_error: bool = False
    bits: int = 32
    """Width of the stale halo messages: 32 (unquantized) or 2/4/8 (AdaQP's codec)."""
    seed: int = 0


@dataclass
class SamplingConfig(StrategyConfig):
    """BNS-GCN (``bns``) and its edge-sampling baselines (``bes``, ``dropedge``): keep each
    boundary node with probability ``p`` (the baselines drop as many edges as that drops);
    ``seed`` drives the per-epoch samples (the run's seed unless set)."""

    p: float = 0.1
    seed: int = 0


BitAssignment = choices("BitAssignment", "adaptive", "uniform", "fixed")


@dataclass
class AdaQPConfig(StrategyConfig):
    """AdaQP: quantized halo messages; ``assign`` picks the per-message bit-widths (``bits``
    for ``fixed``; ``adaptive`` re-solves every ``period`` epochs with weight ``lambda_`` on the
    variance objective and groups of ``group_size`` messages); ``overlap`` computes the central
    nodes while the marginal nodes' halo rows are in flight."""

    assign: BitAssignment = BitAssignment.adaptive
    bits: int = 8
    period: int = 50
    group_size: int = 100
    lambda_: float = 0.5
    overlap: bool = False
    seed: int = 0


SCHEMAS = {"pipegcn": PipeGCNConfig, "sampling": SamplingConfig, "adaqp": AdaQPConfig}


def validate(strategy: dict) -> None:
    """The family's range checks (the schemas give the types)."""
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
