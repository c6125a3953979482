"""The mini-batch family's declarations: its config, HopGNN's, their checks, and the family with
its methods registered. Nothing here imports torch: the implementations are named
(``"module:Class"``) and imported when a job builds them.

* ``minibatch``, ``lo``: :mod:`.data_centric`;
* ``p3``: :mod:`.p3`;
* ``hopgnn``: :mod:`.hopgnn`;
* ``naive``: :mod:`.naive`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from gnntrain.config.schema import RUN_SEED, StrategyConfig, check, workload
from gnntrain.errors import ConfigError
from gnntrain.strategies.registry import Family, Method, register

if TYPE_CHECKING:
    from gnntrain.data.graph_data import GraphFacts

PACKAGE = "gnntrain.strategies.minibatch"


@dataclass
class MiniBatchConfig(StrategyConfig):
    """Sampled mini-batch training (the baselines of HopGNN's paper)."""

    batch_size: int = workload(1024)
    """Training roots per iteration, over all ranks (at most the training nodes)."""
    fanout: Any = workload(10)
    """Neighbours sampled per target: one int for every layer, or a list (input layer first)."""
    seed: int = RUN_SEED
    """Seed of the mini-batches and the sampling."""


def validate(config: MiniBatchConfig) -> None:
    check("strategy.batch_size", config.batch_size, config.batch_size >= 1, ">= 1")


def fits_graph(config: MiniBatchConfig, facts: GraphFacts) -> None:
    """A global batch no larger than the training set: a larger one would make every epoch one
    iteration of all the training nodes, a batch other than the one asked for (and leave HopGNN's
    examination, 3 W iterations, spread over 3 W epochs)."""
    train = facts.num_train
    if config.batch_size > train:
        raise ConfigError(f"strategy.batch_size={config.batch_size} exceeds the {train} training nodes of "
                          f"{facts.name}; valid: 1..{train}")


FAMILY = Family("minibatch", baseline="minibatch", module=PACKAGE, validate=validate, fits_graph=fits_graph)
"""Sampled mini-batch training; the baseline network calibration probes is DGL-style ``minibatch``."""

TIMING_MODELS = f"{PACKAGE}.timing_model"
register(Method("minibatch", FAMILY, f"{PACKAGE}.data_centric:MiniBatch", MiniBatchConfig,
                timing_model=f"{TIMING_MODELS}:data_centric"))
register(Method("lo", FAMILY, f"{PACKAGE}.data_centric:LocalityOptimised", MiniBatchConfig,
                timing_model=f"{TIMING_MODELS}:data_centric"))
register(Method("p3", FAMILY, f"{PACKAGE}.p3:P3", MiniBatchConfig,
                kinds={"p3_partial": "data", "topology": "data", "weight_gather": "sync"}, timing_model=f"{TIMING_MODELS}:p3"))


@dataclass
class HopGNNConfig(MiniBatchConfig):
    """HopGNN: models migrate to the features (Sec. 5)."""

    pregather: bool = True
    """One feature fetch per iteration (Sec. 5.2)."""
    merge: bool = True
    """Micrograph merging with the examination period (Sec. 5.3)."""
    time_steps: Optional[int] = None
    """A fixed number of time steps per iteration (null: one per worker, then the examination if merge)."""


def validate_hopgnn(config: HopGNNConfig) -> None:
    steps = config.time_steps
    if steps is not None:
        check("strategy.time_steps", steps, steps >= 1, ">= 1 (or null: as many as workers)")


register(Method("hopgnn", FAMILY, f"{PACKAGE}.hopgnn:HopGNN", HopGNNConfig, kinds={"merge_time": "control"},
                validate=validate_hopgnn, timing_model=f"{TIMING_MODELS}:hopgnn"))
register(Method("naive", FAMILY, f"{PACKAGE}.naive:Naive", MiniBatchConfig,
                kinds={"naive_partial": "data", "topology": "data"}, timing_model=f"{TIMING_MODELS}:naive"))
