"""Files written so that no reader ever sees a partial one, and never through a link planted
where they go; files read only where they are regular files (a FIFO would block the reader, a
device feed it without end)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any, BinaryIO, Callable

from gnntrain.errors import ConfigError, DiskFull, FileTooLarge, is_disk_full, is_too_large

FIGURE_FORMATS = ("png", "pdf", "svg")


def write_atomically(path: Path, content: str | Callable[[BinaryIO], object]) -> None:
    """Write ``path`` (``content`` as UTF-8 text, or what ``content(file)`` writes) to a
    temporary file beside it, fsync it, and rename it over ``path``: a reader finds the old file
    or the whole new one, and concurrent writers of the same path (every rank under torchrun)
    each rename a whole file. A full filesystem raises :class:`~gnntrain.errors.DiskFull`
    naming ``path``; an existing ``path`` that is neither a regular file nor a link (a device, a
    FIFO, a folder) is refused in one line, not replaced."""
    if path.exists() and not path.is_symlink() and not path.is_file():
        raise ConfigError(f"{path} is not a regular file; valid: a regular file or a new path")
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


def figure_format(path: Path) -> str:
    """The format a figure written to ``path`` takes from its suffix (PNG where it names none);
    another suffix refused in one line, so that a command can check it before its work."""
    fmt = path.suffix[1:].lower() or "png"
    if fmt not in FIGURE_FORMATS:
        raise ConfigError(f"figure {path}: format {fmt!r}; valid: {', '.join(FIGURE_FORMATS)} (or no suffix: png)")
    return fmt


def save_figure(figure: Any, path: Path, **savefig: Any) -> None:
    """Write a matplotlib ``figure`` to ``path`` as :func:`write_atomically` writes (a link at
    ``path`` is replaced, not followed) in :func:`figure_format`'s format, to ``path`` itself
    (not to ``path.png``), its bounding box fitted to what it draws (``bbox_inches="tight"``,
    unless ``savefig`` says otherwise), so that no title, label or bar is cut at an edge."""
    fmt = figure_format(path)
    options = {"bbox_inches": "tight", **savefig}
    write_atomically(path, lambda f: figure.savefig(f, format=fmt, **options))


def open_regular(path: Path, follow_links: bool = True) -> BinaryIO:
    """``path`` opened for reading in binary, without waiting on a FIFO; ValueError where it is
    not a regular file (a FIFO, a device, a folder), OSError where it cannot be opened (a link,
    without ``follow_links``)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path} is not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_text_checked(path: Path, limit: int) -> str:
    """A regular file's UTF-8 text (:func:`open_regular`); ValueError where it holds more than
    ``limit`` bytes or is not UTF-8."""
    with open_regular(path) as fh:
        raw = fh.read(limit + 1)
    if len(raw) > limit:
        raise ValueError(f"{path} holds more than {limit} bytes")
    return raw.decode()
