"""Joining a world another launcher started: ``torchrun``'s workers (``RANK``/``WORLD_SIZE`` in
the environment, ``env://``), and the tasks of a submitit job, which become ranks the same way.
torchrun handles failures across nodes; the process group is kept for every job of a sweep and
left once at the end (:func:`leave_torchrun_world`)."""

from __future__ import annotations

import os
import sys

from gnntrain.errors import warn

def under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ

def leave_torchrun_world() -> None:
    """End a torchrun worker whose jobs all completed: wait for every rank, destroy the process
    group, flush and exit at once. Exiting the usual way runs C++ static destructors while the
    gloo groups Python still holds (each job's device mesh keeps its own) have threads running,
    which aborted about one worker exit in 25 here ("terminate called without an active
    exception") after every job had written its results."""
    import torch.distributed as dist  # joining a world needs no torch: the CLI asks before importing it

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

def warn_of_a_shared_rendezvous_store() -> None:
    """torchrun shares its rendezvous store with the workers by default; a group it restarts
    then may read the previous group's addresses from it and fail to connect (pytorch issue
    135712). Rank 0 says so where restarts are allowed."""
    restarts = int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0"))
    if restarts and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and os.environ["RANK"] == "0":
        warn(f"torchrun may restart this job ({restarts} restarts) but shares its rendezvous store with the workers, "
             "so a restarted group can fail to connect; start torchrun with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1")
