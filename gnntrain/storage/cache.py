"""The cache folder (``partition.cache_dir``), private to its user.

Later runs read back what earlier ones left there (partitions, part files, PyG's processed
files, link calibrations, locks), so nobody else may write into it. Each folder of the cache
this process makes is created private to the user (mode 0700), one of the user's own that is
looser is narrowed to that, and a folder owned by another user, or that others may write to,
is refused in one line naming it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gnntrain.errors import ConfigError

PRIVATE = 0o700


def cache_folder(cache_dir: str | Path, *parts: str) -> Path:
    """``<cache_dir>/<parts...>``, every level from ``cache_dir`` down made private to this
    user (module docstring)."""
    level = Path(cache_dir).expanduser()
    level.mkdir(mode=PRIVATE, parents=True, exist_ok=True)
    _own(level)
    for part in parts:
        level = level / part
        level.mkdir(mode=PRIVATE, exist_ok=True)
        _own(level)
    return level


def _own(folder: Path) -> None:
    info = folder.stat()
    if info.st_uid != os.getuid():
        raise ConfigError(f"partition.cache_dir: {folder} belongs to user id {info.st_uid}, not to this user "
                          f"({os.getuid()}); a cache gnntrain reads back must be yours alone: set partition.cache_dir "
                          "to a folder of your own")
    if stat.S_IMODE(info.st_mode) != PRIVATE:
        os.chmod(folder, PRIVATE)
