"""Files written so that no reader ever sees a partial one."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import BinaryIO, Callable

from gnntrain.errors import DiskFull, FileTooLarge, is_disk_full, is_too_large


def write_atomically(path: Path, content: str | Callable[[BinaryIO], object]) -> None:
    """Write ``path`` (``content`` as UTF-8 text, or what ``content(file)`` writes) to a
    temporary file beside it, fsync it, and rename it over ``path``: a reader finds the old file
    or the whole new one, and concurrent writers of the same path (every rank under torchrun)
    each rename a whole file. A full filesystem raises :class:`~gnntrain.errors.DiskFull`
    naming ``path``."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")  # unique, mode from the umask
    written = 0
    try:
        with open(tmp, "wb") as f:
            if isinstance(content, str):
                f.write(content.encode())
            else:
                content(f)
            written = f.tell()
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        written = written or (tmp.stat().st_size if tmp.exists() else 0)
        tmp.unlink(missing_ok=True)
        if is_disk_full(exc) or is_disk_full(exc.__context__ or exc):
            raise DiskFull(path, written) from None
        if is_too_large(exc) or is_too_large(exc.__context__ or exc):
            raise FileTooLarge(path, written) from None
        raise
