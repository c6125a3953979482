"""Early stopping on the validation score (``train.patience``).

After every evaluated epoch: the run stops when its best validation score so far (the first
epoch that reached it, as :func:`gnntrain.engine.metrics.summarize` picks it) is ``patience`` or
more epochs old. The papers' own rules differ in what they watch (the GCN paper the validation
loss over a window of 10, GAT and GCNII the validation loss and accuracy with patience 100);
gnntrain watches the score it selects the test score by, so a stopped run reports the test
score at its best validation epoch, the same as a run that ran out its epochs. Every rank holds
the same reduced record, so all ranks stop after the same epoch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gnntrain.engine.metrics import EpochRecord


@dataclass
class Stop:
    """Why and when a run stopped early (``summary.json``'s ``early_stop``)."""

    rule: str
    """What fired: ``patience``."""
    epoch: int
    """The last epoch trained."""
    best_epoch: int
    """The epoch of the best validation score."""
    train_time: float
    """Seconds of training (the sum of the epochs' times) up to and including ``epoch``."""

    def describe(self, patience: int) -> str:
        return (f"early stop after epoch {self.epoch}: no better validation score for {patience} epochs "
                f"(best at epoch {self.best_epoch})")

    def to_dict(self) -> dict:
        return asdict(self)


class EarlyStopping:
    """Feeds on the epoch records in order (a resumed run's kept ones first); ``patience`` 0 never stops."""

    def __init__(self, patience: int, kept: list[EpochRecord] = ()) -> None:
        self.patience = patience
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
        if self.patience and record.epoch - self.best.epoch >= self.patience:
            return Stop("patience", record.epoch, self.best.epoch, self.train_time)
        return None
