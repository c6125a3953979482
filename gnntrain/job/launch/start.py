"""Starting a prepared job's ranks (:mod:`.prepare`): spawned on this machine (:mod:`.spawn`), or
joining the world ``torchrun`` or a submitit job started (:mod:`.join`); every rank starts the
same way (:mod:`.rank`).

Each rank builds the device mesh after joining the process group. The launcher keeps the job's
W&B run (:func:`~gnntrain.engine.recorder.follow_in_launcher`), so it is finished whatever the
workers' fate; under torchrun, rank 0's recorder keeps it. A worker's exception reaches the user
with its traceback, also kept in the run dir (:func:`worker_errors_recorded`).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gnntrain.config.schema import RootConfig
from gnntrain.engine.provenance import export_launcher_code
from gnntrain.engine.recorder import closed_after, follow_in_launcher, forget_worker_error, write_worker_error
from gnntrain.errors import GnntrainError, WorkerFailed, interrupts_deferred, warn
from gnntrain.job.launch.join import adopt_submitit_tasks, under_torchrun, warn_of_a_shared_rendezvous_store
from gnntrain.job.launch.prepare import PreparedJob, prepare
from gnntrain.job.launch.rank import WorkerFn, run_rank, start_rank_process
from gnntrain.job.launch.spawn import spawn_and_join
from gnntrain.job.startup import reached

OVERSUBSCRIPTION = 4
"""Local workers per core above which a job is warned about."""


def launch(run: RootConfig, fn: WorkerFn) -> Any:
    """Run ``fn(run, ctx, job)`` on every rank of the checked ``run``; returns rank 0's result in the
    torchrun case (the spawned workers' results stay in their processes: they write to the run
    dir)."""
    reached("checked")
    adopt_submitit_tasks()
    export_launcher_code()
    if run.run_dir and int(os.environ.get("RANK", 0)) == 0:  # before any rank can fail: they meet first
        forget_worker_error(Path(run.run_dir))
    prepared = prepare(run)
    reached("prepared")
    if under_torchrun():
        return _join_torchrun(prepared, fn)
    _spawn(prepared, fn)
    return None


def _join_torchrun(prepared: PreparedJob, fn: WorkerFn) -> Any:
    """This process as its rank of torchrun's (or submitit's) world: the process group first, then
    the data (prepared once per node or job, :mod:`.data`), then ``fn``."""
    run, world_size = prepared.run, prepared.world_size
    warn_of_a_shared_rendezvous_store()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", 0))
    local_workers = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    start_rank_process(run, rank, world_size, local_rank, local_workers, "env://")
    job = prepared.data(range(rank - local_rank, rank - local_rank + local_workers), under_torchrun=True)
    with worker_errors_recorded(run, rank):
        return run_rank(fn, run, job, prepared.layout, rank, world_size, local_rank, local_workers, "env://")


def _spawn(prepared: PreparedJob, fn: WorkerFn) -> None:
    """The job's workers spawned on this machine, once its data is loaded here, with the launcher
    holding the job's W&B run; returns when they all completed."""
    run, world_size, resume = prepared.run, prepared.world_size, prepared.resume
    job = prepared.data(range(world_size), under_torchrun=False)
    reached("data-loaded")
    cores = len(os.sched_getaffinity(0))
    if world_size > OVERSUBSCRIPTION * cores:
        warn(f"{world_size} workers on {cores} cores (more than {OVERSUBSCRIPTION} per core): epochs will be slow "
             "and their times say little about the method")
    with interrupts_deferred():
        run, follower = follow_in_launcher(run, resume.manifest.get("wandb_id") if resume else None,
                                           resume.epoch + 1 if resume else 1)
    reached("wandb")
    with closed_after(follower.finish if follower is not None else None), worker_errors_recorded(run, None):
        spawn_and_join(fn, run, job, prepared.layout, world_size, follower)


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
