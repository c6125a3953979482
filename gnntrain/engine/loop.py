"""The epoch loop, the same for every strategy.

Per epoch: reset the strategy's meter, time the strategy's ``train_epoch`` on the device's
timeline (:mod:`gnntrain.timing.clock`: CUDA events on a GPU, so the epoch ends when the device has
done its work, and the communication timed there is read then), count the rows it passes
through the model's dense maps (the strategy metric ``projected_rows``,
:mod:`gnntrain.models.rows`), close the epoch's communication ledger
(:meth:`gnntrain.comm.meter.CommMeter.close`), take the strategy's tallies and evaluate every
``train.eval_every`` epochs. All of that is local: no rank talks to another between two epochs,
so the next epoch starts where this one ended, and a transfer still in flight across the
boundary (PipeGCN's stale exchange) is neither given free time nor queued behind telemetry on
a FIFO link.

The ranks pool what they kept in a *record round* after every evaluated epoch, every
checkpointed epoch and the last (:meth:`EpochLoop.records_after`): each rank learns its peers'
starts and splits each epoch's communication time into waiting for peers, transfer and hidden
(:mod:`gnntrain.timing.accounting`); then, per epoch, what the ranks report is summed (loss shares,
projected rows, bytes, evaluation counts, the strategy's summed tallies), the epoch's time and
memory are the maximum over ranks and compute and communication times the mean, and the
records go to rank 0's recorder (:mod:`gnntrain.engine.recorder`: ``metrics.jsonl``, W&B,
console) and to early stopping, which can only fire on an evaluated epoch, the last of its
round. The loop knows no strategy: what an epoch does is the strategy's
(:mod:`gnntrain.strategies.base`), built from the run's typed config
(:class:`~gnntrain.config.schema.RootConfig`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from gnntrain.timing.clock import WallRank, clock_of
from gnntrain.comm import namespaces
from gnntrain.timing import cluster as network
from gnntrain.comm.communicator import Communicator
from gnntrain.comm.meter import EpochLedger
from gnntrain.timing.accounting import RankAccount
from gnntrain.timing.epoch import PARTS, EpochTiming
from gnntrain.timing.kinds import TRAINING_CATEGORIES, by_category, category
from gnntrain.config.schema import FaultConfig, RootConfig
from gnntrain.data.job import JobData
from gnntrain.data.partition import comm_volume
from gnntrain.engine import checkpoint
from gnntrain.engine.early_stop import EarlyStopping
from gnntrain.engine.metrics import EpochRecord
from gnntrain.engine.peak_memory import TensorPeakWindow, peak_memory_mb, reset_peak_memory
from gnntrain.engine.recorder import RunRecorder, closed_after
from gnntrain.engine.summary import RunSummary
from gnntrain.errors import interrupts_deferred
from gnntrain.models import rows as projected_rows
from gnntrain.parallel.full_batch import EVAL_COUNTS, SPLITS
from gnntrain.parallel.mesh import WorkerContext
from gnntrain.engine.provenance import loaded_code
from gnntrain.strategies import strategy_class
from gnntrain.strategies.base import Tallies

ALWAYS_REPORTED_KINDS = ("halo_fwd", "halo_bwd", "allreduce")
"""Kinds every record lists, 0 where a strategy sent none, so records of different strategies
line up."""


@dataclass
class KeptEpoch:
    """One rank's account of one epoch, kept without communication until the next record round."""

    epoch: int
    loss: float
    epoch_time: float
    ledger: EpochLedger
    projected_rows: float
    link_busy: dict[str, float]
    link_latency: float
    tallies: Tallies
    compute_time: float | None = None
    """Under the virtual clock, the compute its clock measured in the epoch (None: the wall clock,
    which measures none apart)."""
    call_time: float = 0.0
    """Under the virtual clock, the thread CPU time its communication calls took (not virtual
    time; 0 elsewhere)."""
    compute_cpu_time: float = 0.0
    """Under the virtual clock, the thread CPU time of its compute spans (0 elsewhere)."""
    bytes: dict[str, int] = field(default_factory=dict)
    """Bytes per kind, evaluation's included (taken after it)."""
    crossing: dict[str, int] = field(default_factory=dict)
    """Of :attr:`bytes`, those sent to another node of the described cluster, per kind."""
    memory: dict[str, float] = field(default_factory=dict)
    """Peak memory (MiB), evaluation's included (taken after it)."""
    eval_counts: list[float] | None = None
    eval_time: float = 0.0


@dataclass
class RankShare:
    """What one rank adds to an epoch's record: ``sums`` (loss share, projected rows, bytes per
    kind) and ``eval_counts`` summed over ranks, ``figures`` (times, memory) whose maximum, mean
    and per-rank values the record takes, and the strategy's tallies."""

    sums: dict[str, float]
    figures: dict[str, float]
    eval_counts: list[float] | None
    tallies: Tallies
    account: RankAccount
    """Its epoch's compute and communication (:func:`gnntrain.timing.accounting.account`)."""


class EpochLoop:
    """One rank's side of the loop: builds the strategy, runs epochs and, in record rounds,
    turns them into records."""

    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        self.run, self.ctx = run, ctx
        self.strategy = strategy_class(self.run.strategy.name)(self.run, ctx, job)
        self.meter = self.strategy.meter
        self.world = Communicator(ctx.rank, ctx.world_size, ctx.device)
        self.clock = clock_of(ctx.device)
        self.timing = ctx.virtual if ctx.virtual is not None else WallRank(ctx.device)
        """The rank's clock as the loop sees it, wall or virtual (one interface)."""
        self.clock_offsets = ([0.0] * ctx.world_size if self.timing.one_origin
                              else self.world.host_clock_offsets())

    def evaluates(self, epoch: int) -> bool:
        """Whether ``epoch`` ends with an evaluation: every ``train.eval_every`` and the last."""
        return epoch % self.run.train.eval_every == 0 or epoch == self.run.train.epochs

    def records_after(self, epoch: int) -> bool:
        """Whether a record round follows ``epoch``: evaluated epochs, checkpointed ones and the last."""
        every = self.run.train.checkpoint_every
        return self.evaluates(epoch) or bool(every and epoch % every == 0)

    def train_epoch(self, epoch: int) -> KeptEpoch:
        """Train one epoch and keep this rank's account of it (no communication; its bytes and
        memory are taken by :meth:`run_epoch`, after any evaluation)."""
        self.meter.reset()
        reset_peak_memory(self.ctx.device)
        projected_rows.take()
        self.clock.anchor()
        self.timing.begin_epoch()
        start = self.clock.mark()
        before = self.timing.counters()
        loss = self.strategy.train_epoch(epoch)
        end = self.clock.mark()
        epoch_time = self.clock.seconds(start, end)
        spent = {name: value - before[name] for name, value in self.timing.counters().items()}
        self.timing.epoch(epoch, start, end)
        rows = projected_rows.take()
        self.meter.settle()
        ledger = self.meter.close((self.clock.host_time(start), self.clock.host_time(end)))
        return KeptEpoch(epoch=epoch, loss=float(loss), epoch_time=epoch_time, ledger=ledger,
                         projected_rows=rows, compute_time=spent.get("compute_time"),
                         call_time=spent.get("comm_call_time", 0.0),
                         compute_cpu_time=spent.get("compute_cpu_time", 0.0),
                         link_busy=by_category(self.meter.link_busy_s, TRAINING_CATEGORIES),
                         link_latency=sum(by_category(self.meter.link_latency_s, TRAINING_CATEGORIES).values()),
                         tallies=self.strategy.epoch_tallies())

    def run_epoch(self, epoch: int) -> KeptEpoch:
        """Train, evaluate when due, keep the account. On CPU the last warm-up epoch (which the
        timing means leave out) also measures the tensor-level peak (:class:`TensorPeakWindow`;
        its set-up and read-out fall outside the epoch's timers)."""
        measured = self.ctx.device.type == "cpu" and epoch == self.run.train.warmup_epochs
        with TensorPeakWindow() if measured else contextlib.nullcontext() as window:
            kept = self.train_epoch(epoch)
            if self.evaluates(epoch):
                start = self.clock.mark()
                kept.eval_counts = self.strategy.evaluate().tolist()
                kept.eval_time = self.clock.seconds(start, self.clock.mark())
        kept.bytes = dict(self.meter.bytes)
        kept.crossing = dict(self.meter.crossing)
        peak, peak_reserved = peak_memory_mb(self.ctx.device)
        tensor_peak = peak if self.ctx.device.type == "cuda" else window.peak_mb if measured else None
        kept.memory = {"peak_mem_mb": peak, "peak_mem_reserved_mb": peak_reserved,
                       "peak_tensor_mb": -1.0 if tensor_peak is None else tensor_peak}
        return kept

    def records(self, kept: list[KeptEpoch]) -> list[EpochRecord]:
        """A record round over the epochs kept since the last one (in order); every rank takes
        part and gets the same records. This telemetry traffic is not counted as communication."""
        stamps: dict[tuple, float] = {}
        for epoch in kept:
            stamps.update(epoch.ledger.stamps)
        self.meter.learn(self.ctx.rank, self.world.gather_objects_untracked(stamps), self.clock_offsets)
        ranks = self.world.gather_objects_untracked([self.rank_share(epoch) for epoch in kept])
        return [self.epoch_record(epoch.epoch, [shares[i] for shares in ranks]) for i, epoch in enumerate(kept)]

    def rank_share(self, kept: KeptEpoch) -> RankShare:
        """This rank's part of one epoch's record; its communication times split with the
        peers' starts learned (call for the kept epochs in order)."""
        account = self.meter.account(kept.ledger, kept.compute_time)
        figures = {"epoch_time": kept.epoch_time, "comm_call_time": kept.call_time,
                   "compute_cpu_time": kept.compute_cpu_time,
                   **{f"link_busy/{c}": kept.link_busy[c] for c in TRAINING_CATEGORIES},
                   "link_latency_time": kept.link_latency, "eval_time": kept.eval_time, **kept.memory}
        sums = {"loss": kept.loss, "projected_rows": kept.projected_rows,
                **{f"bytes/{k}": float(b) for k, b in kept.bytes.items()},
                **{f"crossing/{k}": float(b) for k, b in kept.crossing.items()}}
        return RankShare(sums, figures, kept.eval_counts, kept.tallies, account)

    def epoch_record(self, epoch: int, shares: list[RankShare]) -> EpochRecord:
        """Aggregate one epoch over ranks: loss, bytes and eval counts summed; the epoch's time
        (:class:`~gnntrain.timing.epoch.EpochTiming`: the slowest rank's, compute and
        communication the means over ranks, each rank's in ``per_rank``) and memory the maximum
        over ranks (``peak_tensor_mb``: on a CPU, where the epoch measured it)."""
        sums: dict[str, float] = {}
        for share in shares:
            for name, value in share.sums.items():
                sums[name] = sums.get(name, 0.0) + value
        kinds = sorted({name.removeprefix("bytes/") for name in sums if name.startswith("bytes/")}
                       | set(ALWAYS_REPORTED_KINDS))
        per_rank = {name: [share.figures[name] for share in shares] for name in shares[0].figures}
        maxes = {name: max(values) for name, values in per_rank.items()}
        means = {name: sum(values) / len(values) for name, values in per_rank.items()}

        by_kind = {k: int(sums.get(f"bytes/{k}", 0.0)) for k in kinds}
        bytes_by_category = {c: int(b) for c, b in by_category(by_kind).items()}
        training = {k: b for k, b in by_kind.items() if category(k) in TRAINING_CATEGORIES}
        timing = EpochTiming.of_ranks(epoch, str(self.run.cluster.clock), [share.account for share in shares],
                                      {k: b for k, b in by_kind.items() if category(k) != "eval"})
        link_busy = {c: means[f"link_busy/{c}"] for c in TRAINING_CATEGORIES}
        accs: list[float | None] = [None, None, None]
        val_loss = None
        if shares[0].eval_counts is not None:
            counts = [sum(column) for column in zip(*(share.eval_counts for share in shares))]
            train, val, test = (counts[i * EVAL_COUNTS:(i + 1) * EVAL_COUNTS] for i in range(len(SPLITS)))
            accs = [split[0] / split[1] if split[1] > 0 else None for split in (train, val, test)]
            val_loss = val[2] / val[3] if val[3] > 0 else None
        totals = Tallies.combine([share.tallies for share in shares])
        accounts = [share.account for share in shares]
        return EpochRecord(
            epoch=epoch, loss=sums["loss"], train_acc=accs[0], val_acc=accs[1], test_acc=accs[2], val_loss=val_loss,
            eval_time=maxes["eval_time"], comm_bytes=sum(training.values()),
            comm_bytes_by_kind=timing.bytes_by_kind, comm_bytes_by_category=bytes_by_category,
            eval_comm_bytes=bytes_by_category["eval"],
            link_busy_time=sum(link_busy.values()), link_busy_time_by_category=link_busy,
            link_latency_time=means["link_latency_time"],
            peak_mem_mb=maxes["peak_mem_mb"], peak_mem_reserved_mb=maxes["peak_mem_reserved_mb"],
            peak_tensor_mb=maxes["peak_tensor_mb"] if maxes["peak_tensor_mb"] >= 0 else None,
            per_rank={"epoch_time": timing.per_rank_epoch, "compute_time": timing.per_rank_compute,
                      "exposed_time": [a.exposed_time for a in accounts], "comm_call_time": per_rank["comm_call_time"], "compute_cpu_time": per_rank["compute_cpu_time"],
                      **{f"comm_{part}_time": [getattr(a.categories["data"], part) for a in accounts]
                         for part in PARTS},
                      **{f"reduce_{part}_time": [getattr(a.categories["sync"], part) for a in accounts]
                         for part in PARTS}},
            strategy_metrics={"projected_rows": sums["projected_rows"], **self._inter_node_bytes(sums),
                              **self.strategy.epoch_metrics(totals)},
            **EpochRecord.timing_fields(timing),
        )


    def _inter_node_bytes(self, sums: dict[str, float]) -> dict[str, float]:
        """On a cluster of nodes (``network.gpus_per_node``): ``inter_node_bytes``, the training
        bytes all ranks sent to another node, and ``inter_node_bytes/<kind>`` per kind."""
        if not self.run.network.gpus_per_node:
            return {}
        by_kind = {name.removeprefix("crossing/"): value for name, value in sums.items()
                   if name.startswith("crossing/") and category(name.removeprefix("crossing/")) in TRAINING_CATEGORIES}
        return {"inter_node_bytes": sum(by_kind.values()), **{f"inter_node_bytes/{k}": b for k, b in by_kind.items()}}


def inject_fault(fault: FaultConfig, rank: int, epoch: int) -> None:
    """``fault.rank`` dies abruptly (no cleanup, exit code 3) at the start of ``fault.epoch``, or
    with ``fault.stop`` stops (SIGSTOP) there and stays stopped, or with ``fault.link_down``
    takes its node's link down (:func:`gnntrain.comm.namespaces.take_link_down`) and goes on."""
    if fault.rank == rank and fault.epoch == epoch:
        what = "stops" if fault.stop else "takes its node's link down" if fault.link_down else "exits"
        print(f"fault injection: rank {rank} {what} at epoch {epoch}", flush=True)
        if fault.link_down:
            namespaces.take_link_down()
            return
        if fault.stop:
            os.kill(os.getpid(), signal.SIGSTOP)
            return
        os._exit(3)


def run_training(run: RootConfig, ctx: WorkerContext, job: JobData) -> RunSummary | None:
    """The worker's job: train, record (rank 0, :class:`~gnntrain.engine.recorder.RunRecorder`),
    return the summary on rank 0.

    With ``train.checkpoint_every`` every rank checkpoints after those epochs and the last; with
    ``train.resume`` the run continues after the checkpoint's epoch, its ``metrics.jsonl`` made
    of the checkpointed run's records up to that epoch (:mod:`gnntrain.engine.checkpoint`)."""
    wall_start = time.perf_counter()
    graph_facts, partition_stats = job.facts, job.stats
    loop = EpochLoop(run, ctx, job)
    resume = checkpoint.Resume.find(run)
    first_epoch, kept = 1, []
    if resume is not None:
        loop.strategy.load_state_dict(resume.load(ctx.rank))
        first_epoch = resume.epoch + 1
        kept = resume.records() if ctx.rank == 0 else []
    mesh = ctx.mesh_axes()
    network_info = network.describe(run.network)
    run_dir = Path(run.run_dir)
    epochs = run.train.epochs
    facts = RunSummary(
        dataset=run.dataset.name, model=run.model.name, strategy=run.strategy.name, world_size=ctx.world_size,
        mesh=mesh, network=network_info, clock=str(run.cluster.clock), num_nodes=graph_facts.num_nodes, num_edges=graph_facts.num_edges,
        metric="f1_micro" if graph_facts.multilabel else "accuracy", selected_by=str(run.train.monitor),
        partition={**partition_stats, "comm_volume": comm_volume(partition_stats)},
        memory_estimate=job.memory_estimate,
        estimated_peak_mem_mb=job.memory_estimate["total_mb"] if job.memory_estimate else None,
        status="running")
    if ctx.rank == 0:
        trained_on = " (inductive: the training nodes' subgraph)" if run.dataset.inductive else ""
        print(f"{run.dataset.name}{trained_on}: {graph_facts.num_nodes} nodes, {graph_facts.num_edges} edges; "
              f"{run.strategy.name} / {run.model.name} on {ctx.world_size} worker(s) "
              f"(mesh {' x '.join(f'{axis}={n}' for axis, n in mesh.items())}); "
              f"partition: inner {partition_stats['inner_nodes']}, boundary "
              f"{partition_stats['boundary_nodes']}, edge-cut {partition_stats['edge_cut']}, "
              f"comm volume {comm_volume(partition_stats)}, "
              f"replication {partition_stats['replication_factor']:.3f}; network: {network.label(network_info)}; "
              f"clock: {run.cluster.clock}",
              flush=True)
        if job.parted is not None:
            print(f"each rank loaded only its part, from {job.parted.folder}", flush=True)
        if resume is not None:
            print(f"resuming from {resume.where} (epoch {resume.epoch} of {epochs})", flush=True)
    records: list[EpochRecord] = list(kept)
    every = run.train.checkpoint_every
    stopping = EarlyStopping(run.train.patience, run.train.target, kept, str(run.train.monitor))
    recorder: RunRecorder | None = None
    if ctx.rank == 0:
        with interrupts_deferred():
            recorder = RunRecorder(run, facts, kept, resume.manifest["wandb_id"] if resume is not None else None)
    stop, summary, unrecorded = None, None, []
    with closed_after(recorder.close if recorder is not None else None):
        for epoch in range(first_epoch, epochs + 1):
            inject_fault(run.fault, ctx.rank, epoch)
            unrecorded.append(loop.run_epoch(epoch))
            if not loop.records_after(epoch):
                continue
            for record in loop.records(unrecorded):
                record.cold = record.epoch - first_epoch < run.train.warmup_epochs
                stop = stopping.update(record)
                if ctx.rank == 0 and record.epoch == first_epoch and job.memory_estimate is not None:
                    print(f"gnntrain: epoch {record.epoch} peak per rank {record.peak_mem_mb / 1024:.2f} GiB, "
                          f"estimated {job.memory_estimate['total_mb'] / 1024:.2f} GiB", flush=True)
                with interrupts_deferred():
                    records.append(record)
                    if recorder is not None:
                        recorder.log(record)
            unrecorded.clear()
            if every and (epoch % every == 0 or epoch == epochs or stop):
                loop.clock.pause()  # the checkpoint's barrier
                with interrupts_deferred():
                    checkpoint.save(run_dir, epoch, ctx.rank, ctx.world_size, loop.strategy.state_dict(), run,
                                    recorder.wandb_id if recorder is not None else None)
            if stop:
                if ctx.rank == 0:
                    print(stop.describe(), flush=True)
                break
        loop.strategy.finish()
        loop.timing.finish()
        if recorder is not None:
            with interrupts_deferred():
                summary = recorder.complete(records, stop.to_dict() if stop else None,
                                            time.perf_counter() - wall_start, loaded_code())
    return summary
