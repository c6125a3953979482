"""A run's ``summary.json``: what the run is, how it ended, and its figures over its steady epochs.

:class:`RunSummary` is the one shape of that file, written and read here alone: rank 0's
recorder writes it when the run starts (``running``, :meth:`RunSummary.with_records` of a resumed
run's kept epochs) and when it completes (:meth:`RunSummary.completed`); whoever catches a run's
stop marks it ``failed`` or ``interrupted`` (:meth:`RunSummary.stopped`); the report, the sweep's
outcome, the calibration and the reproduction code read it (:meth:`RunSummary.read`). Every field
is written, null where the run does not know it, except the three written only where they apply
(:data:`WRITTEN_WHERE_SET`) and ``early_stop``, written in a completed run. A summary written before
a field existed reads with the field's default.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Optional

from gnntrain.timing.epoch import EpochTiming
from gnntrain.timing.kinds import TRAINING_CATEGORIES
from gnntrain.engine.early_stop import selected
from gnntrain.engine.metrics import EpochRecord, share
from gnntrain.storage.files import read_text_checked, write_atomically

SUMMARY_FILE = "summary.json"
SUMMARY_LIMIT = 64 << 20
"""The most bytes a summary is read from (one of a 100,000-epoch run holds some 10 MB)."""
PER_CATEGORY_MEANS = ("comm_bytes_by_kind", "comm_bytes_by_category", "comm_time_by_category",
                      "comm_total_time_by_category", "comm_wait_time_by_category", "comm_transfer_time_by_category",
                      "comm_hidden_time_by_category", "comm_wait_time_by_kind", "comm_transfer_time_by_kind",
                      "comm_hidden_time_by_kind", "link_busy_time_by_category")
"""The per-kind and per-category fields of :class:`EpochRecord` whose means the summary gives per key."""


def steady_records(records: list[EpochRecord], warmup_epochs: int) -> list[EpochRecord]:
    """The epochs a summary's means are over: those not :attr:`~EpochRecord.cold` (a process's
    first ``warmup_epochs``, again after each resume; records written before the mark existed:
    the run's first ``warmup_epochs``) and not part of a strategy's examination
    (``strategy_metrics["examination"]``, e.g. HopGNN timing its merge counts); all of
    ``records`` where there are no others."""
    marked = any(r.cold for r in records)
    return [r for i, r in enumerate(records) if not (r.cold if marked else i < warmup_epochs)
            and not r.strategy_metrics.get("examination")] or records


@dataclass
class RunSummary:
    """``summary.json``, in the order written (docs/results.md's table is generated from these
    docstrings)."""

    dataset: Optional[str] = None
    """The dataset's name."""
    model: Optional[str] = None
    """The model's name."""
    strategy: Optional[str] = None
    """The strategy's name."""
    world_size: Optional[int] = None
    """Number of workers."""
    mesh: dict[str, int] = field(default_factory=dict)
    """The device mesh: each axis's size (`gp`, `pp`, `dp`)."""
    network: dict[str, Any] = field(default_factory=dict)
    """The network (:func:`gnntrain.timing.cluster.describe`): whether it was modelled; preset, bandwidth, latency
    and, when calibrated, the calibration."""
    clock: str = "wall"
    """What every time of the run was measured on (`cluster.clock`): `wall`, the host's clock (a GPU's: its
    device's), or `virtual`, each rank's own virtual clock (`gnntrain.timing`); a summary written before this field
    existed: `wall`."""
    num_nodes: Optional[int] = None
    """Nodes of the graph trained on."""
    num_edges: Optional[int] = None
    """Edges of the graph trained on."""
    metric: Optional[str] = None
    """The score: `accuracy`, or `f1_micro` for a multi-label dataset."""
    partition: dict[str, Any] = field(default_factory=dict)
    """Inner, boundary and marginal nodes per part, edge-cut, replication factor and communication volume."""
    memory_estimate: Optional[dict[str, Any]] = None
    """The estimated peak of the largest rank, by part (null where no estimate was made)."""
    estimated_peak_mem_mb: Optional[float] = None
    """Its total in MiB."""
    wandb: Optional[dict[str, Optional[str]]] = None
    """Only where W&B is on: the W&B run's id, project, group and name."""
    status: str = "completed"
    """`running` while the run trains, then `completed`, `failed` or `interrupted` (a summary written before this
    field existed: `completed`)."""
    epochs: int = 0
    """Epochs completed."""
    selected_by: str = "score"
    """How the best epoch is selected (`train.monitor`): `score`, the first epoch of the best validation score;
    `loss`, the first of the lowest validation loss; `score_or_loss`, the last epoch whose validation score and loss
    were both at their best so far (a summary written before this field existed: `score`)."""
    best_val: Optional[float] = None
    """The validation score at the best epoch (`selected_by`)."""
    test_at_best_val: Optional[float] = None
    """Test score at the best epoch."""
    best_epoch: Optional[int] = None
    """That epoch."""
    final_loss: Optional[float] = None
    """The last epoch's training loss."""
    warmup_epochs_excluded: int = 0
    """Warm-up epochs left out of the means (`train.warmup_epochs`, again after each resume)."""
    examination_epochs: int = 0
    """A strategy's examination epochs, also left out (HopGNN timing its merge counts)."""
    mean_examination_epoch_time: Optional[float] = None
    """Their mean time (null without any)."""
    mean_epoch_time: Optional[float] = None
    """Mean of `epoch_time` over the steady epochs; the `mean_` fields below are means of the record's fields of
    that name over the same epochs."""
    mean_compute_time: Optional[float] = None
    """Of `compute_time`."""
    mean_comm_time: Optional[float] = None
    """Of `comm_time`."""
    mean_comm_total_time: Optional[float] = None
    """Of `comm_total_time`."""
    mean_reduce_time: Optional[float] = None
    """Of `reduce_time`."""
    mean_link_busy_time: Optional[float] = None
    """Of `link_busy_time`."""
    mean_link_latency_time: Optional[float] = None
    """Of `link_latency_time`."""
    mean_comm_bytes_per_epoch: Optional[float] = None
    """Of `comm_bytes`."""
    mean_comm_bytes_by_kind: dict[str, float] = field(default_factory=dict)
    """Of `comm_bytes_by_kind`, per kind."""
    mean_comm_bytes_by_category: dict[str, float] = field(default_factory=dict)
    """Of `comm_bytes_by_category`, per category."""
    mean_comm_time_by_category: dict[str, float] = field(default_factory=dict)
    """Of `comm_time_by_category`, per category."""
    mean_comm_total_time_by_category: dict[str, float] = field(default_factory=dict)
    """Of `comm_total_time_by_category`, per category."""
    mean_comm_wait_time_by_category: dict[str, float] = field(default_factory=dict)
    """Of `comm_wait_time_by_category`, per category."""
    mean_comm_transfer_time_by_category: dict[str, float] = field(default_factory=dict)
    """Of `comm_transfer_time_by_category`, per category."""
    mean_comm_hidden_time_by_category: dict[str, float] = field(default_factory=dict)
    """Of `comm_hidden_time_by_category`, per category."""
    mean_comm_wait_time_by_kind: dict[str, float] = field(default_factory=dict)
    """Of `comm_wait_time_by_kind`, per kind."""
    mean_comm_transfer_time_by_kind: dict[str, float] = field(default_factory=dict)
    """Of `comm_transfer_time_by_kind`, per kind."""
    mean_comm_hidden_time_by_kind: dict[str, float] = field(default_factory=dict)
    """Of `comm_hidden_time_by_kind`, per kind."""
    mean_link_busy_time_by_category: dict[str, float] = field(default_factory=dict)
    """Of `link_busy_time_by_category`, per category."""
    comm_share: Optional[float] = None
    """`mean_comm_time / mean_epoch_time`: the communication share (`comm_time`)."""
    training_comm_share: Optional[float] = None
    """The exposed time of every training category (`data`, `sync`, `control`) over the epoch, means over the
    steady epochs: the share `network.calibrate_traffic=training` targets."""
    peak_mem_mb: Optional[float] = None
    """Largest `peak_mem_mb` of any epoch."""
    peak_mem_reserved_mb: Optional[float] = None
    """Largest `peak_mem_reserved_mb` of any epoch."""
    peak_tensor_mb: Optional[float] = None
    """Largest `peak_tensor_mb` of any epoch that has one; null where none does."""
    mean_strategy_metrics: dict[str, float] = field(default_factory=dict)
    """Of `strategy_metrics`, per figure."""
    early_stop: Optional[dict[str, Any]] = None
    """In a completed run: why and when `train.patience` or `train.target` stopped it (null where it ran all its
    epochs)."""
    total_wall_time: Optional[float] = None
    """Seconds of the training loop (null until the run completes)."""
    code: Optional[list[str]] = None
    """The package's files the run's processes had loaded when it completed, rank 0's and its launcher's
    (`gnntrain.engine.provenance`; null until then): a table built from the run is stale only when one of them changes
    (`make check-tables`)."""
    error_file: Optional[str] = None
    """Only where a worker raised: `error.txt`, which holds its error line and traceback."""
    error: Optional[str] = None
    """Only in a run that did not complete: the one-line error."""

    def with_records(self, records: list[EpochRecord], warmup_epochs: int) -> RunSummary:
        """This summary with the figures of ``records``: the best epoch (:attr:`selected_by`), its
        validation and test scores, and per-epoch means over the steady epochs
        (:func:`steady_records`): those not warming up (a process's first ``warmup_epochs``) and
        not part of a strategy's examination (``strategy_metrics["examination"]``, e.g. HopGNN
        timing its merge counts), all epochs if there are no others. The examination epochs' mean time is given apart."""
        best = selected(records, self.selected_by)
        examined = [r for r in records if r.strategy_metrics.get("examination")]
        steady = steady_records(records, warmup_epochs)
        marked = sum(r.cold for r in records)
        warmed = (marked or min(warmup_epochs, len(records))) if steady is not records else 0
        per_key = {f"mean_{name}": {k: _mean([getattr(r, name).get(k, 0) for r in steady])
                                    for k in sorted({k for r in steady for k in getattr(r, name)})}
                   for name in PER_CATEGORY_MEANS}
        return replace(
            self, **per_key,
            epochs=len(records),
            best_val=best.val_acc if best else None,
            test_at_best_val=best.test_acc if best else None,
            best_epoch=best.epoch if best else None,
            final_loss=records[-1].loss if records else None,
            warmup_epochs_excluded=warmed,
            examination_epochs=len(examined),
            mean_examination_epoch_time=_mean([r.epoch_time for r in examined]),
            mean_epoch_time=_mean([r.epoch_time for r in steady]),
            mean_compute_time=_mean([r.compute_time for r in steady]),
            mean_comm_time=_mean([r.comm_time for r in steady]),
            mean_comm_total_time=_mean([r.comm_total_time for r in steady]),
            mean_reduce_time=_mean([r.reduce_time for r in steady]),
            mean_link_busy_time=_mean([r.link_busy_time for r in steady]),
            mean_link_latency_time=_mean([r.link_latency_time for r in steady]),
            mean_comm_bytes_per_epoch=_mean([r.comm_bytes for r in steady]),
            comm_share=share(steady),
            training_comm_share=share(steady, TRAINING_CATEGORIES),
            peak_mem_mb=max((r.peak_mem_mb for r in records), default=None),
            peak_mem_reserved_mb=max((r.peak_mem_reserved_mb for r in records), default=None),
            peak_tensor_mb=max((r.peak_tensor_mb for r in records if r.peak_tensor_mb is not None), default=None),
            mean_strategy_metrics={k: _mean([r.strategy_metrics[k] for r in steady if k in r.strategy_metrics])
                                   for k in sorted({k for r in steady for k in r.strategy_metrics})},
        )

    def completed(self, records: list[EpochRecord], warmup_epochs: int, early_stop: Optional[dict[str, Any]],
                  total_wall_time: float, code: list[str]) -> RunSummary:
        """The summary of the run completed with ``records``."""
        return replace(self.with_records(records, warmup_epochs), status="completed", early_stop=early_stop,
                       total_wall_time=total_wall_time, code=code)

    def stopped(self, status: str, error: str, records: list[EpochRecord], warmup_epochs: int,
                error_file: Optional[str]) -> RunSummary:
        """The summary of a run that stopped (``failed`` or ``interrupted``) with ``error`` after
        ``records``; ``error_file`` names a worker's traceback where one was kept."""
        return replace(self.with_records(records, warmup_epochs), status=status, error=error,
                       error_file=error_file or self.error_file)

    def timing(self) -> EpochTiming:
        """The run's mean steady epoch as the one timing result (:class:`~gnntrain.timing.epoch.EpochTiming`)
        that a replay and a prediction give too, so a report reads the three alike (its ranks'
        figures are not kept in the summary)."""
        return EpochTiming(
            epoch=0, clock=self.clock, epoch_time=self.mean_epoch_time or 0.0, compute_time=self.mean_compute_time or 0.0,
            wait_by_category=dict(self.mean_comm_wait_time_by_category),
            transfer_by_category=dict(self.mean_comm_transfer_time_by_category),
            hidden_by_category=dict(self.mean_comm_hidden_time_by_category),
            wait_by_kind=dict(self.mean_comm_wait_time_by_kind), transfer_by_kind=dict(self.mean_comm_transfer_time_by_kind),
            hidden_by_kind=dict(self.mean_comm_hidden_time_by_kind), bytes_by_kind=dict(self.mean_comm_bytes_by_kind))

    def to_dict(self) -> dict[str, Any]:
        """The summary as ``summary.json`` holds it: every field but those of
        :data:`WRITTEN_WHERE_SET` that are null, and ``early_stop`` outside a completed run."""
        return {k: v for k, v in asdict(self).items()
                if not (k in WRITTEN_WHERE_SET and v is None) and (k != "early_stop" or self.status == "completed")}

    def write(self, run_dir: Path) -> None:
        """``summary.json`` in ``run_dir``, replaced atomically (a reader never sees half a file)."""
        write_atomically(run_dir / SUMMARY_FILE, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSummary:
        """A summary from the fields of a ``summary.json`` (keys it does not know are left out);
        ValueError where ``data`` is no JSON object."""
        if not isinstance(data, dict):
            raise ValueError(f"a summary is a JSON object, not {type(data).__name__}")
        return cls(**{k: v for k, v in data.items() if k in FIELD_NAMES})

    @classmethod
    def read(cls, path: Path) -> RunSummary:
        """The summary in ``path`` (a ``summary.json``, or the run directory holding it); OSError
        or ValueError where it cannot be read."""
        path = path / SUMMARY_FILE if path.is_dir() else path
        return cls.from_dict(json.loads(read_text_checked(path, SUMMARY_LIMIT)))


WRITTEN_WHERE_SET = ("wandb", "error", "error_file")
"""The fields ``summary.json`` holds only where they apply."""
FIELD_NAMES = frozenset(f.name for f in fields(RunSummary))


def _mean(values: list[float]) -> Optional[float]:
    return sum(values) / len(values) if values else None

