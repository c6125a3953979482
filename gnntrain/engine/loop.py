"""The epoch loop, the same for every strategy.

Per epoch: reset the strategy's meter, time the strategy's ``train_epoch`` on the device's
timeline (:mod:`gnntrain.clock`: CUDA events on a GPU, so the epoch ends when the device has
done its work, and the communication timed there is read then), and
count the rows it passes through the model's dense maps (the strategy metric
``projected_rows``, :mod:`gnntrain.models.rows`), evaluate every ``train.eval_every`` epochs,
then split each rank's communication time into waiting for peers, transfer and hidden
(:mod:`gnntrain.comm.timeline`, placing each transfer by the peers' starts gathered after the
epoch), sum over all ranks what they report (loss shares, projected rows, bytes, evaluation
counts), take the maximum of the epoch's time and of memory and the mean of compute and
communication times, and hand the record to rank 0's recorder
(:mod:`gnntrain.engine.recorder`: ``metrics.jsonl``, W&B, console). The loop knows no strategy:
what an epoch does is the strategy's (:mod:`gnntrain.strategies.base`), built from the run's
typed config (:class:`~gnntrain.config.schema.RootConfig`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist

from gnntrain.clock import clock_of
from gnntrain.comm import namespaces, network
from gnntrain.comm.communicator import Communicator
from gnntrain.comm.meter import TRAINING_CATEGORIES, by_category, category
from gnntrain.config.schema import FaultConfig, RootConfig
from gnntrain.data import JobData
from gnntrain.data.partition import comm_volume
from gnntrain.engine import checkpoint
from gnntrain.engine.early_stop import EarlyStopping
from gnntrain.engine.metrics import EpochRecord, summarize
from gnntrain.engine.peak_memory import TensorPeakWindow, peak_memory_mb, reset_peak_memory
from gnntrain.engine.recorder import RunRecorder, closed_after
from gnntrain.errors import interrupts_deferred
from gnntrain.models import rows as projected_rows
from gnntrain.parallel.mesh import WorkerContext
from gnntrain.provenance import loaded_code
from gnntrain.strategies import strategy_class

SPLIT_PARTS = ("wait", "transfer", "hidden")
"""How a category's communication time splits (:class:`gnntrain.comm.timeline.Split`)."""
ALWAYS_REPORTED_KINDS = ("halo_fwd", "halo_bwd", "allreduce")
"""Kinds every record lists, 0 where a strategy sent none, so records of different strategies
line up."""


class EpochLoop:
    """One rank's side of the loop: builds the strategy, runs and records epochs."""

    def __init__(self, run: RootConfig, ctx: WorkerContext, job: JobData) -> None:
        self.run, self.ctx = run, ctx
        self.strategy = strategy_class(self.run.strategy.name)(self.run, ctx, job)
        self.meter = self.strategy.meter
        self.world = Communicator(ctx.rank, ctx.world_size, ctx.device)
        self.clock = clock_of(ctx.device)
        self.clock_offsets = self.world.host_clock_offsets()

    def train_epoch(self, epoch: int) -> tuple[torch.Tensor, dict[str, float]]:
        """Train one epoch; this rank's loss share and its times (seconds): the epoch, compute,
        and per training category the communication's wait, transfer and hidden time
        (:mod:`gnntrain.comm.timeline`), where the peers' starts, gathered after the epoch,
        place each transfer."""
        self.meter.reset()
        reset_peak_memory(self.ctx.device)
        projected_rows.take()
        self.clock.anchor()
        start = self.clock.mark()
        loss = self.strategy.train_epoch(epoch)
        end = self.clock.mark()
        epoch_time = self.clock.seconds(start, end)
        self.projected_rows = projected_rows.take()
        self.meter.settle()
        self.meter.learn(self.ctx.rank, self.world.gather_objects_untracked(self.meter.stamps()), self.clock_offsets)
        splits = self.meter.account((self.clock.host_time(start), self.clock.host_time(end)))
        busy = by_category(self.meter.link_busy_s, TRAINING_CATEGORIES)
        times = {"epoch_time": epoch_time,
                 "compute_time": epoch_time - sum(split.exposed for split in splits.values()),
                 **{f"{part}/{c}": getattr(splits[c], part) for part in SPLIT_PARTS for c in TRAINING_CATEGORIES},
                 **{f"link_busy/{c}": busy[c] for c in TRAINING_CATEGORIES},
                 "link_latency_time": sum(by_category(self.meter.link_latency_s, TRAINING_CATEGORIES).values())}
        return loss, times

    def epoch_record(self, epoch: int, loss: torch.Tensor, times: dict[str, float],
                     eval_counts: torch.Tensor | None, eval_time: float, cpu_tensor_peak: float | None) -> EpochRecord:
        """Aggregate one epoch over ranks: loss, bytes and eval counts summed; the epoch's time
        and memory the maximum over ranks; compute and communication times the mean over ranks
        (a mean keeps their sums: compute plus exposed communication is the mean epoch, at
        most the epoch) and each rank's in ``per_rank`` (``cpu_tensor_peak``: this rank's,
        MiB, where the epoch measured it). This telemetry traffic is not counted as
        communication."""
        kinds = sorted(set(self.meter.bytes) | set(ALWAYS_REPORTED_KINDS))
        sums = [float(loss), self.projected_rows] + [float(self.meter.bytes[k]) for k in kinds]
        if eval_counts is not None:
            sums += eval_counts.tolist()
        peak, peak_reserved = peak_memory_mb(self.ctx.device)
        tensor_peak = peak if self.ctx.device.type == "cuda" else cpu_tensor_peak
        figures = {**times, "eval_time": eval_time, "peak_mem_mb": peak, "peak_mem_reserved_mb": peak_reserved,
                   "peak_tensor_mb": -1.0 if tensor_peak is None else tensor_peak}
        as_tensor = lambda xs: torch.tensor(xs, dtype=torch.float64, device=self.ctx.device)  # noqa: E731
        sums = self.world.reduce_untracked(as_tensor(sums), dist.ReduceOp.SUM).tolist()
        ranks = self.world.gather_untracked(as_tensor(list(figures.values()))).cpu()
        per_rank = dict(zip(figures, ranks.T.tolist()))
        maxes = dict(zip(figures, ranks.max(dim=0).values.tolist()))
        means = dict(zip(figures, ranks.mean(dim=0).tolist()))

        by_kind = {k: int(b) for k, b in zip(kinds, sums[2: 2 + len(kinds)])}
        bytes_by_category = {c: int(b) for c, b in by_category(by_kind).items()}
        training = {k: b for k, b in by_kind.items() if category(k) in TRAINING_CATEGORIES}
        parts = {part: {c: means[f"{part}/{c}"] for c in TRAINING_CATEGORIES} for part in SPLIT_PARTS}
        exposed = {c: parts["wait"][c] + parts["transfer"][c] for c in TRAINING_CATEGORIES}
        in_flight = {c: parts["transfer"][c] + parts["hidden"][c] for c in TRAINING_CATEGORIES}
        link_busy = {c: means[f"link_busy/{c}"] for c in TRAINING_CATEGORIES}
        accs: list[float | None] = [None, None, None]
        if eval_counts is not None:
            counts = sums[2 + len(kinds):]
            accs = [counts[i] / counts[i + 1] if counts[i + 1] > 0 else None for i in (0, 2, 4)]
        return EpochRecord(
            epoch=epoch, loss=sums[0], train_acc=accs[0], val_acc=accs[1], test_acc=accs[2],
            epoch_time=maxes["epoch_time"], compute_time=means["compute_time"], comm_time=exposed["data"],
            comm_total_time=in_flight["data"], reduce_time=exposed["sync"], eval_time=maxes["eval_time"],
            comm_bytes=sum(training.values()),
            comm_bytes_by_kind={k: b for k, b in by_kind.items() if category(k) != "eval"},
            comm_bytes_by_category=bytes_by_category,
            comm_time_by_category=exposed, comm_total_time_by_category=in_flight,
            comm_wait_time_by_category=parts["wait"], comm_transfer_time_by_category=parts["transfer"],
            comm_hidden_time_by_category=parts["hidden"],
            eval_comm_bytes=bytes_by_category["eval"],
            link_busy_time=sum(link_busy.values()), link_busy_time_by_category=link_busy,
            link_latency_time=means["link_latency_time"],
            peak_mem_mb=maxes["peak_mem_mb"], peak_mem_reserved_mb=maxes["peak_mem_reserved_mb"],
            peak_tensor_mb=maxes["peak_tensor_mb"] if maxes["peak_tensor_mb"] >= 0 else None,
            per_rank={"epoch_time": per_rank["epoch_time"], "compute_time": per_rank["compute_time"],
                      **{f"comm_{part}_time": per_rank[f"{part}/data"] for part in SPLIT_PARTS},
                      **{f"reduce_{part}_time": per_rank[f"{part}/sync"] for part in SPLIT_PARTS}},
            strategy_metrics={"projected_rows": sums[1], **self.strategy.epoch_metrics()},
        )

    def run_epoch(self, epoch: int) -> EpochRecord:
        """Train, evaluate when due, record. On CPU the last warm-up epoch (which the timing means
        leave out) also measures the tensor-level peak (:class:`TensorPeakWindow`; its set-up and
        read-out fall outside the epoch's timers)."""
        train = self.run.train
        measured = self.ctx.device.type == "cpu" and epoch == train.warmup_epochs
        with TensorPeakWindow() if measured else contextlib.nullcontext() as window:
            loss, times = self.train_epoch(epoch)
            eval_counts, eval_time = None, 0.0
            if epoch % train.eval_every == 0 or epoch == train.epochs:
                start = self.clock.mark()
                eval_counts = self.strategy.evaluate()
                eval_time = self.clock.seconds(start, self.clock.mark())
        return self.epoch_record(epoch, loss, times, eval_counts, eval_time, window.peak_mb if measured else None)


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


def run_training(run: RootConfig, ctx: WorkerContext, job: JobData) -> dict | None:
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
    epochs, warmup = run.train.epochs, run.train.warmup_epochs
    facts = {
        "dataset": run.dataset.name,
        "model": run.model.name,
        "strategy": run.strategy.name,
        "world_size": ctx.world_size,
        "mesh": mesh,
        "network": network_info,
        "num_nodes": graph_facts.num_nodes,
        "num_edges": graph_facts.num_edges,
        "metric": "f1_micro" if graph_facts.multilabel else "accuracy",
        "partition": {**partition_stats, "comm_volume": comm_volume(partition_stats)},
        "memory_estimate": job.memory_estimate,
        "estimated_peak_mem_mb": job.memory_estimate["total_mb"] if job.memory_estimate else None,
    }
    if ctx.rank == 0:
        trained_on = " (inductive: the training nodes' subgraph)" if run.dataset.inductive else ""
        print(f"{run.dataset.name}{trained_on}: {graph_facts.num_nodes} nodes, {graph_facts.num_edges} edges; "
              f"{run.strategy.name} / {run.model.name} on {ctx.world_size} worker(s) "
              f"(mesh {' x '.join(f'{axis}={n}' for axis, n in mesh.items())}); "
              f"partition: inner {partition_stats['inner_nodes']}, boundary "
              f"{partition_stats['boundary_nodes']}, edge-cut {partition_stats['edge_cut']}, "
              f"comm volume {comm_volume(partition_stats)}, "
              f"replication {partition_stats['replication_factor']:.3f}; network: {network.label(network_info)}",
              flush=True)
        if job.parted is not None:
            print(f"each rank loaded only its part, from {job.parted.folder}", flush=True)
        if resume is not None:
            print(f"resuming from {resume.where} (epoch {resume.epoch} of {epochs})", flush=True)
    records: list[EpochRecord] = list(kept)
    every = run.train.checkpoint_every
    stopping = EarlyStopping(run.train.patience, run.train.target, kept)
    recorder: RunRecorder | None = None
    if ctx.rank == 0:
        with interrupts_deferred():
            recorder = RunRecorder(run, facts, kept, resume.manifest["wandb_id"] if resume is not None else None)
    stop, summary = None, None
    with closed_after(recorder.close if recorder is not None else None):
        for epoch in range(first_epoch, epochs + 1):
            inject_fault(run.fault, ctx.rank, epoch)
            record = loop.run_epoch(epoch)
            stop = stopping.update(record)
            if ctx.rank == 0 and epoch == first_epoch and job.memory_estimate is not None:
                print(f"gnntrain: epoch {epoch} peak per rank {record.peak_mem_mb / 1024:.2f} GiB, estimated "
                      f"{job.memory_estimate['total_mb'] / 1024:.2f} GiB", flush=True)
            with interrupts_deferred():
                records.append(record)
                if recorder is not None:
                    recorder.log(record)
                if every and (epoch % every == 0 or epoch == epochs or stop):
                    checkpoint.save(run_dir, epoch, ctx.rank, ctx.world_size, loop.strategy.state_dict(), run,
                                    recorder.wandb_id if recorder is not None else None)
            if stop:
                if ctx.rank == 0:
                    print(stop.describe(), flush=True)
                break
        loop.strategy.finish()
        if recorder is not None:
            figures = {**summarize(records, warmup), "early_stop": stop.to_dict() if stop else None,
                       "total_wall_time": time.perf_counter() - wall_start, "code": loaded_code()}
            with interrupts_deferred():
                summary = recorder.complete(figures)
    return summary
