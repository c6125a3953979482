"""A method's epoch on a described cluster, predicted without training.

Four parts, each where its knowledge lives:

* the partition's shape (:mod:`gnntrain.cost.shape`): METIS on the real graph, or a scaled
  proxy of a graph too big for this machine;
* the method's epoch, written as a trace by its registration's timeline (:attr:`Method.timing_model
  <gnntrain.strategies.registry.Method.timing_model>`): what each rank computes and which bytes it
  posts and waits for; its traffic is what it posts;
* compute from the model's kernel counts priced by a device profile (:mod:`gnntrain.cost.compute`);
* the network model of the virtual clock, through replay (:mod:`gnntrain.timing.builder`).

:func:`written` writes :data:`EPOCHS` epochs; :func:`replayed` replays them under the network and
reports the steady ones (all but the first, where a method's first epoch differs: PipeGCN's waits
on nothing) as the virtual clock would record them: the epoch (the slowest rank's), compute and, per traffic
kind, the exposed and hidden communication (means over the ranks) and the bytes per epoch (summed
over the ranks, as ``comm_bytes_by_kind``). Peak memory per rank comes from the memory estimate
(:mod:`gnntrain.cost.memory`) on what each rank holds: its part for the graph-parallel family (with
its method's :attr:`~gnntrain.strategies.registry.Method.memory`); for the mini-batch family the
whole graph's topology, its share of the features and the activations of a sample of its share
of a batch at full fan-out (``batch / W x prod(fanout + 1)`` rows, at most the graph); the whole
graph for the others (a data-parallel replica, a pipeline stage's tables).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gnntrain.timing.kinds import TRAINING_CATEGORIES, category
from gnntrain.config.schema import RootConfig
from gnntrain.errors import ConfigError
from gnntrain.cost.memory import DTYPE_BYTES, RUNTIME_MB, estimate_rank, estimate_ranks
from gnntrain.cost.compute import Costs
from gnntrain.cost.shape import PartitionShape
from gnntrain.timing.builder import Timeline
from gnntrain.config.references import resolve
from gnntrain.strategies import method
from gnntrain.strategies.minibatch.common import fanouts
from gnntrain.timing.links import Topology

EPOCHS = 3
"""Epochs written per prediction; the first is left out of the figures."""


@dataclass
class Prediction:
    """One method's predicted steady epoch (module docstring), seconds and bytes."""

    strategy: str
    epoch_time: float
    compute_time: float
    exposed_by_kind: dict[str, float]
    hidden_by_kind: dict[str, float]
    bytes_by_kind: dict[str, float]
    per_rank_bytes: list[dict[str, float]]
    per_rank_epoch: list[float]
    peak_mb: list[float] = field(default_factory=list)

    @property
    def exposed_time(self) -> float:
        return sum(self.exposed_by_kind.values())

    @property
    def comm_bytes(self) -> float:
        return sum(v for k, v in self.bytes_by_kind.items() if category(k) in TRAINING_CATEGORIES)

    def to_dict(self) -> dict:
        return {"strategy": self.strategy, "epoch_time": self.epoch_time, "compute_time": self.compute_time,
                "exposed_time": self.exposed_time, "exposed_by_kind": self.exposed_by_kind,
                "hidden_by_kind": self.hidden_by_kind, "bytes_by_kind": self.bytes_by_kind,
                "comm_bytes": self.comm_bytes, "per_rank_bytes": self.per_rank_bytes,
                "per_rank_epoch": self.per_rank_epoch, "peak_mb": self.peak_mb}


def written(run: RootConfig, shape: PartitionShape, costs: Costs, epochs: int = EPOCHS) -> Timeline:
    """``epochs`` epochs of the run's method on every rank, written on a timeline."""
    declared = method(run.strategy.name)
    if declared.timing_model is None:
        raise ConfigError(f"strategy {run.strategy.name} declares no timeline (Method.timing_model), so the predictor "
                          "cannot predict it")
    timeline = resolve(declared.timing_model)
    line, state = Timeline(run.cluster.world_size), {}
    for epoch in range(1, epochs + 1):
        line.start_epoch(epoch)
        timeline(run.strategy, shape, costs, line, epoch, state)
        line.end_epoch(epoch)
    return line


def replayed(strategy: str, line: Timeline, topology: Topology, peak: list[float] | None = None) -> Prediction:
    """The steady epochs of a written timeline under ``topology``."""
    epochs = line.replayed(topology)[1:]
    world, times = len(line.ranks), line.repeats

    def mean(figure) -> float:
        return times * sum(figure(e) for e in epochs) / len(epochs)

    kinds = sorted({k for e in epochs for r in e.ranks for k in (*r.exposed_by_kind, *r.hidden_by_kind)})
    per_rank_bytes = [{k: times * sum(rank.sent.get(e.epoch, {}).get(k, 0.0) for e in epochs) / len(epochs)
                       for k in sorted({k for e in epochs for k in rank.sent.get(e.epoch, {})})}
                      for rank in line.ranks]
    return Prediction(
        strategy=strategy, epoch_time=mean(lambda e: e.epoch_time), compute_time=mean(lambda e: e.mean_compute),
        exposed_by_kind={k: mean(lambda e, k=k: sum(r.exposed_by_kind.get(k, 0.0) for r in e.ranks) / world)
                         for k in kinds},
        hidden_by_kind={k: mean(lambda e, k=k: sum(r.hidden_by_kind.get(k, 0.0) for r in e.ranks) / world)
                        for k in kinds},
        bytes_by_kind={k: sum(b.get(k, 0.0) for b in per_rank_bytes) for k in sorted({k for b in per_rank_bytes for k in b})},
        per_rank_bytes=per_rank_bytes,
        per_rank_epoch=[mean(lambda e, r=r: e.ranks[r].end - e.ranks[r].start) for r in range(world)],
        peak_mb=peak or [])


def peak_mb(run: RootConfig, shape: PartitionShape) -> list[float]:
    """Each rank's estimated peak (module docstring), MiB."""
    facts = shape.facts()
    if method(run.strategy.name).family.name == "graph_parallel":
        return [e.total_mb for e in estimate_ranks(run, facts, shape.stats(), method(run.strategy.name).memory)]
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
