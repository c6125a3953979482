"""Start the workers of a job: spawn them on this machine (:mod:`.spawn`), or join the world
``torchrun`` or a submitit job started (:mod:`.join`); every rank starts the same way
(:mod:`.rank`).

Before any worker starts, the strategy states the process and data layout it needs
(:meth:`gnntrain.strategies.base.Strategy.layout`): the device-mesh axes, checked against the
number of workers, and the number of graph partitions (:func:`job_layout`). Each rank builds
the mesh after joining the process group. The launcher keeps the job's W&B run
(:func:`~gnntrain.engine.recorder.follow_in_launcher`), so it is finished whatever the workers'
fate; under torchrun, rank 0's recorder keeps it. The data is prepared once per job, or per
node under torchrun (:mod:`.prepare`).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from gnntrain.config.schema import RootConfig
from gnntrain.data import JobData
from gnntrain.data.parted import part_file
from gnntrain.engine.checkpoint import Resume
from gnntrain.engine.recorder import closed_after, follow_in_launcher, forget_worker_error, write_worker_error
from gnntrain.errors import ConfigError, GnntrainError, WorkerFailed, first_line, interrupts_deferred, warn
from gnntrain.launch.join import (adopt_submitit_tasks, leave_torchrun_world, under_torchrun,
                                  warn_of_a_shared_rendezvous_store)
from gnntrain.launch.prepare import prepared_once, prepared_under_lock
from gnntrain.launch.rank import WorkerFn, run_rank, start_rank_process
from gnntrain.launch.spawn import spawn_and_join
from gnntrain.memory_estimate import check_fits, estimate_job
from gnntrain.parallel.mesh import Layout
from gnntrain.provenance import export_launcher_code
from gnntrain.strategies import loads_parts, strategy_class

__all__ = ["WorkerFn", "job_layout", "launch", "leave_torchrun_world", "resolve_world_size", "under_torchrun"]

OVERSUBSCRIPTION = 4
"""Local workers per core above which a job is warned about."""


def resolve_world_size(run: RootConfig) -> int:
    """The number of workers: torchrun's world, all visible GPUs (``world_size: 0`` on
    ``cluster.device=cuda``), or ``cluster.world_size``; checks that the device and backend
    can run them."""
    cluster = run.cluster
    gpus = torch.cuda.device_count() if cluster.device == "cuda" else 0
    if cluster.device == "cuda" and gpus == 0:
        raise ConfigError(f"cluster.device=cuda (cluster={cluster.name}) but no CUDA GPU is visible; "
                          "valid here: cluster.device=cpu (cluster=local)")
    if cluster.backend == "nccl" and cluster.device != "cuda":
        raise ConfigError(f"cluster.backend=nccl needs cluster.device=cuda, got cluster.device={cluster.device}; "
                          "valid on cpu: cluster.backend=gloo")
    if under_torchrun():
        return int(os.environ["WORLD_SIZE"])
    world_size = cluster.world_size or gpus
    if world_size < 1:
        raise ConfigError(f"cluster.world_size={cluster.world_size} must be >= 1 for cluster={cluster.name}")
    if cluster.backend == "nccl" and world_size > gpus:
        raise ConfigError(f"cluster.world_size={world_size} exceeds the {gpus} visible GPUs: NCCL needs one GPU "
                          "per worker (cluster.backend=gloo lets workers share a GPU)")
    return world_size


def job_layout(run: RootConfig, world_size: int) -> Layout:
    """The strategy's layout on ``world_size`` workers; ``partition.parts``, when set, must be
    the number of parts it needs."""
    name = run.strategy.name
    layout = strategy_class(name).layout(run, world_size)
    layout.check(world_size, name)
    parts = run.partition.parts
    if parts is not None and parts != layout.parts:
        raise ConfigError(f"partition.parts={parts} does not fit strategy={name} on the number of workers "
                          f"({world_size}); valid: {layout.parts} (or leave it unset)")
    return layout


def _estimate_memory(run: RootConfig, job: JobData, ranks_load_parts: bool, world_size: int, here: range) -> None:
    """Where each rank holds one part: the estimated peak per rank (:mod:`gnntrain.memory_estimate`)
    into ``job`` and on the console (rank 0), and the job stopped if the ranks ``here`` (this
    machine's) would need more memory than it has."""
    if not ranks_load_parts or job.facts.num_nodes == 0:
        return
    try:
        estimates = estimate_job(run, job.facts, job.stats)
    except Exception as exc:  # noqa: BLE001 - a model the probe cannot run still trains
        warn(f"no memory estimate: the model's probe forward failed ({first_line(exc)})")
        return
    largest = max(estimates, key=lambda e: e.total_mb)
    job.memory_estimate = largest.to_dict()
    if int(os.environ.get("RANK", 0)) == 0:
        print(f"gnntrain: estimated peak per rank: {largest.describe()}", flush=True)
    mapped = None if job.parted is None else {r: part_file(job.parted.folder, r).stat().st_size / 2**20 for r in here}
    check_fits(estimates, list(here), world_size, mapped)


def launch(run: RootConfig, fn: WorkerFn) -> Any:
    """Run ``fn(run, ctx, job)`` on every rank; returns rank 0's result in the torchrun case
    (the spawned workers' results stay in their processes: they write to the run dir)."""
    adopt_submitit_tasks()
    export_launcher_code()
    if run.run_dir and int(os.environ.get("RANK", 0)) == 0:  # before any rank can fail: they meet first
        forget_worker_error(Path(run.run_dir))
    world_size = resolve_world_size(run)
    layout = job_layout(run, world_size)
    resume = Resume.find(run)
    if resume is not None:
        resume.check(run, world_size)
        if int(os.environ.get("RANK", 0)) == 0:
            for line in resume.describe_skipped():
                warn(line)
    ranks_load_parts = loads_parts(run.strategy.name)
    if under_torchrun():
        if run.network.mode == "kernel":
            raise ConfigError("network.mode=kernel places the workers gnntrain spawns in network namespaces; under "
                              "torchrun or submitit the launcher places them; valid: network.mode=emulated")
        warn_of_a_shared_rendezvous_store()
        rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", 0))
        local_workers = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        start_rank_process(run, rank, world_size, local_rank, local_workers, "env://")
        job = prepared_once(run, layout, ranks_load_parts)
        _estimate_memory(run, job, ranks_load_parts, world_size, range(rank - local_rank, rank - local_rank + local_workers))
        with worker_errors_recorded(run, rank):
            return run_rank(fn, run, job, layout, rank, world_size, local_rank, local_workers, "env://")
    job = prepared_under_lock(run, layout, ranks_load_parts, write_parts=False)
    _estimate_memory(run, job, ranks_load_parts, world_size, range(world_size))
    cores = len(os.sched_getaffinity(0))
    if world_size > OVERSUBSCRIPTION * cores:
        warn(f"{world_size} workers on {cores} cores (more than {OVERSUBSCRIPTION} per core): epochs will be slow "
             "and their times say little about the method")
    with interrupts_deferred():
        run, follower = follow_in_launcher(run, resume.manifest.get("wandb_id") if resume else None,
                                           resume.epoch + 1 if resume else 1)
    with closed_after(follower.finish if follower is not None else None), worker_errors_recorded(run, None):
        spawn_and_join(fn, run, job, layout, world_size, follower)
    return None


@contextmanager
def worker_errors_recorded(run: RootConfig, rank: int | None) -> Iterator[None]:
    """A worker's exception as :class:`WorkerFailed` with its traceback, also written to the run
    dir's ``error.txt`` (:func:`~gnntrain.engine.recorder.write_worker_error`). ``rank``: this
    process's rank under torchrun or submitit, whose own exceptions are the worker's; None: the
    launcher of spawned workers, whose :func:`spawn_and_join` raises the first failing worker's.
    A :class:`GnntrainError` a rank raises (bad input, a stop) stays as it is: it has one line
    to say."""
    run_dir = Path(run.run_dir) if run.run_dir else None
    try:
        yield
    except WorkerFailed as failed:
        if failed.trace and run_dir is not None:
            write_worker_error(run_dir, str(failed), failed.trace)
        raise
    except GnntrainError:
        raise
    except Exception:
        if rank is None:
            raise
        failed = WorkerFailed.raised(rank, traceback.format_exc())
        if run_dir is not None:
            write_worker_error(run_dir, str(failed), failed.trace)
        raise failed from None
