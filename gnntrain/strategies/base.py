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
Every rank counts the bytes it sends in ``meter``.
"""

from __future__ import annotations

from typing import Protocol

import torch

from gnntrain.comm.meter import CommMeter
from gnntrain.config.schema import RootConfig
from gnntrain.data import JobData
from gnntrain.parallel.mesh import Layout, WorkerContext


class Strategy(Protocol):
    meter: CommMeter

    @staticmethod
    def layout(run: RootConfig, world_size: int) -> Layout:
        """The mesh and the number of graph partitions this strategy needs on ``world_size``
        workers; raises ConfigError where it cannot use them."""
        ...

    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        """``run``: the run's typed config (:class:`~gnntrain.config.schema.RootConfig`);
        ``run.strategy`` is an instance of the method's registered config dataclass."""
        ...

    def train_epoch(self, epoch: int) -> torch.Tensor:
        """Train one epoch (1-based); this rank's share of its loss."""
        ...

    def evaluate(self) -> torch.Tensor:
        """This rank's share of ``[correct_train, total_train, correct_val, total_val,
        correct_test, total_test]`` (F1-micro's 2TP and 2TP+FP+FN for multilabel data)."""
        ...

    def epoch_metrics(self) -> dict[str, float]:
        """Strategy-specific figures of the epoch just trained, the same on every rank (every
        rank calls it)."""
        ...

    def finish(self) -> None:
        """Complete whatever is still in flight after the last epoch."""
        ...

    def state_dict(self) -> dict:
        """Everything the next epoch depends on besides the global generators: model,
        optimizer and the method's own state (after the epoch just trained), for checkpoints
        (:mod:`gnntrain.engine.checkpoint`)."""
        ...

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict`'s result (tensors on the CPU)."""
        ...
