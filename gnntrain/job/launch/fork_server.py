"""The fork server a launcher's workers are forked from (:mod:`.spawn`).

A spawned interpreter spends 2-4 s importing torch and, through Adam's constructor, torch's
compiler front end before a worker does anything, per worker and per job of a sweep. The fork
server imports them once (:data:`PRELOAD`) and forks each worker from itself, so the workers of
a launcher's every job (a sweep, a test session) start at once. The CLI starts it as soon as it
knows the job runs here (:func:`worker_context`), so that the server's imports overlap the
launcher's own composing, checking and data loading.

The server is a child of the launcher with the environment of the moment it started, which a
worker replaces by its launcher's at the time of its job. It starts without ``GNNTRAIN_PLUGINS``
and imports none of gnntrain: a worker imports the plugins its job names once it has its job's
environment, not those of the environment the server began with. This module imports no torch.
"""

from __future__ import annotations

import multiprocessing.forkserver
import os
from multiprocessing.context import BaseContext

from gnntrain.strategies.registry import PLUGINS_VARIABLE

PRELOAD = ("torch", "torch.distributed", "torch._dynamo")
"""What the fork server imports before it forks any worker: the imports every worker needs and
that cost the most (torch's optimizers import its compiler's front end, 1.5 s on a CPU)."""


def worker_context() -> BaseContext:
    """The multiprocessing context the workers start in: the fork server's, started now unless it
    runs already (it lives as long as the launcher)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    plugins = os.environ.pop(PLUGINS_VARIABLE, None)
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        if plugins is not None:
            os.environ[PLUGINS_VARIABLE] = plugins
    return context
