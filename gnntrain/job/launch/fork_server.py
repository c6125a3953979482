"""The fork server a launcher's workers are forked from (:mod:`.spawn`).

A spawned interpreter spends 2-4 s importing torch and, through Adam's constructor, torch's
compiler front end before a worker does anything, per worker and per job of a sweep. The fork
server imports them once (:data:`PRELOAD`) and forks each worker from itself, so the workers of
a launcher's every job (a sweep, a test session) start at once. The CLI starts it as soon as it
knows the job runs here (:func:`worker_context`), so that the server's imports overlap the
launcher's own composing, checking and data loading.

The server is a child of the launcher with the environment of the moment it started and no
output of its own (a pipe it held would keep whoever reads the launcher's output waiting for it).
A worker takes its launcher's environment and output at the time of its job instead
(:class:`Surroundings`). The server starts without ``GNNTRAIN_PLUGINS``, so it imports no plugin:
a worker imports the plugins its job names once it has its job's environment, not those of the
environment the server began with (gnntrain reads no other variable while it imports). This
module imports no torch.

Everything the launcher's workers need on disk (the server's socket, the workers' private folder
of :mod:`.spawn`) lies in one folder of the launcher's, ``gnntrain-<pid>-*`` in the temporary
directory (:func:`launcher_folder`): removed as the launcher exits, and, where it was killed
outright, by the next launcher to start (:mod:`gnntrain.storage.process_folders`).
"""

from __future__ import annotations

import functools
import multiprocessing.forkserver
import multiprocessing.util
import os
import sys
import tempfile
from dataclasses import dataclass
from multiprocessing import reduction
from multiprocessing.context import BaseContext
from pathlib import Path

from gnntrain.errors import ConfigError
from gnntrain.storage.process_folders import make_process_folder, remove_process_folder
from gnntrain.strategies.registry import PLUGINS_VARIABLE

PRELOAD = ("torch", "torch.distributed", "torch._dynamo", "gnntrain.job.launch.spawn", "gnntrain.engine.loop")
"""What the fork server imports before it forks any worker: what every worker imports (torch's
optimizers import its compiler's front end, 1.5 s on a CPU; a rank's start and the epoch loop),
and no strategy's implementation, which only its own runs load (a run lists the package files it
loaded: ``summary.json``'s ``code``)."""


CPP_LOG_VARIABLE = "TORCH_CPP_LOG_LEVEL"
"""torch's C++ log level, read once as torch is imported: the fork server imports it at ``ERROR``
(unless ``GNNTRAIN_DEBUG=1`` or the variable is set), so its workers print no C++ warnings. The
peak-memory profiler's ``CPUAllocator`` "memory block of unknown size" lines filled repro logs
(64 in one); a C++ error still prints."""


def worker_context() -> BaseContext:
    """The multiprocessing context the workers start in: the fork server's, started now unless it
    runs already (it lives as long as the launcher)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    _start_silently()
    multiprocessing.forkserver.ensure_running()  # started again where it died
    return context


LAUNCHER_PREFIX = "gnntrain-"
"""A launcher's folder in the temporary directory is ``gnntrain-<pid>-<random>``."""


@functools.cache
def launcher_folder() -> Path:
    """This launcher's folder in the temporary directory (mode 0700), made on first use, and
    multiprocessing's temporary folder (the fork server's socket is made in it): given to
    multiprocessing in place of the ``pymp-*`` folder it would make itself, through the attribute
    its ``util.get_temp_dir`` reads, so the socket's path (at most 107 bytes) is some 12 bytes
    longer than multiprocessing's own (unless this process made that folder before: then the
    socket stays there). Removed as the launcher exits."""
    folder = make_process_folder(Path(tempfile.gettempdir()), LAUNCHER_PREFIX)
    multiprocessing.util.Finalize(None, remove_process_folder, args=(folder,), exitpriority=-100)
    multiprocessing.current_process()._config.setdefault("tempdir", str(folder))
    return folder


@functools.cache
def _start_silently() -> None:
    """Start the fork server, once per launcher, with no output, without ``GNNTRAIN_PLUGINS``
    (module docstring) and with torch's C++ warnings off (:data:`CPP_LOG_VARIABLE`): the
    launcher's standard output and error point at nothing, and its environment is changed, only
    while the server is started."""
    launcher_folder()  # first: where it cannot be made, nothing below is changed
    plugins = os.environ.pop(PLUGINS_VARIABLE, None)
    quiet = os.environ.get("GNNTRAIN_DEBUG") != "1" and CPP_LOG_VARIABLE not in os.environ
    if quiet:
        os.environ[CPP_LOG_VARIABLE] = "ERROR"
    sys.stdout.flush()
    sys.stderr.flush()
    output = [os.dup(1), os.dup(2)]
    silent = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(silent, 1)
        os.dup2(silent, 2)
        multiprocessing.forkserver.ensure_running()
    except OSError as exc:
        if "too long" not in str(exc):
            raise
        raise ConfigError(f"TMPDIR={tempfile.gettempdir()}: the fork server's socket path in it is too long "
                          f"({exc}); valid: a temporary directory of at most about 60 characters") from None
    finally:
        os.dup2(output[0], 1)
        os.dup2(output[1], 2)
        for fd in (*output, silent):
            os.close(fd)
        if plugins is not None:
            os.environ[PLUGINS_VARIABLE] = plugins
        if quiet:
            del os.environ[CPP_LOG_VARIABLE]


@dataclass(frozen=True)
class Surroundings:
    """What a worker takes from its launcher when the launcher starts its job: the environment,
    and the files its standard output and error write to, passed as file descriptors of its own."""

    environment: dict[str, str]
    output_fds: tuple[int, int]

    @classmethod
    def of_this_process(cls) -> Surroundings:
        return cls(dict(os.environ), (sys.stdout.fileno(), sys.stderr.fileno()))

    def __reduce__(self) -> tuple:
        return _received, (self.environment, *(reduction.DupFd(fd) for fd in self.output_fds))

    def adopt(self) -> None:
        """In the worker: its launcher's environment and output in place of the fork server's."""
        os.environ.clear()
        os.environ.update(self.environment)
        for fd, standard in zip(self.output_fds, (1, 2)):
            os.dup2(fd, standard)
            os.close(fd)


def _received(environment: dict[str, str], stdout: reduction.DupFd, stderr: reduction.DupFd) -> Surroundings:
    """The surroundings a worker unpickles: the output files as descriptors it inherited."""
    return Surroundings(environment, (stdout.detach(), stderr.detach()))
