"""The launcher's start-up in named phases (and the end of each job), with a test hook at each.

A stop signal may come at any moment of a launcher's start, and whatever the moment, the launcher
is to end within seconds, say so, and leave no process or temporary folder behind. The test that
checks it (``tests/test_startup_stops.py``) cannot time a signal to land in a phase from outside,
so the launcher sends it to itself: with ``GNNTRAIN_SIGNAL_AT=<phase>[:<signal>]`` set, it sends
``<signal>`` (``SIGTERM`` by default) as it reaches ``<phase>``, first printing one line that names
both and the wall-clock time.
"""

from __future__ import annotations

import os
import signal
import sys
import time

SIGNAL_AT_VARIABLE = "GNNTRAIN_SIGNAL_AT"

PHASES = (
    "handlers",        # the stop handlers are in place (first thing the command does)
    "registered",      # config schemas, the sweeper and the named plugins imported
    "fork-server",     # the fork server is starting (it imports torch meanwhile)
    "composed",        # Hydra composed the job and made its run dir
    "torch-imported",  # the launcher imported torch and the job's API
    "run-dir-owned",   # the run dir is locked and its .hydra files written
    "checked",         # the typed config checked and its network calibrated
    "prepared",        # the dataset and partition are known, the resume point found
    "data-loaded",     # the ranks' data is loaded into the launcher
    "wandb",           # the job's W&B run is open
    "store",           # the rendezvous store listens
    "spawned",         # the workers were started
    "joining",         # the launcher waits on its workers
    "job-ended",       # a job ended; a sweep's next one has not taken its run dir yet
)
"""The launcher's start-up, in the order it passes through, and the end of each job."""


def reached(phase: str) -> None:
    """Mark that the launcher reached ``phase`` (one of :data:`PHASES`); the test hook sends its
    signal here when ``GNNTRAIN_SIGNAL_AT`` names this phase."""
    assert phase in PHASES, phase
    wanted = os.environ.get(SIGNAL_AT_VARIABLE, "")
    name, _, signal_name = wanted.partition(":")
    if name != phase:
        return
    signum = signal.Signals[signal_name or "SIGTERM"]
    print(f"gnntrain: test hook: {signum.name} at {phase} ({time.time():.3f})", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signum)
