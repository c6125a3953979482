"""Exceptions that the command line reports as a single line and a non-zero exit, and the
one-line warnings it prints and goes on."""

import signal
import sys


class GnntrainError(Exception):
    """A user-facing error: bad input, a missing file, an impossible setting."""


class ConfigError(GnntrainError):
    """A config value that is well-typed but not allowed (e.g. ``model.layers=0``)."""


class DatasetUnavailable(GnntrainError):
    """A dataset whose files are absent and cannot be downloaded here."""


class WorkerFailed(GnntrainError):
    """A worker process of a distributed job died; the job was taken down."""


class JobInterrupted(GnntrainError):
    """The job was stopped by a signal (Ctrl-C, a scheduler's SIGTERM); its workers were stopped."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


def interrupt(signum: int, frame: object) -> None:
    """A signal handler: raise :class:`JobInterrupted` where the main thread is."""
    raise JobInterrupted(signum)


def first_line(exc: BaseException) -> str:
    """An exception's first message line (its type's name when it has none)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def warn(message: str) -> None:
    """A one-line warning on stderr: something the user should know, the job goes on."""
    print(f"gnntrain: warning: {message}", file=sys.stderr, flush=True)
