"""Temporary folders named by the process that made them: ``<prefix><pid>-<random>``.

A process killed outright (SIGKILL, the OOM killer) runs no clean-up, so the folders it made
stay. Named by its pid, such a folder is recognisably nobody's once that process is gone, and
the next process to make a folder of the same kind in the same place removes it. A pid reused
meanwhile only delays that until the new process ends."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def make_process_folder(parent: Path, prefix: str) -> Path:
    """A new folder ``<prefix><this pid>-<random>`` in ``parent`` (mode 0700, as ``mkdtemp``
    makes it), after removing the folders of that kind whose process is gone."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_dead_process_folders(parent, prefix)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))


def remove_dead_process_folders(parent: Path, prefix: str) -> None:
    """Remove the folders ``<prefix><pid>-*`` in ``parent`` whose process ``pid`` is gone."""
    for folder in parent.glob(f"{prefix}*-*"):
        pid = folder.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
