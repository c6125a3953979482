"""The best epoch and stopping on it: ``train.monitor`` (which epoch is best),
``train.patience`` (early stopping) and ``train.target`` (stop when reached), and the time a run
took to reach a score (``gnntrain-report --target``).

After every evaluated epoch the monitor decides whether the epoch is the best so far and whether
it resets the patience:

* ``score`` (default): the first epoch of the best validation score is the best, and the only
  epochs that reset the patience are those that raise the score;
* ``loss``: the same with the lowest validation loss (the GCNII authors' code: stopping and
  selecting on the validation loss);
* ``score_or_loss``: the GAT authors' code: an epoch whose score is at least the highest so far
  or whose loss is at most the lowest resets the patience, and the best is the last epoch at
  which both held.

A run reports the test score at its best epoch, stopped or not, so a stopped run and one that
ran out its epochs report alike. ``patience``: the run stops when the last epoch that reset the
patience is ``patience`` or more epochs old. ``target``: the run stops at the first epoch whose
validation score is ``>= target``, whatever the monitor.

Time to a score is training time: the sum of the epochs' ``epoch_time`` (under a modelled link
the virtual clock's time) up to and including the epoch,
evaluation left out. Every rank holds the same reduced record, so all ranks stop after the
same epoch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, Optional

from gnntrain.engine.metrics import EpochRecord


@dataclass
class Stop:
    """Why and when a run stopped early (``summary.json``'s ``early_stop``)."""

    rule: str
    """What fired: ``patience`` or ``target``."""
    threshold: float
    """The rule's setting: the patience in epochs, or the target score."""
    epoch: int
    """The last epoch trained."""
    best_epoch: int
    """The epoch of the best validation score."""
    train_time: float
    """Seconds of training (the sum of the epochs' times) up to and including ``epoch``."""
    monitor: str = "score"
    """What the patience watched (``train.monitor``)."""

    def describe(self) -> str:
        if self.rule == "target":
            return f"stop after epoch {self.epoch}: validation score reached the target {self.threshold:g}"
        watched = {"score": "validation score", "loss": "validation loss",
                   "score_or_loss": "validation score or loss"}[self.monitor]
        return (f"early stop after epoch {self.epoch}: no better {watched} for {self.threshold:g} epochs "
                f"(best at epoch {self.best_epoch})")

    def to_dict(self) -> dict:
        return asdict(self)


class EarlyStopping:
    """Feeds on the epoch records in order (a resumed run's kept ones first); ``patience`` 0 and
    ``target`` None never stop; ``monitor`` as the module docstring says."""

    def __init__(self, patience: int = 0, target: Optional[float] = None, kept: Iterable[EpochRecord] = (),
                 monitor: str = "score") -> None:
        self.patience, self.target, self.monitor = patience, target, monitor
        self.best: EpochRecord | None = None
        """The best epoch so far."""
        self.reset: EpochRecord | None = None
        """The last epoch that reset the patience."""
        self.highest, self.lowest = float("-inf"), float("inf")
        self.train_time = 0.0
        for record in kept:
            self.update(record)

    def update(self, record: EpochRecord) -> Stop | None:
        """Take one epoch's record; the stop, where it fires after this epoch."""
        self.train_time += record.epoch_time
        if record.val_acc is None:
            return None
        self._watch(record)
        if self.target is not None and record.val_acc >= self.target:
            return Stop("target", self.target, record.epoch, self.best.epoch, self.train_time, self.monitor)
        if self.patience and record.epoch - self.reset.epoch >= self.patience:
            return Stop("patience", self.patience, record.epoch, self.best.epoch, self.train_time, self.monitor)
        return None

    def _watch(self, record: EpochRecord) -> None:
        if self.monitor == "score_or_loss":
            high, low = record.val_acc >= self.highest, _loss(record) <= self.lowest
            if high and low:
                self.best = record
            if high or low:
                self.reset = record
                self.highest, self.lowest = max(self.highest, record.val_acc), min(self.lowest, _loss(record))
            return
        better = (self.best is None or (record.val_acc > self.best.val_acc if self.monitor == "score"
                                        else _loss(record) < _loss(self.best)))
        if better:
            self.best = self.reset = record


def _loss(record: EpochRecord) -> float:
    if record.val_loss is None:
        raise ValueError(f"epoch {record.epoch} has no validation loss (a record from before train.monitor could "
                         f"watch it); train.monitor=score reads only the score")
    return record.val_loss


def selected(records: Iterable[EpochRecord], monitor: str = "score") -> EpochRecord | None:
    """The best of ``records`` by ``monitor`` (None where none was evaluated)."""
    watching = EarlyStopping(monitor=monitor)
    for record in records:
        watching.update(record)
    return watching.best


def time_to_target(records: Iterable[EpochRecord], target: float) -> Stop | None:
    """The first epoch at which the validation score reached ``target``, with the training time
    to it (``train.target``'s rule applied after the fact); None where it never did."""
    stopping = EarlyStopping(target=target)
    for record in records:
        if reached := stopping.update(record):
            return reached
    return None
