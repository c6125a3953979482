"""A run dir belongs to one run at a time.

A job holds an exclusive lock (``flock``) on ``<run dir>/.gnntrain.lock`` while it runs, the
file naming the holder (process, host, start); a lock file or ``.hydra`` that is a symbolic link
is refused, not written through. A second job into the same dir is refused in one
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


class RunDirBusy(GnntrainError):
    """Another running job holds the run dir; nothing of it was touched."""


@contextmanager
def owned(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for the duration (module docstring)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if not path.is_symlink():
            raise
        raise GnntrainError(f"run dir {run_dir}: its lock file {LOCK_FILE} is a symbolic link (to {os.readlink(path)}), "
                            "which a job would write through; remove it, or give this run a dir of its own") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = path.read_text().strip() or "a job starting"
            raise RunDirBusy(f"run dir {run_dir} is in use by a running gnntrain job ({holder}); give this run a dir "
                             "of its own: hydra.run.dir=<dir> (hydra.sweep.dir=<dir> in a sweep)") from None
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
    if folder.is_symlink():
        raise GnntrainError(f"run dir {run_dir}: {HYDRA_FILES} is a symbolic link (to {os.readlink(folder)}), which the "
                            "run's config files would be written through; remove it, or give this run a dir of its own")
    folder.mkdir(exist_ok=True)
    for name, content in (("config.yaml", task_cfg), ("hydra.yaml", OmegaConf.create({"hydra": hydra_cfg})),
                          ("overrides.yaml", hydra_cfg.overrides.task)):
        write_atomically(folder / name, OmegaConf.to_yaml(content))
