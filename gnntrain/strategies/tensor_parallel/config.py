"""The tensor-parallel family's declaration: its config, the family and its one method
(implemented in :mod:`.neutrontp`, imported when a job builds it; nothing here imports torch)."""

from __future__ import annotations

from dataclasses import dataclass

from gnntrain.config.schema import StrategyConfig
from gnntrain.cost.rank_shape import RankShape
from gnntrain.strategies.registry import Family, Method, register

PACKAGE = "gnntrain.strategies.tensor_parallel"

TRANSPOSE_KINDS = {"transpose_fwd": "data", "transpose_bwd": "data"}
"""The all-to-all transposes between the vertex split and the feature split, each direction."""


@dataclass
class NeutronTPConfig(StrategyConfig):
    """NeutronTP: the features split by columns for aggregation, the vertices by rows for the dense maps."""


def transpose_buffers(config: NeutronTPConfig, shape: RankShape) -> float:
    """What a NeutronTP rank keeps beyond the rows it computes on (:attr:`Method.memory`), at
    the widest layer: one transpose's send and receive buffers (``I d`` values each for the
    rank's ``I`` rows) and the column slice it aggregates and its product (``N d / W = I d``
    values each for near-equal blocks), ``4 I d`` values in all. The whole graph's topology and
    features that every rank holds are the family's baseline: whole-graph strategies make no
    estimate before training (:mod:`gnntrain.cost.memory`)."""
    return 4 * shape.inner * max(shape.widths) * shape.value_bytes


FAMILY = Family("tensor_parallel", baseline="vanilla", module=f"{PACKAGE}.neutrontp")
"""Tensor parallelism; the baseline network calibration probes is graph parallelism, which the paper compares against."""
register(Method("neutrontp", FAMILY, f"{PACKAGE}.neutrontp:NeutronTP", NeutronTPConfig, kinds=TRANSPOSE_KINDS,
                memory=transpose_buffers, timing_model=f"{PACKAGE}.timing_model:transposed"))
