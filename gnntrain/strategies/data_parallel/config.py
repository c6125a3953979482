"""The data-parallel family's declaration: its config, its check, the family and its one method
(implemented in :mod:`.replicas`, imported when a job builds it; nothing here imports torch)."""

from __future__ import annotations

from dataclasses import dataclass

from gnntrain.config.schema import StrategyConfig, check
from gnntrain.strategies.registry import Family, Method, register

PACKAGE = "gnntrain.strategies.data_parallel"


@dataclass
class DataParallelConfig(StrategyConfig):
    graph_parallel: int = 1
    """Ranks per model replica, which split the graph between them (1: every rank holds the whole graph)."""


def validate(config: DataParallelConfig) -> None:
    check("strategy.graph_parallel", config.graph_parallel, config.graph_parallel >= 1, ">= 1")


FAMILY = Family("data_parallel", baseline="vanilla", module=f"{PACKAGE}.replicas")
"""Data parallelism; the baseline network calibration probes is graph parallelism, the full-graph family's."""
register(Method("data_parallel", FAMILY, f"{PACKAGE}.replicas:DataParallel", DataParallelConfig, validate=validate,
                timing_model=f"{PACKAGE}.timing_model:replicas"))
