"""A job's data prepared once: the dataset loaded (downloaded where it must be), partitioned and,
where the strategy's ranks load one part each, cut into part files, by one process while the
others wait.

Spawned workers get their data from the launcher, which prepared it once. Under torchrun or
submitit every process is a rank and starts alike; ``cluster.prepare_data`` picks who prepares:
local rank 0 of each node (``node``, where each node caches on its own disk) or rank 0 (``job``,
where the cache is on a filesystem every node shares). The preparer holds the cache's lock for
the dataset (:func:`prepared_under_lock`), so jobs and nodes sharing one cache do the work once;
the other ranks wait in a barrier of at most ``cluster.prepare_timeout_s`` and then read what it
left: their part files, or the cached dataset and partition. A preparation that fails fails
every rank with one line naming the rank and host it failed on.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import torch.distributed as dist
from filelock import FileLock, Timeout

from gnntrain.storage.cache import cache_folder
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData, dataset_key, parted_folder, partition_spec, prepare_job_data, \
    write_partitioned_dataset
from gnntrain.data.parted import PartedDataset
from gnntrain.errors import GnntrainError, disk_full_named, first_line
from gnntrain.parallel.mesh import Layout


def prepared_under_lock(run: RootConfig, layout: Layout, loads_parts: bool, write_parts: bool) -> JobData:
    """The job's data, prepared while holding the cache's lock for its dataset (so concurrent
    jobs on one cache load, download and partition it once); with ``write_parts``, where the
    ranks load their parts and no partitioned dataset exists yet, it is written first."""
    locks = cache_folder(run.partition.cache_dir, "locks")
    path = locks / f"{dataset_key(run.dataset)}.lock"
    holder = path.with_suffix(".holder")
    try:
        with FileLock(path, timeout=run.cluster.prepare_timeout_s):
            with disk_full_named(holder):
                holder.write_text(f"pid {os.getpid()} on {socket.gethostname()}")
            if write_parts and loads_parts and not run.dataset.inductive:
                if PartedDataset.find(parted_folder(run, partition_spec(run, layout.parts))) is None:
                    write_partitioned_dataset(run, layout.parts)
            return prepare_job_data(run, layout.parts, layout.parts_key, loads_parts)
    except Timeout:
        owner = holder.read_text() if holder.exists() else "another process"
        raise GnntrainError(f"the cache lock {path} was held by {owner} for more than "
                            f"cluster.prepare_timeout_s={run.cluster.prepare_timeout_s} s") from None


def prepares(scope: str) -> bool:
    """Whether this rank prepares the data under ``cluster.prepare_data=scope``."""
    return int(os.environ.get("LOCAL_RANK", 0)) == 0 if scope == "node" else dist.get_rank() == 0


def prepared_once(run: RootConfig, layout: Layout, loads_parts: bool) -> JobData:
    """The job's data on this rank of a torchrun or submitit world (the process group exists):
    prepared here if this rank :func:`prepares`, else read once the preparers are done."""
    scope = str(run.cluster.prepare_data)
    timeout_s = run.cluster.prepare_timeout_s
    rank = dist.get_rank()
    job = error = None
    if prepares(scope):
        try:
            job = prepared_under_lock(run, layout, loads_parts, write_parts=True)
        except Exception as exc:  # noqa: BLE001 - every rank learns of it below, then this one raises it
            error = exc
    reports: list = [None] * dist.get_world_size()
    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
    try:
        dist.all_gather_object(reports, (rank, socket.gethostname(), error and first_line(error)), group=group)
    except RuntimeError as exc:
        who = "local rank 0 of each node" if scope == "node" else "rank 0"
        raise GnntrainError(f"rank {rank} waited {timeout_s} s (cluster.prepare_timeout_s) for the data preparation "
                            f"of {who} (cluster.prepare_data={scope}), which did not finish: {first_line(exc)}") from None
    finally:
        dist.destroy_process_group(group)
    if error is not None:
        raise error
    for peer, host, failure in reports:
        if failure is not None:
            raise GnntrainError(f"the data preparation failed on rank {peer} ({host}): {failure}")
    return job if job is not None else prepare_job_data(run, layout.parts, layout.parts_key, loads_parts)
