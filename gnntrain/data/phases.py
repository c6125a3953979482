"""Progress of the long phases before training: loading or generating a dataset, partitioning,
writing part files, loading a part.

On a terminal a phase shows its name and elapsed time while it runs (rich), with a bar where
its work is countable (:meth:`Phase.advance`); wherever its output goes, it ends with one line on
stdout (beside the epochs' progress; stderr is for errors and warnings) naming the phase, its time and the process's peak resident memory so far, e.g.::

    gnntrain: partition synthetic into 4 parts (metis): 212.4 s, peak 9.87 GiB

Under torchrun or submitit the line names the rank, so a job's log shows which process did each
phase (a job prepares its data once per node, :mod:`gnntrain.job.launch.data`).

The long commands' steps (a prediction's settings and profiled proxies, a build's sweeps) say
what is done and what is left in one line each (:func:`note`), also in a log, where a batch job's
progress is read; the live bar is the terminal's alone. A command's ``--quiet`` silences both
(:func:`quiet`).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

_QUIET: list[bool] = [False]


@contextmanager
def quiet(on: bool = True) -> Iterator[None]:
    """This process's progress (bars, phase lines and :func:`note`) silenced inside the block
    where ``on``: a command's ``--quiet``."""
    before, _QUIET[0] = _QUIET[0], on
    try:
        yield
    finally:
        _QUIET[0] = before


def note(text: str, stream=None) -> None:
    """One progress line (what is done, what is left) on ``stream`` (stderr by default), unless
    :func:`quiet`."""
    if not _QUIET[0]:
        print(text, file=stream or sys.stderr, flush=True)


def left(elapsed: float, done: float, total: float) -> str:
    """``, about N s left`` (or min) at the rate so far; empty before any is done."""
    if done <= 0 or total <= done:
        return ""
    seconds = elapsed / done * (total - done)
    return f", about {seconds:.0f} s left" if seconds < 120 else f", about {seconds / 60:.1f} min left"


def peak_rss_gib() -> float:
    """This process's peak resident set since it started, in GiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _who() -> str:
    return f" (rank {os.environ['RANK']})" if "RANK" in os.environ else ""


class Phase:
    """A running phase; :meth:`advance` counts its work where it has a total."""

    def __init__(self, progress: Progress | None, task: int | None) -> None:
        self.progress, self.task = progress, task

    def advance(self, amount: int = 1) -> None:
        if self.progress is not None:
            self.progress.advance(self.task, amount)


@contextmanager
def phase(name: str, total: int | None = None) -> Iterator[Phase]:
    """Show phase ``name`` (``total`` units of work, where countable) while it runs, then its one
    line; a phase that fails prints no line (the error says what happened)."""
    progress = None
    task = None
    if sys.stdout.isatty() and not _QUIET[0]:
        columns = [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
        if total is not None:
            columns[2:2] = [BarColumn(), MofNCompleteColumn()]
            columns.append(TimeRemainingColumn())
        progress = Progress(*columns, transient=True)
        task = progress.add_task(name, total=total)
        progress.start()
    start = time.perf_counter()
    try:
        yield Phase(progress, task)
    finally:
        if progress is not None:
            progress.stop()
    if not _QUIET[0]:
        print(f"gnntrain{_who()}: {name}: {time.perf_counter() - start:.1f} s, peak {peak_rss_gib():.2f} GiB",
              flush=True)
