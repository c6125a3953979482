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
  models to the features (``hopgnn``);
* :mod:`~gnntrain.strategies.tensor_parallel` — every rank holds the whole graph and aggregates
  on a slice of the feature columns, the dense maps on a block of vertices (``neutrontp``).

Every family declares itself and its methods in its ``config`` module
(:mod:`~gnntrain.strategies.registry`), which imports no torch and names the classes that
implement them; importing this package registers the built-in methods and imports the plugins
``GNNTRAIN_PLUGINS`` names, and a method's class is imported when a job builds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnntrain.strategies import data_parallel, gnnpipe, graph_parallel, minibatch, tensor_parallel
from gnntrain.strategies.registry import METHODS, Family, Method, load_plugins, method

if TYPE_CHECKING:
    from gnntrain.strategies.base import Strategy

load_plugins()

FAMILIES: tuple[Family, ...] = (graph_parallel.FAMILY, data_parallel.FAMILY, gnnpipe.FAMILY, minibatch.FAMILY,
                                tensor_parallel.FAMILY)
"""The built-in families, in the order the docs list them."""

__all__ = ["FAMILIES", "METHODS", "Family", "Method", "baseline_of", "families", "loads_parts", "method",
           "schema_of", "strategy_class"]


def families() -> list[Family]:
    """Every family with a registered method: the built-in ones, then the plugins'."""
    found = list(FAMILIES)
    for registered in METHODS.values():
        if registered.family not in found:
            found.append(registered.family)
    return found


def strategy_class(name: str) -> type[Strategy]:
    """The class every rank builds for strategy ``name``."""
    return method(name).strategy


def loads_parts(name: str) -> bool:
    """Whether strategy ``name``'s ranks need only their own part of the graph (a class
    attribute ``loads_parts = True``), so that they can load it from a partitioned dataset
    (:mod:`gnntrain.data.parted`) and never hold the whole graph."""
    return bool(getattr(strategy_class(name), "loads_parts", False))


def baseline_of(name: str) -> str:
    """The baseline of strategy ``name``'s family, which network calibration probes."""
    return method(name).family.baseline


def schema_of(name: str) -> type:
    """The config schema of strategy ``name``."""
    return method(name).config
