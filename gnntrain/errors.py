"""Exceptions that the command line reports as a single line and a non-zero exit, and the
one-line warnings it prints and goes on."""

import errno
import resource
import shutil
import signal
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path


class GnntrainError(Exception):
    """A user-facing error: bad input, a missing file, an impossible setting."""


class ConfigError(GnntrainError):
    """A config value that is well-typed but not allowed (e.g. ``model.layers=0``)."""


class DatasetUnavailable(GnntrainError):
    """A dataset whose files are absent and cannot be downloaded here."""


class WorkerFailed(GnntrainError):
    """A worker process of a distributed job died; the job was taken down. ``trace`` is the
    failing worker's traceback where it raised (empty where it died without one, e.g. killed)."""

    def __init__(self, message: str, rank: int | None = None, trace: str = "") -> None:
        super().__init__(message)
        self.rank = rank
        self.trace = trace

    @classmethod
    def raised(cls, rank: int, trace: str) -> "WorkerFailed":
        """Worker ``rank`` raised: its traceback, and the exception's line in the message (a
        gnntrain error's own line, which says what to do, without its class's module)."""
        last = trace.strip().splitlines()[-1]
        return cls(f"worker rank {rank} failed: {last.removeprefix(USER_ERROR_PREFIX)}", rank, trace)

    @property
    def by_user_error(self) -> bool:
        """The worker raised a :class:`GnntrainError`: its line says it all, no traceback needed."""
        return bool(self.trace) and self.trace.strip().splitlines()[-1].startswith(USER_ERROR_PREFIX)


class DiskFull(GnntrainError):
    """A file of the run could not be written: its filesystem is full. Nothing partly written
    is left under the file's name (:func:`gnntrain.storage.files.write_atomically`)."""

    PHRASE = "no space left to write"
    """How its line begins, and a worker's line that carries it reads."""

    def __init__(self, path: object, written: int) -> None:
        super().__init__(f"{self.PHRASE} {path} ({written} bytes written, {free_bytes(path)} bytes free "
                         "there); free space on that filesystem, then train.resume=true continues from the last "
                         "complete checkpoint")


def free_bytes(path: object) -> int:
    """Bytes free on the filesystem of ``path`` (of its nearest existing folder)."""
    folder = Path(str(path))
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return shutil.disk_usage(folder).free


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class FileTooLarge(GnntrainError):
    """A file of the run could not be written: it would pass this process's file-size limit
    (``ulimit -f``). Nothing partly written is left under the file's name."""

    def __init__(self, path: object, written: int) -> None:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        super().__init__(f"cannot write {path}: it would pass this process's file-size limit ({limit} bytes, "
                         f"ulimit -f; {written} bytes written); raise the limit (ulimit -f unlimited), then "
                         "train.resume=true continues from the last complete checkpoint")


def is_too_large(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno == errno.EFBIG


@contextmanager
def disk_full_named(path: object) -> Iterator[None]:
    """A full filesystem met inside raises :class:`DiskFull` naming ``path``."""
    try:
        yield
    except OSError as exc:
        if is_too_large(exc):
            raise FileTooLarge(path, 0) from None
        if not is_disk_full(exc):
            raise
        raise DiskFull(path, 0) from None


USER_ERROR_PREFIX = f"{__name__}."
"""How a worker's traceback names a :class:`GnntrainError` it raised (``gnntrain.errors.DiskFull:``)."""


class JobInterrupted(GnntrainError):
    """The job was stopped by a signal (Ctrl-C, a scheduler's SIGTERM); its workers were stopped."""

    def __init__(self, signum: int | str) -> None:
        """``signum``, or the message of one that a library caught and raised again as a new
        exception of its type built from its text (OmegaConf does), which starts with ours."""
        self.signum = signum if isinstance(signum, int) else signal.Signals[signum.split()[2]].value
        super().__init__(f"interrupted by {signal.Signals(self.signum).name}")


class _Deferral:
    """How deep the main thread is in :func:`interrupts_deferred` sections, and the signal that
    arrived there."""

    depth = 0
    pending: int | None = None


def interrupt(signum: int, frame: object) -> None:
    """A signal handler: raise :class:`JobInterrupted` where the main thread is, or, inside
    :func:`interrupts_deferred`, where it leaves that section."""
    if _Deferral.depth:
        _Deferral.pending = signum
        return
    raise JobInterrupted(signum)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """A section that :func:`interrupt` does not cut short: code that talks to another process
    or writes a file (a W&B call, a checkpoint) runs to its end, and a stop that came meanwhile is
    raised after it. An exception raised inside an interrupt is not safe for such code: one
    landing in a W&B call has left its run unable to finish."""
    _Deferral.depth += 1
    try:
        yield
    finally:
        _Deferral.depth -= 1
        if _Deferral.depth == 0 and _Deferral.pending is not None:
            signum, _Deferral.pending = _Deferral.pending, None
            raise JobInterrupted(signum)  # also in place of an error the section raised meanwhile


class _Held:
    """The section :func:`hold_stops` opened, while it is open."""

    section: ExitStack | None = None


def hold_stops() -> None:
    """Hold stop signals from now until :func:`release_stops` (an :func:`interrupts_deferred`
    section with no ``with``): a command's start, where a stop raised would cut an import short,
    and the time between a sweep's jobs, where Hydra would take it for a failed job's error and
    go on. Nothing where they are held already."""
    if _Held.section is None:
        _Held.section = ExitStack()
        _Held.section.enter_context(interrupts_deferred())


def release_stops() -> None:
    """End the section :func:`hold_stops` opened: a stop held meanwhile is raised here
    (:class:`JobInterrupted`). Nothing where none is open."""
    section, _Held.section = _Held.section, None
    if section is not None:
        section.close()


def first_line(exc: BaseException) -> str:
    """An exception's first message line (its type's name when it has none)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def warn(message: str) -> None:
    """A one-line warning on stderr: something the user should know, the job goes on."""
    print(f"gnntrain: warning: {message}", file=sys.stderr, flush=True)


@contextmanager
def command_errors(prog: str) -> Iterator[None]:
    """A command's body: a gnntrain error, or a file that cannot be read or written (an unwritable
    output, a full disk), ends it with one line on stderr naming ``prog``, and exit status 2."""
    try:
        yield
    except GnntrainError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:
        print(f"{prog}: error: {exc.strerror or first_line(exc)}: {exc.filename}", file=sys.stderr)
        sys.exit(2)
