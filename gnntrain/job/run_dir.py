"""A run dir belongs to one run at a time.

A job holds an exclusive lock (``flock``) on ``<run dir>/.gnntrain.lock`` while it runs, the
file naming the holder (process, host, start); a lock file, ``.hydra`` or a file the job writes
(:func:`written`), or a checkpoint's folder, that is a symbolic link is refused, not written
through, and nothing is recorded in the dir (files inside are written beside their path and renamed
over it, so a link there is replaced). A second job into the same dir is refused in one
line naming the running one, before it writes anything there. The kernel releases the lock of
a process however it ends; a lock file that still names a holder when the next job takes it was
left by a job that ended without finishing, and the next job says so and takes it over.

Hydra writes ``.hydra/`` (the composed config, Hydra's own, the overrides) before the job's
function runs, which would overwrite a running job's; gnntrain sets ``hydra.output_subdir`` to
null and writes the same files itself once the lock is held (:func:`write_hydra_files`).
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gnntrain.errors import GnntrainError, disk_full_named, warn
from gnntrain.storage.files import write_atomically

LOCK_FILE = ".gnntrain.lock"
HYDRA_FILES = ".hydra"


class RunDirRefused(GnntrainError):
    """The run dir cannot be this job's; nothing is recorded in it."""


class RunDirBusy(RunDirRefused):
    """Another running job holds the run dir; nothing of it was touched."""


def written() -> tuple[str, ...]:
    """What a job writes at the run dir's top level besides its lock and ``.hydra``: one of them
    that is a symbolic link is refused before the job writes anything (:func:`owned`). Named by the
    modules that write them, imported here only when a job takes its dir (they import torch, which
    a refusal of bad input before then does without)."""
    from gnntrain.engine.recorder import ERROR_FILE
    from gnntrain.engine.summary import SUMMARY_FILE
    from gnntrain.timing.trace import TRACE_FILE
    from gnntrain.timing.virtual_rank import COMPUTE_LOCK

    return "metrics.jsonl", SUMMARY_FILE, ERROR_FILE, TRACE_FILE, COMPUTE_LOCK, CHECKPOINTS, "wandb"


CHECKPOINTS = "checkpoints"
"""The checkpoints' folder: its epochs' folders are written into (and resumed from) as well."""


def _refuse_link(run_dir: Path, name: str, what: str) -> None:
    path = run_dir / name
    if path.is_symlink():
        raise RunDirRefused(f"run dir {run_dir}: {name} is a symbolic link (to {os.readlink(path)}), which {what} "
                            "would be written through; remove it, or give this run a dir of its own")


@contextmanager
def owned(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for the duration (module docstring)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        _refuse_link(run_dir, LOCK_FILE, "the job's lock")
        raise exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = path.read_text().strip() or "a job starting"
            raise RunDirBusy(f"run dir {run_dir} is in use by a running gnntrain job ({holder}); give this run a dir "
                             "of its own: hydra.run.dir=<dir> (hydra.sweep.dir=<dir> in a sweep)") from None
        for name in written():
            _refuse_link(run_dir, name, "the run's records")
        for epoch in sorted((run_dir / CHECKPOINTS).glob("*")):
            _refuse_link(run_dir, str(epoch.relative_to(run_dir)), "a checkpoint")
        left = os.read(fd, 1024).decode(errors="replace").strip()
        if left:
            warn(f"run dir {run_dir} was held by a job that ended without finishing ({left}); this run takes it over")
        _write(fd, path, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}")
        try:
            yield
        finally:
            _write(fd, path, "")
    finally:
        os.close(fd)  # releases the lock


def _write(fd: int, path: Path, text: str) -> None:
    os.ftruncate(fd, 0)
    with disk_full_named(path):
        os.pwrite(fd, text.encode(), 0)


def write_hydra_files(run_dir: Path, task_cfg: DictConfig, hydra_cfg: DictConfig) -> None:
    """``.hydra/config.yaml``, ``hydra.yaml`` and ``overrides.yaml``, as Hydra writes them."""
    folder = run_dir / HYDRA_FILES
    _refuse_link(run_dir, HYDRA_FILES, "the run's config files")
    folder.mkdir(exist_ok=True)
    for name, content in (("config.yaml", task_cfg), ("hydra.yaml", OmegaConf.create({"hydra": hydra_cfg})),
                          ("overrides.yaml", hydra_cfg.overrides.task)):
        write_atomically(folder / name, OmegaConf.to_yaml(content))
