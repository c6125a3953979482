"""Commands run under a hard time budget (the GPU session's sections, the GPU check's parts).

Standard library only: ``scripts/gpu_session.py`` runs its first section (installing the
packages gnntrain needs) through it before anything imports gnntrain."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INTERRUPT_GRACE_S = 20.0
"""Seconds a command interrupted at its budget has to wind down (pytest writes its report, a
bench its last rows) before it is killed."""


def _interruptible() -> None:
    """In the command's process, before it starts: take SIGINT's default action back. A shell that
    starts a job in the background without job control makes it ignore SIGINT, and the command
    would inherit that and sit out the interrupt at its budget (then be killed
    :data:`INTERRUPT_GRACE_S` later, its report unwritten)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Budgeted:
    """A command started in a process group of its own, to be waited for within a budget."""

    def __init__(self, command: list[str], env: dict | None = None) -> None:
        self.start = time.monotonic()
        self.process = subprocess.Popen(command, cwd=REPO, env=env, start_new_session=True,
                                        preexec_fn=_interruptible)

    def wait(self, budget_s: float) -> tuple[int | None, float]:
        """Wait until ``budget_s`` seconds after the start, then interrupt the group (SIGINT) and
        kill it if it has not ended :data:`INTERRUPT_GRACE_S` later. The exit status (None: cut
        at the budget) and the seconds since the start."""
        try:
            return self.process.wait(timeout=max(budget_s - (time.monotonic() - self.start), 0.0)), self.elapsed
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=INTERRUPT_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
            return None, self.elapsed

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start


def run_within(command: list[str], budget_s: float, env: dict | None = None) -> tuple[int | None, float]:
    """Run ``command`` in the checkout for at most ``budget_s`` seconds (:meth:`Budgeted.wait`)."""
    return Budgeted(command, env).wait(budget_s)
