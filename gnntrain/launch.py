"""Start the workers of a job: spawn them on this machine, or join a ``torchrun`` world.

Before any worker starts, the strategy states the process and data layout it needs
(:meth:`gnntrain.strategies.base.Strategy.layout`): the device-mesh axes, checked against the
number of workers, and the number of graph partitions. Each rank builds the mesh after joining
the process group.

* local (no ``RANK``/``WORLD_SIZE`` in the environment): the parent loads the dataset and
  partition once (only the manifest where the ranks load their parts), then starts
  ``world_size`` processes with ``torch.multiprocessing`` (spawn), which receive the tensors
  through shared memory. If any worker dies, the others are
  terminated at once and :class:`WorkerFailed` names the rank; on Ctrl-C or SIGTERM
  (:class:`JobInterrupted` from the CLI's signal handler), or any other exception in the
  launcher, the workers are terminated too; a launcher killed outright (SIGKILL) takes its
  workers with it (Linux). No process outlives the job. The launcher keeps the job's W&B run
  (:class:`~gnntrain.engine.metrics.WandbFollower`), so it is finished whatever the workers'
  fate.
* torchrun: this process is one rank of the world torchrun set up (``env://``); it prepares
  the (cached) data itself and runs its share, in one process group kept for every job of a
  sweep. torchrun handles failures across nodes. A submitit job of several tasks (SLURM) joins
  the same way, its tasks being the ranks (:func:`adopt_submitit_tasks`).
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import pickle
import signal
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gnntrain.allocator import keep_freed_memory
from gnntrain.comm.network import EmulatedNetwork
from gnntrain.data import JobData, prepare_job_data
from gnntrain.engine.checkpoint import Resume
from gnntrain.engine.metrics import WandbFollower, WandbSink
from gnntrain.errors import ConfigError, WorkerFailed, interrupt, interrupts_deferred, warn
from gnntrain.parallel.mesh import Layout, WorkerContext, build_mesh
from gnntrain.strategies import loads_parts, strategy_class

WorkerFn = Callable[[dict, WorkerContext, JobData], Any]

PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when its parent dies."""

OVERSUBSCRIPTION = 4
"""Local workers per core above which a job is warned about."""

FOLLOW_EVERY_S = 0.5
"""How often the launcher passes rank 0's new epochs on to the W&B run."""

# torch logs each worker it terminates after a failure; the failure is reported in one line here.
logging.getLogger("torch.multiprocessing.spawn").setLevel(logging.ERROR)


def under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def leave_torchrun_world() -> None:
    """End a torchrun worker whose jobs all completed: wait for every rank, destroy the process
    group, flush and exit at once. Exiting the usual way runs C++ static destructors while the
    gloo groups Python still holds (each job's device mesh keeps its own) have threads running,
    which aborted about one worker exit in 25 here ("terminate called without an active
    exception") after every job had written its results."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def adopt_submitit_tasks() -> None:
    """In a submitit job of several tasks (``hydra/launcher=submitit_slurm`` with
    ``tasks_per_node``: SLURM starts one task per GPU on each node), make each task one rank of
    the job's world, as torchrun's workers are: submitit exports ``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` from the job's environment. A job of
    one task spawns its workers as on a workstation."""
    if "SUBMITIT_EXECUTOR" not in os.environ or under_torchrun():
        return
    import submitit

    if submitit.JobEnvironment().num_tasks > 1:
        submitit.helpers.TorchDistributedEnvironment().export()


def resolve_world_size(cfg: dict) -> int:
    """The number of workers: torchrun's world, all visible GPUs (``world_size: 0`` on
    ``cluster.device=cuda``), or ``cluster.world_size``; checks that the device and backend
    can run them."""
    cluster = cfg["cluster"]
    gpus = torch.cuda.device_count() if cluster["device"] == "cuda" else 0
    if cluster["device"] == "cuda" and gpus == 0:
        raise ConfigError(f"cluster.device=cuda (cluster={cluster['name']}) but no CUDA GPU is visible; "
                          "valid here: cluster.device=cpu (cluster=local)")
    if cluster["backend"] == "nccl" and cluster["device"] != "cuda":
        raise ConfigError(f"cluster.backend=nccl needs cluster.device=cuda, got cluster.device={cluster['device']}; "
                          "valid on cpu: cluster.backend=gloo")
    if under_torchrun():
        return int(os.environ["WORLD_SIZE"])
    world_size = cluster["world_size"] or gpus
    if world_size < 1:
        raise ConfigError(f"cluster.world_size={cluster['world_size']} must be >= 1 for cluster={cluster['name']}")
    if cluster["backend"] == "nccl" and world_size > gpus:
        raise ConfigError(f"cluster.world_size={world_size} exceeds the {gpus} visible GPUs: NCCL needs one GPU "
                          "per worker (cluster.backend=gloo lets workers share a GPU)")
    return world_size


def _threads_per_worker(cfg: dict, local_workers: int) -> int:
    if cfg["cluster"]["threads_per_worker"] > 0:
        return cfg["cluster"]["threads_per_worker"]
    return max(1, len(os.sched_getaffinity(0)) // local_workers)


def _device(cfg: dict, local_rank: int) -> torch.device:
    if cfg["cluster"]["device"] == "cuda":
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def _run_rank(fn: WorkerFn, cfg: dict, job: JobData, layout: Layout, rank: int, world_size: int,
              local_rank: int, local_workers: int, init_method: str) -> Any:
    """Run one rank's share of a job in this process's process group.

    A spawned worker creates the group and destroys it at the end of a completed job. A rank
    that fails or is stopped leaves the group as it is and its process exits, which closes its
    connections, so peers blocked in a collective with it fail at once: destroying the group
    first would wait on work that peers may never finish. Under torchrun the group is created
    by the first job and kept for the next jobs of a sweep (the same processes run them all):
    re-initialising a group against torchrun's store can hang. It is destroyed at exit.
    """
    torch.set_num_threads(_threads_per_worker(cfg, local_workers))
    if cfg["cluster"]["keep_freed_memory"]:
        keep_freed_memory()
    device = _device(cfg, local_rank)
    keep_group = init_method == "env://"
    if not dist.is_initialized():
        dist.init_process_group(cfg["cluster"]["backend"], init_method=init_method, rank=rank,
                                world_size=world_size, timeout=timedelta(seconds=cfg["cluster"]["timeout_s"]))
        if keep_group:
            atexit.register(dist.destroy_process_group)
    ctx = WorkerContext(rank, world_size, device, build_mesh(layout, cfg["cluster"]["backend"]),
                        EmulatedNetwork.from_config(cfg["network"], rank))
    result = fn(cfg, ctx, job)
    dist.barrier()  # no rank tears its connections down while a peer still uses them
    if not keep_group:
        dist.destroy_process_group()
    return result


def _stop_with_the_launcher(launcher: int) -> None:
    """Linux: the kernel sends this worker SIGTERM when the launcher dies, even of SIGKILL (the
    OOM killer, ``kill -9``), which the launcher cannot pass on; the worker then stops as when
    the launcher stops it. torch's spawn asks for SIGINT, which a worker ignores (Ctrl-C is the
    launcher's to handle); workers orphaned that way have kept training. Elsewhere a no-op."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != launcher:  # it died before the request
        os.kill(os.getpid(), signal.SIGTERM)


def _spawned(local_rank: int, fn: WorkerFn, cfg: dict, job: JobData, layout: Layout, world_size: int,
             init_method: str, launcher: int, failed_at: Any) -> None:
    """A spawned worker. After an orderly finish (results written, process group destroyed)
    it leaves without interpreter finalization: we have seen gloo's C++ threads abort a
    finished worker's shutdown (``std::terminate``) on a loaded machine, turning a complete
    run into a failed job.

    Ctrl-C is the launcher's to handle: it stops the workers with SIGTERM, which a worker turns
    into :class:`JobInterrupted`, so rank 0's sinks close within the launcher's grace period
    (the W&B run is the launcher's); it then leaves as a finished worker does, without
    finalization, whatever error the stop caused (e.g. a peer's closed connection). A worker
    that fails stamps the time in ``failed_at[local_rank]``, so the launcher names the first;
    a stop that reaches it while it exits ends it at once, with no traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _stop_with_the_launcher(launcher)
    stopped: list[int] = []

    def stop(signum: int, frame: object) -> None:
        # once: a second SIGTERM (the launcher's, after the group's) must not cut the sinks' closing short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stopped.append(signum)
        interrupt(signum, frame)

    signal.signal(signal.SIGTERM, stop)
    try:
        _run_rank(fn, cfg, job, layout, local_rank, world_size, local_rank, world_size, init_method)
    except Exception:
        if not stopped:  # a real failure: the launcher reports the earliest
            failed_at[local_rank] = time.monotonic()
            # the launcher's stop may come while the failing worker exits: it then leaves at once, quietly
            signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(128 + signum))
            raise
        # stopped (the error may be a peer's closed connection that came first): sinks are closed
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + stopped[0] if stopped else 0)


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _warn_of_a_shared_rendezvous_store() -> None:
    """torchrun shares its rendezvous store with the workers by default; a group it restarts
    then may read the previous group's addresses from it and fail to connect (pytorch issue
    135712). Rank 0 says so where restarts are allowed."""
    restarts = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0"))
    if restarts and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and os.environ["RANK"] == "0":
        warn(f"torchrun may restart this job ({restarts} restarts) but shares its rendezvous store with the workers, "
             "so a restarted group can fail to connect; start torchrun with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1")


def job_layout(cfg: dict, world_size: int) -> Layout:
    """The strategy's layout on ``world_size`` workers; ``partition.parts``, when set, must be
    the number of parts it needs."""
    name = cfg["strategy"]["name"]
    layout = strategy_class(name).layout(cfg, world_size)
    layout.check(world_size, name)
    parts = cfg["partition"]["parts"]
    if parts is not None and parts != layout.parts:
        raise ConfigError(f"partition.parts={parts} does not fit strategy={name} on the number of workers "
                          f"({world_size}); valid: {layout.parts} (or leave it unset)")
    return layout


def launch(cfg: dict, fn: WorkerFn) -> Any:
    """Run ``fn(cfg, ctx, job)`` on every rank; returns rank 0's result in the torchrun case
    (the spawned workers' results stay in their processes: they write to the run dir)."""
    adopt_submitit_tasks()
    world_size = resolve_world_size(cfg)
    layout = job_layout(cfg, world_size)
    resume = Resume.find(cfg)
    if resume is not None:
        resume.check(cfg, world_size)
    job = prepare_job_data(cfg, layout.parts, layout.parts_key, loads_parts(cfg["strategy"]["name"]))
    if under_torchrun():
        _warn_of_a_shared_rendezvous_store()
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        local_workers = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        return _run_rank(fn, cfg, job, layout, int(os.environ["RANK"]), world_size, local_rank, local_workers,
                         "env://")
    cores = len(os.sched_getaffinity(0))
    if world_size > OVERSUBSCRIPTION * cores:
        warn(f"{world_size} workers on {cores} cores (more than {OVERSUBSCRIPTION} per core): epochs will be slow "
             "and their times say little about the method")
    follower = None
    if cfg["wandb"]["mode"] != "disabled":
        with interrupts_deferred():
            sink = WandbSink(cfg, Path(cfg["run_dir"]), resume.manifest["wandb_id"] if resume else None)
        follower = WandbFollower(sink, Path(cfg["run_dir"]), resume.epoch + 1 if resume else 1)
        cfg = {**cfg, "wandb": {**cfg["wandb"], "run": sink.identity()}}
    exit_code = 1
    try:
        _spawn_and_join(fn, cfg, job, layout, world_size, follower)
        exit_code = 0
    finally:
        if follower is not None:
            with interrupts_deferred():
                follower.finish(exit_code)
    return None


def _spawn_and_join(fn: WorkerFn, cfg: dict, job: JobData, layout: Layout, world_size: int,
                    follower: WandbFollower | None) -> None:
    """Start the workers and wait for them, passing rank 0's epochs on to the W&B run; the
    first worker to fail takes the others down."""
    addr = cfg["cluster"]["master_addr"]
    port = cfg["cluster"]["master_port"] or _free_port(addr)
    failed_at = mp.get_context("spawn").Array("d", world_size, lock=False)
    context = mp.start_processes(_spawned, nprocs=world_size, join=False, start_method="spawn",
                                 args=(fn, cfg, job, layout, world_size, f"tcp://{addr}:{port}", os.getpid(),
                                       failed_at))
    try:
        while not context.join(FOLLOW_EVERY_S):
            if follower is not None:
                with interrupts_deferred():
                    follower.poll()
    except mp.ProcessRaisedException as exc:
        rank, trace = _first_failure(failed_at, context.error_files, exc)
        last = trace.strip().splitlines()[-1]
        raise WorkerFailed(f"worker rank {rank} failed: {last}") from None
    except mp.ProcessExitedException as exc:
        raise WorkerFailed(f"worker rank {exc.error_index} died (exit code {exc.exit_code}); "
                           f"the other workers were stopped") from None
    except BaseException:  # JobInterrupted from the CLI's signal handler, among others
        _stop(context.processes)
        raise


def _first_failure(failed_at: Any, error_files: list[str], exc: mp.ProcessRaisedException) -> tuple[int, str]:
    """The rank that failed first and its traceback.

    The exception torch raises names whichever failed worker it noticed first, often a peer
    whose collective broke because the real culprit had exited ("Connection closed by peer").
    Each failing worker stamps the system-wide monotonic clock in ``failed_at`` before it
    exits, and its peers notice the exit only after, so the earliest stamp is the cause."""
    stamped = [(at, rank) for rank, at in enumerate(failed_at[:]) if at > 0 and os.path.isfile(error_files[rank])]
    if not stamped:
        return exc.error_index, str(exc)
    rank = min(stamped)[1]
    with open(error_files[rank], "rb") as fh:
        return rank, pickle.load(fh)


def _stop(workers: list, grace_s: float = 5.0) -> None:
    """Terminate the workers (SIGTERM), then kill those still alive after ``grace_s``."""
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    deadline = time.monotonic() + grace_s
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join()
