"""Stopping on the validation score: ``train.patience`` (early stopping) and ``train.target``
(stop when reached), and the time a run took to reach a score (``gnntrain-report --target``).

After every evaluated epoch:

* ``patience``: the run stops when its best validation score so far (the first epoch that
  reached it, as :meth:`gnntrain.engine.summary.RunSummary.completed` picks it) is
  ``patience`` or more epochs old. The papers' own rules differ in what they watch (the GCN paper the validation
  loss over a window of 10, GAT and GCNII the validation loss and accuracy with patience 100);
  gnntrain watches the score it selects the test score by, so a stopped run reports the test
  score at its best validation epoch, the same as a run that ran out its epochs.
* ``target``: the run stops at the first epoch whose validation score is ``>= target``.

Time to a score is training time: the sum of the epochs' ``epoch_time`` (under an emulated
network the emulated time, since the links' delays are slept) up to and including the epoch,
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

    def describe(self) -> str:
        if self.rule == "target":
            return f"stop after epoch {self.epoch}: validation score reached the target {self.threshold:g}"
        return (f"early stop after epoch {self.epoch}: no better validation score for {self.threshold:g} epochs "
                f"(best at epoch {self.best_epoch})")

    def to_dict(self) -> dict:
        return asdict(self)


class EarlyStopping:
    """Feeds on the epoch records in order (a resumed run's kept ones first); ``patience`` 0 and
    ``target`` None never stop."""

    def __init__(self, patience: int = 0, target: Optional[float] = None, kept: Iterable[EpochRecord] = ()) -> None:
        self.patience, self.target = patience, target
        self.best: EpochRecord | None = None
        self.train_time = 0.0
        for record in kept:
            self.update(record)

    def update(self, record: EpochRecord) -> Stop | None:
        """Take one epoch's record; the stop, where it fires after this epoch."""
        self.train_time += record.epoch_time
        if record.val_acc is None:
            return None
        if self.best is None or record.val_acc > self.best.val_acc:
            self.best = record
        if self.target is not None and record.val_acc >= self.target:
            return Stop("target", self.target, record.epoch, self.best.epoch, self.train_time)
        if self.patience and record.epoch - self.best.epoch >= self.patience:
            return Stop("patience", self.patience, record.epoch, self.best.epoch, self.train_time)
        return None


def time_to_target(records: Iterable[EpochRecord], target: float) -> Stop | None:
    """The first epoch at which the validation score reached ``target``, with the training time
    to it (``train.target``'s rule applied after the fact); None where it never did."""
    stopping = EarlyStopping(target=target)
    for record in records:
        if reached := stopping.update(record):
            return reached
    return None
