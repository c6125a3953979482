"""A method's epoch on a described cluster, predicted without training.

Four parts, each where its knowledge lives:

* the partition's shape (:mod:`gnntrain.cost.shape`): METIS on the real graph, or a scaled
  proxy of a graph too big for this machine;
* the method's epoch, written as a trace by its registration's timing model (:attr:`Method.timing_model
  <gnntrain.strategies.registry.Method.timing_model>`): what each rank computes and which bytes it
  posts and waits for; its traffic is what it posts;
* compute from the model's kernel counts priced by a device profile (:mod:`gnntrain.cost.compute`),
  each span repriced by the method's own measured steps where they were profiled
  (:mod:`gnntrain.predict.step_fit`);
* the network model of the virtual clock and its accounting, through replay (:mod:`gnntrain.timing.builder`).

:func:`written` writes :data:`EPOCHS` epochs; :func:`predicted` replays them under the network and
gives the mean of the steady ones (all but the first, where a method's first epoch differs:
PipeGCN's waits on nothing) as the :class:`~gnntrain.timing.epoch.EpochTiming` a live run and a
replay give: the epoch (the slowest rank's), compute and, per category and traffic kind, the
wait, transfer and hidden communication (means over the ranks) and the bytes per epoch (summed
over the ranks, as ``comm_bytes_by_kind``). Peak memory per rank comes from the memory estimate
(:mod:`gnntrain.cost.memory`) on what each rank holds: its part for the graph-parallel family (with
its method's :attr:`~gnntrain.strategies.registry.Method.memory`); for the mini-batch family the
whole graph's topology, its share of the features and the activations of a sample of its share
of a batch at full fan-out (``batch / W x prod(fanout + 1)`` rows, at most the graph); the whole
graph for the others (a data-parallel replica, a pipeline stage's tables).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gnntrain.config.schema import RootConfig
from gnntrain.errors import ConfigError
from gnntrain.cost.memory import DTYPE_BYTES, RUNTIME_MB, estimate_rank, estimate_ranks
from gnntrain.cost.compute import Costs
from gnntrain.cost.shape import PartitionShape
from gnntrain.predict.step_fit import StepFit
from gnntrain.timing.builder import TraceBuilder
from gnntrain.timing.epoch import EpochTiming
from gnntrain.config.references import resolve
from gnntrain.strategies import method
from gnntrain.strategies.minibatch.common import fanouts
from gnntrain.timing.cluster import Topology

EPOCHS = 3
"""Epochs written per prediction; the first is left out of the figures."""


def written(run: RootConfig, shape: PartitionShape, costs: Costs, epochs: int = EPOCHS,
            step_fit: StepFit | None = None, on_epoch: Callable[[], None] = lambda: None) -> TraceBuilder:
    """``epochs`` epochs of the run's method on every rank, written as a trace; each compute span
    at its counted seconds, or priced by ``step_fit`` (the method's measured steps). ``on_epoch``
    is called as each epoch is written (a progress display)."""
    declared = method(run.strategy.name)
    if declared.timing_model is None:
        raise ConfigError(f"strategy {run.strategy.name} declares no timing model (Method.timing_model), so the "
                          "predictor cannot predict it")
    timing_model = resolve(declared.timing_model)
    line, state = TraceBuilder(run.cluster.world_size, step_fit.price if step_fit else float), {}
    for epoch in range(1, epochs + 1):
        line.start_epoch()
        timing_model(run.strategy, shape, costs, line, epoch, state)
        line.end_epoch(epoch)
        on_epoch()
    return line


def predicted(line: TraceBuilder, topology: Topology,
              progress: Callable[[int], None] = lambda events: None) -> EpochTiming:
    """The mean steady epoch of a written trace under ``topology`` (clock ``predicted``): its
    epochs but the first, each standing for :attr:`TraceBuilder.repeats` times what was written;
    ``progress`` is told the events replayed as they are."""
    return EpochTiming.mean(line.replayed(topology, progress)[1:]).scaled(line.repeats)


def rank_stats(run: RootConfig, shape: PartitionShape) -> dict:
    """What each rank of a graph-parallel method holds: its part's counts, or where the method has
    a strategy class of its own (``Method.runs``: ``granndis``'s preloaded servers) that class's
    :meth:`rank_stats` on the counted graph, rows scaled by the proxy's node ratio and edges by its
    edge ratio."""
    declared = method(run.strategy.name)
    if declared.runs is None or shape.data is None:
        return shape.stats()
    from gnntrain.data.job import JobData

    counted = declared.strategy.rank_stats(run, JobData(shape.data.facts(), {"parts": shape.parts}, False,
                                                        data=shape.data, part=shape.part))
    edge_ratio = shape.edges / shape.data.num_edges
    return {**{key: [round(n * shape.scale) for n in counted[key]] for key in ("inner_nodes", "boundary_nodes",
                                                                               "sent_rows")},
            "inner_edges": [round(n * edge_ratio) for n in counted["inner_edges"]]}


def peak_mb(run: RootConfig, shape: PartitionShape) -> list[float]:
    """Each rank's estimated peak (module docstring), MiB."""
    facts = shape.facts()
    if method(run.strategy.name).family.name == "graph_parallel":
        return [e.total_mb for e in estimate_ranks(run, facts, rank_stats(run, shape), method(run.strategy.name).memory)]
    world, dtype = run.cluster.world_size, str(run.train.dtype)
    if method(run.strategy.name).family.name == "minibatch":
        rows = run.strategy.batch_size / world
        for fanout in fanouts(run):
            rows *= fanout + 1
        sampled = estimate_rank(run.model, None, dtype, facts, min(rows, shape.nodes), 0, 0, shape.edges,
                                RUNTIME_MB["forked"])
        own = shape.nodes / world * shape.features * DTYPE_BYTES[dtype] / 2**20
        return [replace(sampled, features_mb=own).total_mb] * world
    whole = estimate_rank(run.model, None, dtype, facts, shape.nodes, 0, 0, shape.edges, RUNTIME_MB["forked"])
    return [whole.total_mb] * world
