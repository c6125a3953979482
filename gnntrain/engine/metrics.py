"""Per-epoch records of a run (written by :mod:`gnntrain.engine.recorder`; the run's summary is
:mod:`gnntrain.engine.summary`).

The results contract: each epoch appends one JSON object to ``metrics.jsonl``, written when
the ranks pool their figures, after every evaluated epoch, every checkpointed one and the last
(:mod:`gnntrain.engine.loop`), and flushed at once, so a crashed job keeps the epochs recorded
before it. The epoch's time is the maximum over
ranks (seconds), its parts (compute, communication) the mean over ranks, bytes the sum over
ranks of payload bytes sent, memory the maximum over ranks.
Communication is reported per category (:mod:`gnntrain.timing.kinds`: ``data``, ``sync``,
``control``), with the same meaning for every strategy. For multilabel datasets the
``*_acc`` fields hold F1-micro.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

from gnntrain.errors import GnntrainError
from gnntrain.timing.epoch import EpochTiming
from gnntrain.timing.kinds import TRAINING_CATEGORIES



ROUNDING_S = 1e-9
"""How far below 0 a recorded time may lie: an exposed or compute time is a difference of sums of
seconds, which float rounding can leave a few 1e-16 s negative."""


@dataclass
class EpochRecord:
    """One epoch of a run: one line of ``metrics.jsonl``, one W&B step (nested dicts flattened
    as ``comm_bytes/<kind or category>``, ``comm_time/<category>``, ``comm_total_time/<category>``,
    ``comm_wait_time/<category>``, ...; ``per_rank`` as ``per_rank/<figure>/<rank>``)."""

    epoch: int
    """The epoch, from 1."""
    loss: float
    """Training loss of the epoch (mean over its iterations for mini-batch strategies)."""
    train_acc: Optional[float]
    """Score on the training nodes (accuracy; F1-micro for multilabel graphs); null on epochs without evaluation."""
    val_acc: Optional[float]
    """Score on the validation nodes; null on epochs without evaluation."""
    test_acc: Optional[float]
    """Score on the test nodes; null on epochs without evaluation."""
    epoch_time: float
    """Seconds of training in the epoch, evaluation left out, max over ranks (under the virtual
    clock each rank's epoch is its own virtual time from its start to its end of the epoch, and
    the record's the slowest rank's), on the device's
    timeline (:mod:`gnntrain.timing.clock`): on a CPU the host's clock; on a GPU CUDA events, from
    where the device starts the epoch's work to where it has done it (a transfer still in
    flight on another stream, such as a stale exchange, is not waited for: as on a CPU). The next
    epoch starts where this one ends: between two epochs nothing runs but an evaluation where
    one is due (and then the ranks pooling their records), so a transfer in flight across the
    boundary has no untimed gap to move in."""
    compute_time: float
    """Compute, mean over ranks (``per_rank`` has each rank's): the rank's own epoch less the time
    it was blocked on communication of every timed category (:mod:`gnntrain.timing.accounting`,
    one accounting for both clocks). Under the virtual clock (``cluster.clock=virtual``) that is
    the rank's compute spans as its clock measured them (:mod:`gnntrain.timing.virtual_clock`),
    and ``compute_time + exposed_time`` is the rank's epoch (``per_rank``)."""
    comm_time: float
    """Exposed ``data`` communication, the traffic a method moves to compute (halo rows, stage
    activations; their gradients), mean over ranks: seconds a rank was blocked on it (on a CPU
    the host, on a GPU the device's stream), the sum of ``comm_wait_time_by_category`` and
    ``comm_transfer_time_by_category`` for ``data`` (:mod:`gnntrain.timing.accounting`). Its share
    of ``epoch_time`` is the *communication share* the calibration targets and every table
    quotes: each paper's communication time over its epoch (PipeGCN Table 2, BNS-GCN Sec. 4.2,
    AdaQP Sec. 2.2, GNNPipe Table 1, HopGNN Sec. 3.1), all-reduces apart, averaged over ranks
    as AdaQP states (the others do not say)."""
    comm_total_time: float
    """Seconds ``data`` transfers were in flight within the epoch, mean over ranks: the time
    covered by at least one of them, from where the last rank taking part had its data ready
    to where it completed; the sum of ``comm_transfer_time_by_category`` and
    ``comm_hidden_time_by_category`` for ``data``, at most the epoch."""
    reduce_time: float
    """Exposed ``sync`` communication: seconds a rank waited on gradient all-reduces and
    cross-rank statistics, mean over ranks."""
    eval_time: float
    """Seconds of evaluation after the epoch (0 where none was due), timed as ``epoch_time``."""
    comm_bytes: int
    """Payload bytes sent in training (categories ``data``, ``sync``, ``control``), summed over ranks."""
    comm_bytes_by_kind: dict[str, int] = field(default_factory=dict)
    """Bytes per traffic kind (the kinds below, and a plugin method's own), summed over ranks: the
    kinds the epoch's training recorded, ``halo_fwd``, ``halo_bwd`` and ``allreduce`` always (0
    where none was sent); with a prefix, ``history_`` kinds (GNNPipe's warm-up pass, epoch 1),
    ``precompute_`` kinds (``model.precompute_first``'s one exchange of the input's halo rows, a
    run's first epoch) and ``diag_`` kinds (PipeGCN's extra exchange with
    ``strategy.track_staleness_error``, not part of ``comm_bytes``). Evaluation's kinds are not
    listed: their sum is ``eval_comm_bytes``."""
    comm_bytes_by_category: dict[str, int] = field(default_factory=dict)
    """Bytes per category, summed over ranks, every category always (0 where none was sent):
    ``data``, ``sync``, ``control``, ``eval`` (``eval_comm_bytes``) and ``diag`` (the ``diag_`` kinds)."""
    comm_time_by_category: dict[str, float] = field(default_factory=dict)
    """Exposed seconds per training category (``data``, ``sync``, ``control``), mean over ranks:
    wait plus transfer."""
    comm_total_time_by_category: dict[str, float] = field(default_factory=dict)
    """In-flight seconds per training category, mean over ranks: transfer plus hidden."""
    comm_wait_time_by_category: dict[str, float] = field(default_factory=dict)
    """Per training category, seconds a rank was blocked while none of the category's transfers
    could move, because a peer had not got there yet (imbalance), mean over ranks."""
    comm_transfer_time_by_category: dict[str, float] = field(default_factory=dict)
    """Per training category, seconds a rank was blocked while a transfer moved, mean over ranks."""
    comm_hidden_time_by_category: dict[str, float] = field(default_factory=dict)
    """Per training category, seconds a transfer moved while the rank was not blocked on the
    category (it computed), mean over ranks."""
    comm_wait_time_by_kind: dict[str, float] = field(default_factory=dict)
    """``comm_wait_time_by_category`` per training kind a rank timed (``halo_fwd``, ``allreduce``,
    ``pipe_fwd``, ``feat_fetch``, ...), mean over ranks (0 for a rank without it): each kind's
    operations split on their own, so a category's figure is not the sum of its kinds' where
    their transfers overlap."""
    comm_transfer_time_by_kind: dict[str, float] = field(default_factory=dict)
    """``comm_transfer_time_by_category`` per training kind, likewise."""
    comm_hidden_time_by_kind: dict[str, float] = field(default_factory=dict)
    """``comm_hidden_time_by_category`` per training kind, likewise."""
    eval_comm_bytes: int = 0
    """Bytes sent by evaluation, summed over ranks."""
    link_busy_time: float = 0.0
    """Under a modelled link (the virtual clock): seconds the rank's links spent moving its training bytes
    (bytes on the wire / bandwidth, :func:`gnntrain.timing.cluster.wire`), mean over ranks; 0 on
    the real transport."""
    link_busy_time_by_category: dict[str, float] = field(default_factory=dict)
    """``link_busy_time`` per training category."""
    link_latency_time: float = 0.0
    """Under a modelled link: seconds of latency terms of the rank's training transfers,
    mean over ranks."""
    peak_mem_mb: float = 0.0
    """Peak memory in the epoch (evaluation included), max over ranks: CPU, the peak resident
    set; GPU, the peak the caching allocator handed to tensors."""
    peak_mem_reserved_mb: float = 0.0
    """Peak memory held for the epoch, max over ranks: GPU, the peak the caching allocator
    reserved from the device (allocated plus its cached free blocks: what another process
    on the GPU could not have); CPU, the peak resident set again."""
    peak_tensor_mb: Optional[float] = None
    """Peak of tensor memory in the epoch (evaluation included), max over ranks: GPU, as
    ``peak_mem_mb``; CPU, measured in the last warm-up epoch only (``train.warmup_epochs``; live
    tensors at its start plus the most allocated above them, :mod:`gnntrain.engine.peak_memory`),
    null in the others and where ``train.warmup_epochs=0``."""
    per_rank: dict[str, list[float]] = field(default_factory=dict)
    """Each rank's figures, in rank order: ``epoch_time``, ``compute_time``, ``exposed_time``
    (its exposed communication of every category), under the virtual clock ``comm_call_time``
    (the thread CPU time the rank's communication calls took: bookkeeping, posting, copies,
    counted in neither compute nor virtual time) and ``compute_cpu_time`` (its thread CPU time in
    its compute spans: ``compute_time`` itself on a CPU, except where the ranks take turns,
    ``cluster.virtual_compute=alone``) (0 each elsewhere), and the wait, transfer and hidden time of
    ``data`` (``comm_wait_time``, ``comm_transfer_time``, ``comm_hidden_time``) and of ``sync``
    (``reduce_wait_time``, ...) communication."""
    strategy_metrics: dict[str, float] = field(default_factory=dict)
    """Every strategy's ``projected_rows`` (rows through the models' weight maps, summed over
    ranks); on a cluster of nodes (``network.gpus_per_node``) ``inter_node_bytes``, the training
    bytes all ranks sent to a rank on another node (an all-reduce counted as a ring passes it on:
    a rank's payload where its ring successor is on another node), and ``inter_node_bytes/<kind>``
    per kind; and the strategy's own figures (see each strategy's page)."""
    cold: bool = False
    """Whether the epoch is among the first ``train.warmup_epochs`` that the process which ran it
    ran (a resumed run's restart warms up again); the summary's means leave such epochs out.
    False in records written before it existed, whose warm-up is the run's first epochs."""
    val_loss: Optional[float] = None
    """Mean loss over the validation nodes, the training loss's function (cross-entropy; binary
    cross-entropy averaged over the labels for multilabel data); null on epochs without
    evaluation (and in records written before it existed). ``train.monitor=loss`` or
    ``score_or_loss`` selects the best epoch by it."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def bad_figure(self) -> str | None:
        """The first time or byte figure (``per_rank``'s included) that is not a number, finite
        and >= 0, as ``name=value``; None where every one is. A record from someone else's file is
        checked before any mean is taken over it (a time may fall below 0 by :data:`ROUNDING_S`, as
        differences of sums do). The loss is not checked: a diverged run's is NaN."""
        figures = [(f.name, getattr(self, f.name)) for f in TIME_AND_BYTE_FIELDS]
        figures += ([(f"per_rank.{k}", v) for k, v in self.per_rank.items() if "time" in k or "bytes" in k]
                    if isinstance(self.per_rank, dict) else [])
        for name, value in figures:
            values = (value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list)
                      else [(None, value)])
            for key, v in values:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not -ROUNDING_S <= v < math.inf:
                    return f"{name}{'' if key is None else f'[{key}]'}={v!r}"
        return None

    @staticmethod
    def timing_fields(timing: EpochTiming) -> dict[str, Any]:
        """The record's time fields (``per_rank`` aside) from the epoch's timing."""
        exposed = {c: timing.exposed(c) for c in TRAINING_CATEGORIES}
        in_flight = {c: timing.in_flight(c) for c in TRAINING_CATEGORIES}
        return dict(epoch_time=timing.epoch_time, compute_time=timing.compute_time, comm_time=exposed["data"],
                    comm_total_time=in_flight["data"], reduce_time=exposed["sync"], comm_time_by_category=exposed,
                    comm_total_time_by_category=in_flight, comm_wait_time_by_category=timing.wait_by_category,
                    comm_transfer_time_by_category=timing.transfer_by_category,
                    comm_hidden_time_by_category=timing.hidden_by_category,
                    comm_wait_time_by_kind=timing.wait_by_kind, comm_transfer_time_by_kind=timing.transfer_by_kind,
                    comm_hidden_time_by_kind=timing.hidden_by_kind)

    def timing(self, clock: str) -> EpochTiming:
        """The epoch's timing as the record holds it (``clock``: the run's, its summary's ``clock``)."""
        return EpochTiming(
            epoch=self.epoch, clock=clock, epoch_time=self.epoch_time, compute_time=self.compute_time,
            wait_by_category=self.comm_wait_time_by_category, transfer_by_category=self.comm_transfer_time_by_category,
            hidden_by_category=self.comm_hidden_time_by_category, wait_by_kind=self.comm_wait_time_by_kind,
            transfer_by_kind=self.comm_transfer_time_by_kind, hidden_by_kind=self.comm_hidden_time_by_kind,
            bytes_by_kind={k: float(b) for k, b in self.comm_bytes_by_kind.items()},
            per_rank_epoch=list(self.per_rank.get("epoch_time", [])),
            per_rank_compute=list(self.per_rank.get("compute_time", [])))


TIME_AND_BYTE_FIELDS = tuple(f for f in fields(EpochRecord) if "time" in f.name or "bytes" in f.name)
"""The record's figures :meth:`EpochRecord.bad_figure` checks (``per_rank``'s besides)."""


def read_records(path: Path) -> list[EpochRecord]:
    """The epochs of a ``metrics.jsonl`` (a line cut short by a killed writer is left out); a
    record whose times or bytes are not finite and >= 0 is refused in one line."""
    records = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            record = EpochRecord(**json.loads(line))
        except (json.JSONDecodeError, TypeError):
            break
        bad = record.bad_figure()
        if bad is not None:
            raise GnntrainError(f"{path}: epoch {record.epoch}'s {bad}; valid: times and bytes finite and >= 0")
        records.append(record)
    return records


def share(records: list[EpochRecord], categories: tuple[str, ...] = ("data",)) -> float | None:
    """The communication share of ``records``: the mean exposed time of ``categories`` over the
    mean ``epoch_time`` (null without epochs)."""
    epoch = sum(r.epoch_time for r in records)
    exposed = sum(r.comm_time_by_category.get(c, 0.0) for r in records for c in categories)
    return exposed / epoch if epoch > 0 else None
