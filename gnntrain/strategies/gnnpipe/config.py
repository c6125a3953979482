"""GNNPipe's declaration: its config, its checks, the family and its one method (implemented in
:mod:`.pipeline`, imported when a job builds it; nothing here imports torch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gnntrain.config.schema import RUN_SEED, StrategyConfig, check
from gnntrain.strategies.registry import Family, Method, register

PACKAGE = "gnntrain.strategies.gnnpipe"


@dataclass
class GNNPipeConfig(StrategyConfig):
    """GNNPipe: the layers in pipeline stages, the graph in chunks; the tricks of Sec. 3.2.4."""

    stages: Optional[int] = None
    """Pipeline stages (null: workers / graph_parallel)."""
    chunks: Optional[int] = None
    """Graph chunks streamed through the pipeline (null: 4 x workers, the paper's K = 4M)."""
    graph_parallel: int = 1
    """Ranks per stage, which split its chunks' rows."""
    shuffle: bool = True
    """Shuffle the chunk order every epoch."""
    detach_history: bool = True
    """No gradient into the historical rows of other chunks."""
    fixed_history: bool = True
    """Refresh the history every alpha epochs instead of every epoch."""
    alpha: int = 23
    """Epochs between history refreshes under fixed_history."""
    seed: int = RUN_SEED
    """Seed of the shuffles."""


def validate(config: GNNPipeConfig) -> None:
    for key, value in (("stages", config.stages), ("chunks", config.chunks)):
        if value is not None:
            check(f"strategy.{key}", value, value >= 1, ">= 1 (or null for the default)")
    check("strategy.graph_parallel", config.graph_parallel, config.graph_parallel >= 1, ">= 1")
    check("strategy.alpha", config.alpha, config.alpha >= 1, ">= 1")


FAMILY = Family("gnnpipe", baseline="vanilla", module=f"{PACKAGE}.pipeline")
"""Pipeline parallelism; the baseline network calibration probes is graph parallelism, which the paper's Table 3
compares against."""
register(Method("gnnpipe", FAMILY, f"{PACKAGE}.pipeline:GNNPipe", GNNPipeConfig, validate=validate,
                timing_model=f"{PACKAGE}.timing_model:pipeline"))
