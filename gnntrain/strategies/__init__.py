"""The strategies, grouped in families of parallelism that are siblings:

* :mod:`~gnntrain.strategies.graph_parallel` — every rank owns one graph partition and the
  whole model; the methods differ in how a layer obtains its halo rows (``vanilla``,
  ``pipegcn``, ``bns``/``bes``/``dropedge``, ``adaqp``);
* :mod:`~gnntrain.strategies.data_parallel` — replicas of the model over the whole graph (or
  over graph-parallel groups), each training on its share of the training nodes;
* :mod:`~gnntrain.strategies.gnnpipe` — pipeline parallelism: every rank owns a slice of the
  model's layers over the whole graph (or, hybrid, over its group's part of it), the graph cut
  into chunks that flow through the stages;
* :mod:`~gnntrain.strategies.minibatch` — neighbour-sampled mini-batches over features
  partitioned across ranks, the features moving to the models (``minibatch``, ``lo``) or the
  models to the features (``hopgnn``).

A family module exposes ``STRATEGIES`` (strategy name -> class implementing
:class:`~gnntrain.strategies.base.Strategy`), ``SCHEMAS`` (config schemas, stored as
``schema/strategy/<name>``), ``BASELINE`` (the strategy that network calibration probes for
its members) and ``validate(strategy_cfg)``. A new family is one line below.
"""

from __future__ import annotations

from types import ModuleType

from gnntrain.errors import ConfigError
from gnntrain.strategies import data_parallel, gnnpipe, graph_parallel, minibatch
from gnntrain.strategies.base import Strategy

FAMILIES: tuple[ModuleType, ...] = (graph_parallel, data_parallel, gnnpipe, minibatch)
STRATEGIES: dict[str, type[Strategy]] = {name: cls for family in FAMILIES for name, cls in family.STRATEGIES.items()}


def family_of(name: str) -> ModuleType:
    """The family module that implements strategy ``name``."""
    for family in FAMILIES:
        if name in family.STRATEGIES:
            return family
    raise ConfigError(f"unknown strategy.name '{name}'; valid: {', '.join(sorted(STRATEGIES))}")


def strategy_class(name: str) -> type[Strategy]:
    return family_of(name).STRATEGIES[name]


def loads_parts(name: str) -> bool:
    """Whether strategy ``name``'s ranks need only their own part of the graph (a class
    attribute ``loads_parts = True``), so that they can load it from a partitioned dataset
    (:mod:`gnntrain.data.parted`) and never hold the whole graph."""
    return bool(getattr(strategy_class(name), "loads_parts", False))


def baseline_of(name: str) -> str:
    """The baseline of strategy ``name``'s family (``BASELINE``)."""
    return family_of(name).BASELINE


def schema_of(name: str) -> type:
    """The config schema of strategy ``name`` (the plain strategy schema where it has no options)."""
    from gnntrain.config.schema import StrategyConfig

    return family_of(name).SCHEMAS.get(name, StrategyConfig)
