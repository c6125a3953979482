"""Starting one rank of a job in this process: threads, memory, device, process group, device
mesh and, under the virtual clock, the rank's clock and links, then the worker function
(:func:`run_rank`)."""

from __future__ import annotations

import atexit
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, TypeVar

import torch
import torch.distributed as dist

from gnntrain.job.launch.allocator import keep_freed_memory
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.engine.checkpoint import Resume
from gnntrain.parallel.mesh import Layout, WorkerContext, build_mesh
from gnntrain.timing.cluster import Topology
from gnntrain.timing.virtual_rank import COMPUTE_LOCK, VirtualRank

WorkerFn = Callable[[RootConfig, WorkerContext, JobData], Any]
"""A job's work on one rank, given the typed config, the rank's context and the job's data."""


def _threads_per_worker(run: RootConfig, local_workers: int) -> int:
    if run.cluster.threads_per_worker > 0:
        return run.cluster.threads_per_worker
    if run.cluster.clock == "virtual" and run.cluster.device == "cpu":
        return 1  # a rank's virtual compute is its one thread's CPU time (gnntrain.timing.virtual_clock)
    return max(1, len(os.sched_getaffinity(0)) // local_workers)


def _device(run: RootConfig, local_rank: int) -> torch.device:
    if run.cluster.device == "cuda":
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        return device
    return torch.device("cpu")


def use_deterministic_kernels(on: bool) -> None:
    """``cluster.deterministic``: kernels that give the same bits every run, or the fastest ones
    (a torchrun process runs every job of a sweep, so each job sets it). cuBLAS needs a fixed
    workspace for that, set before its first use in the process; cuSPARSE's products, which
    torch's mode does not cover, are replaced by :mod:`gnntrain.data.sparse` while the mode is on.
    The mode is switched only where it changes: switching it imports torch's compiler stack
    (2 s of a worker's start on a CPU)."""
    if on:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if torch.are_deterministic_algorithms_enabled() != on:
        torch.use_deterministic_algorithms(on)
    torch.backends.cudnn.deterministic = on
    torch.backends.cudnn.benchmark = False


def start_rank_process(run: RootConfig, rank: int, world_size: int, local_rank: int, local_workers: int,
                       init_method: str) -> torch.device:
    """This process as rank ``rank``: its threads, memory, kernels and device, and the job's
    process group, created unless it exists (a torchrun process runs every job of a sweep). A
    spawned worker destroys the group at the end of a completed job (:func:`run_rank`); under
    torchrun it is kept for the next jobs and destroyed at exit: re-initialising a group against
    torchrun's store can hang. Returns the device the rank trains on."""
    torch.set_num_threads(_threads_per_worker(run, local_workers))
    if run.cluster.keep_freed_memory:
        keep_freed_memory()
    use_deterministic_kernels(run.cluster.deterministic)
    device = _device(run, local_rank)
    if not dist.is_initialized():
        backend = run.cluster.backend
        # NCCL: bound to the rank's GPU, its communicator is made now, not by whichever
        # operation comes first (a one-sided pipeline send must not be a group's first call)
        timeout = timedelta(seconds=run.cluster.timeout_s)
        dist.init_process_group(backend, rank=rank, world_size=world_size, timeout=timeout,
                                **_rendezvous(init_method, timeout),
                                **({"device_id": device} if backend == "nccl" else {}))
        if init_method == "env://":
            atexit.register(dist.destroy_process_group)
    return device


def _rendezvous(init_method: str, timeout: timedelta) -> dict:
    """How this rank meets its peers: torchrun's environment (``env://``), or, for a spawned
    job (``tcp://host:port``), as a client of the store its launcher serves
    (:func:`gnntrain.job.launch.spawn.rendezvous_store`)."""
    if not init_method.startswith("tcp://"):
        return {"init_method": init_method}
    host, _, port = init_method.removeprefix("tcp://").rpartition(":")
    return {"store": retried(lambda: dist.TCPStore(host, int(port), None, False, timeout))}


T = TypeVar("T")
TRANSIENT = "Resource temporarily unavailable"
"""What a store's connection says when the machine is short of a resource for a moment (EAGAIN:
threads, sockets under process pressure)."""
RETRIES = (0.2, 0.5, 1.0, 2.0)
"""Seconds before each new try of a transiently refused connection."""


def retried(connect: Callable[[], T]) -> T:
    """``connect()``, tried again after each of :data:`RETRIES` where it fails for a moment
    (:data:`TRANSIENT`); any other failure, or the last, propagates."""
    for pause in RETRIES:
        try:
            return connect()
        except RuntimeError as exc:
            if TRANSIENT not in str(exc):
                raise
            time.sleep(pause)
    return connect()


def _nothing_left(run: RootConfig) -> bool:
    """Whether the run resumes after its last epoch (a restart of a completed run): its trace,
    which a run starts afresh, is kept as the run that trained wrote it."""
    resume = Resume.find(run)
    return resume is not None and resume.epoch >= run.train.epochs


def run_rank(fn: WorkerFn, run: RootConfig, job: JobData, layout: Layout, rank: int, world_size: int,
              local_rank: int, local_workers: int, init_method: str) -> Any:
    """Run one rank's share of a job in this process's process group (:func:`start_rank_process`).

    A rank that fails or is stopped leaves the group as it is and its process exits, which
    closes its connections, so peers blocked in a collective with it fail at once: destroying
    the group first would wait on work that peers may never finish.
    """
    device = start_rank_process(run, rank, world_size, local_rank, local_workers, init_method)
    virtual = None
    if run.cluster.clock == "virtual":
        traced = run.cluster.trace and not _nothing_left(run)
        virtual = VirtualRank(Topology.of(run.network), rank, device, run.run_dir if traced else None,
                              Path(run.run_dir) / COMPUTE_LOCK if run.cluster.virtual_compute == "alone" else None)
    ctx = WorkerContext(rank, world_size, device, build_mesh(layout, run.cluster.backend), virtual=virtual,
                        over_network=run.network.mode == "kernel" or local_workers < world_size,
                        ranks_per_node=run.network.gpus_per_node)
    result = fn(run, ctx, job)
    if virtual is not None:
        virtual.clock.pause()
    dist.barrier()  # no rank tears its connections down while a peer still uses them
    if init_method != "env://":
        dist.destroy_process_group()
    return result
