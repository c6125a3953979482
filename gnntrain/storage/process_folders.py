"""Temporary folders of one process each: ``<prefix><pid>-<random>``, holding a lock while their
process lives.

A process killed outright (SIGKILL, the OOM killer) runs no clean-up, so the folders it made
stay. Each folder holds a file, :data:`ALIVE`, that its process keeps locked (``flock``) while it
lives; the kernel drops the lock however the process ends. The next process to make a folder of
the same kind in the same place removes those whose lock it can take: whoever made them is gone,
in any PID namespace sharing the filesystem (a container's ``/tmp`` mounted in another, where a
pid says nothing). Only folders of exactly that name's shape, owned by this user and holding the
lock file, are candidates; the pid in the name is for people reading the folder."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
from pathlib import Path

ALIVE = ".alive"
"""The lock file in each folder, locked by its process while it lives."""

_HELD: dict[Path, int] = {}
"""This process's folders and the descriptors that hold their locks."""


def make_process_folder(parent: Path, prefix: str) -> Path:
    """A new folder ``<prefix><this pid>-<random>`` in ``parent`` (mode 0700, as ``mkdtemp``
    makes it), locked for this process's life (or until :func:`remove_process_folder`), after
    removing the folders of that kind whose process is gone."""
    parent.mkdir(parents=True, exist_ok=True)
    remove_dead_process_folders(parent, prefix)
    folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))
    fd = os.open(folder / ALIVE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    _HELD[folder] = fd
    return folder


def remove_process_folder(folder: Path) -> None:
    """Remove a folder of this process's and release its lock."""
    shutil.rmtree(folder, ignore_errors=True)
    fd = _HELD.pop(folder, None)
    if fd is not None:
        os.close(fd)


def remove_dead_process_folders(parent: Path, prefix: str) -> None:
    """Remove the folders ``<prefix><pid>-<random>`` in ``parent`` that are this user's and whose
    lock is free (module docstring)."""
    shape = re.compile(rf"{re.escape(prefix)}\d+-[a-z0-9_]{{8}}")
    for folder in parent.glob(f"{prefix}*-*"):
        if not shape.fullmatch(folder.name) or folder.is_symlink() or folder in _HELD:
            continue
        try:
            if folder.stat().st_uid != os.getuid():
                continue
            fd = os.open(folder / ALIVE, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:  # gone meanwhile, or no lock file: not a folder of this kind, or one being made
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # its process lives
        finally:
            os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)
