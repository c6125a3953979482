"""What every strategy is to the epoch loop, whatever its family.

A strategy owns its training step. Before the workers start, :meth:`Strategy.layout` says
which process layout (mesh axes) and which data layout (graph partitions) it needs; each
worker then builds the strategy from the run's typed config, its :class:`~gnntrain.parallel.mesh.WorkerContext`
(rank, device, device mesh) and the job's data, and the strategy places its model, builds
its optimizer and runs epochs. The loop (:mod:`gnntrain.engine.loop`) only times epochs,
sums what the ranks report and writes the records.

Contract of the reported figures: ``train_epoch`` returns this rank's share of the epoch's
training loss and ``evaluate`` this rank's share of the (numerator, denominator) counts of
the train, validation and test scores; summed over all ranks they give the global values.
Every rank counts the bytes it sends in ``meter``. A strategy's own figures of an epoch are
taken on each rank without communication (:meth:`Strategy.epoch_tallies`) and combined over
the ranks when the loop next records (:class:`Tallies`, :meth:`Strategy.epoch_metrics`), so
that nothing runs between two epochs.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch

from gnntrain.comm.meter import CommMeter
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.parallel.mesh import Layout, WorkerContext


@dataclass
class Tallies:
    """A strategy's figures of one epoch on one rank, before they are combined over the ranks:
    ``summed`` are added up, ``peak`` take their maximum."""

    summed: dict[str, float] = field(default_factory=dict)
    peak: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def combine(per_rank: list[Tallies]) -> dict[str, float]:
        """Every rank's tallies of one epoch as one figure each (a name is either summed or a peak)."""
        totals: dict[str, float] = {}
        for tallies in per_rank:
            for name, value in tallies.summed.items():
                totals[name] = totals.get(name, 0.0) + value
            for name, value in tallies.peak.items():
                totals[name] = max(totals.get(name, -math.inf), value)
        return totals


class Strategy(ABC):
    """The epoch loop's view of a method (module docstring). A strategy implements its layout,
    its epoch, its evaluation and its checkpointed state; a strategy with no figures of its own
    and nothing in flight after the last epoch keeps the defaults below."""

    meter: CommMeter
    """Every byte this rank sends, by kind."""

    @staticmethod
    @abstractmethod
    def layout(run: RootConfig, world_size: int) -> Layout:
        """The mesh and the number of graph partitions this strategy needs on ``world_size``
        workers; raises ConfigError where it cannot use them."""

    @abstractmethod
    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        """``run``: the run's typed config (:class:`~gnntrain.config.schema.RootConfig`);
        ``run.strategy`` is an instance of the method's registered config dataclass."""

    @abstractmethod
    def train_epoch(self, epoch: int) -> torch.Tensor:
        """Train one epoch (1-based); this rank's share of its loss."""

    @abstractmethod
    def evaluate(self) -> torch.Tensor:
        """This rank's share of ``[correct_train, total_train, correct_val, total_val,
        correct_test, total_test]`` (F1-micro's 2TP and 2TP+FP+FN for multilabel data)."""

    @abstractmethod
    def state_dict(self) -> dict:
        """Everything the next epoch depends on besides the global generators: model,
        optimizer and the method's own state (after the epoch just trained), for checkpoints
        (:mod:`gnntrain.engine.checkpoint`)."""

    @abstractmethod
    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict`'s result (tensors on the CPU)."""

    def epoch_tallies(self) -> Tallies:
        """This rank's strategy-specific tallies of the epoch just trained, taken without
        communication; none by default."""
        return Tallies()

    def epoch_metrics(self, totals: dict[str, float]) -> dict[str, float]:
        """The strategy-specific figures of an epoch from its tallies combined over the ranks
        (:meth:`Tallies.combine`); reads nothing that changes from one epoch to the next. None by
        default."""
        return {}

    def finish(self) -> None:
        """Complete whatever is still in flight after the last epoch; nothing by default."""
