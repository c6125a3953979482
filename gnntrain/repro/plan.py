"""What the papers' builds (:mod:`gnntrain.repro.build`) and :mod:`gnntrain.repro.compare` share: a build's sweeps (one ``gnntrain -m``
call each, into its folder under the build's multirun root), running one, each job's wall time
in ``runs.csv``, and ``--dry-run``: every sweep the build would run with its command and jobs,
the number of jobs and the wall time the recorded runs suggest, with nothing started.

A job's wall time (``runs.csv``'s ``wall_s``, seconds) is read from its run folder: from the
job's start (Hydra writes the job's ``.hydra/config.yaml`` before the job runs) to its end (the
last write of its ``summary.json``). It counts the calibration probe, the workers' start and the
data loading, which the summary's ``total_wall_time`` (the training loop alone) leaves out. A
sweep runs all its jobs in one process, so the sweep's start-up (the interpreter, the imports,
the check of every job before the first starts) is in no job's time.

A job is named by its folder under the multirun root, ``<sweep>/<job number>`` (the ``run``
column of ``runs.csv``); the dry run takes a job's recorded wall time from the row of that name.
"""

from __future__ import annotations

import csv
import io
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from gnntrain.errors import GnntrainError, first_line
from gnntrain.job import api
from gnntrain.engine.summary import SUMMARY_FILE, RunSummary
from gnntrain.report import table_rows
from gnntrain.report.runs import Run
from gnntrain.repro import CHECKOUT
from gnntrain.job.sweep import clock, sweep_jobs
from gnntrain.storage.files import read_text_checked
WALL = "wall_s"
"""The ``runs.csv`` column of a job's wall time in seconds."""


@dataclass
class Sweep:
    """One ``gnntrain -m`` call of a build."""

    name: str
    """Its folder under the build's multirun root, e.g. ``speed_2parts`` or ``tune/bns/0``."""
    overrides: list[str]
    added: str | None = None
    """Overrides known only once earlier sweeps have run, in words (they sweep nothing)."""
    skipped: str | None = None
    """Why this build does not run it; None where it does."""


def run_summaries(sweep_dir: Path) -> list[RunSummary]:
    """The ``summary.json`` of every job under ``sweep_dir``, completed or not (calibration
    probes aside)."""
    return [RunSummary.read(path) for path in sorted(sweep_dir.rglob(SUMMARY_FILE))
            if "calibration_probe" not in path.parts]


def command(overrides: list[str], out: Path) -> list[str]:
    """The command line that runs the sweep ``gnntrain -m overrides`` into ``out``."""
    return [sys.executable, "-m", "gnntrain.commands.train", "-m", *overrides, f"hydra.sweep.dir={out}"]


def in_checkout(path: Path) -> Path:
    """``path`` relative to the checkout where it is in it, else as it is."""
    return path.relative_to(CHECKOUT) if path.is_relative_to(CHECKOUT) else path


def shown(overrides: list[str], out: Path) -> str:
    """The sweep's command as a user types it."""
    return " ".join(["gnntrain -m", *overrides, f"hydra.sweep.dir={in_checkout(out)}"])


class Countdown:
    """A build's progress, one line as each sweep starts: the sweeps and jobs done of all it
    plans, the time since it began and an estimate of what is left (the mean job so far times
    the jobs left; a build that adds sweeps as it goes, as ``make compare`` does, grows its total).
    The line goes wherever the build's output goes: a batch job's log is where its progress is
    read; ``quiet`` prints none."""

    def __init__(self, sweeps: list[Sweep], quiet: bool = False) -> None:
        planned = [sweep for sweep in sweeps if sweep.skipped is None]
        self.sweeps, self.total = len(planned), sum(len(expand(sweep.overrides)) for sweep in planned)
        self.started, self.jobs, self.quiet = 0, 0, quiet
        self.begun = time.perf_counter()

    def start(self, jobs: int) -> str | None:
        """The line for a sweep of ``jobs`` jobs starting (None when quiet)."""
        self.started += 1
        self.sweeps, self.total = max(self.sweeps, self.started), max(self.total, self.jobs + jobs)
        if self.quiet:
            return None
        elapsed = time.perf_counter() - self.begun
        left = (f", about {elapsed / self.jobs * (self.total - self.jobs) / 60:.1f} min left" if self.jobs else "")
        return (f"[sweep {self.started}/{self.sweeps}, {self.jobs}/{self.total} jobs done, "
                f"{elapsed / 60:.1f} min{left}]")

    def finish(self, jobs: int) -> None:
        self.jobs += jobs


def launch(name: str, overrides: list[str], out: Path, check: bool, countdown: Countdown | None = None) -> None:
    """Run the sweep into ``out`` (emptied first; W&B disabled unless ``WANDB_MODE`` says
    otherwise), printing its command (after the ``countdown``'s line) and the seconds it took;
    with ``check`` a sweep with a failed job raises."""
    if out.exists():
        shutil.rmtree(out)
    jobs = len(expand(overrides)) if countdown is not None else 0
    line = countdown.start(jobs) if countdown is not None else None
    print(f"== {name}: {shown(overrides, out)}" + (f" {line}" if line else ""), flush=True)
    start = time.perf_counter()
    env = {**os.environ, "WANDB_MODE": os.environ.get("WANDB_MODE", "disabled")}
    try:
        subprocess.run(command(overrides, out), check=check, env=env, cwd=CHECKOUT)
    finally:
        if countdown is not None:
            countdown.finish(jobs)
    print(f"== {name}: {time.perf_counter() - start:.0f} s", flush=True)


def wall_seconds(run_dir: Path) -> float | None:
    """The seconds the job of ``run_dir`` took (the module docstring says from when to when);
    None for a run Hydra did not start (no ``.hydra/config.yaml``)."""
    started = run_dir / ".hydra" / "config.yaml"
    if not started.is_file():
        return None
    return (run_dir / SUMMARY_FILE).stat().st_mtime - started.stat().st_mtime


def timed_rows(runs: list[Run], root: Path, target: float | None = None) -> list[dict]:
    """:func:`gnntrain.report.table_rows` of ``runs`` (``run`` relative to ``root``), each row
    with its job's wall time (:data:`WALL`)."""
    return [{**row, WALL: wall_seconds(run.path)} for run, row in zip(runs, table_rows(runs, root, target))]


def expand(overrides: list[str]) -> list[list[str]]:
    """Each job's overrides, in job order, as ``gnntrain -m overrides`` launches them
    (:func:`gnntrain.job.sweep.sweep_jobs`), each composed as the CLI does (:func:`gnntrain.job.api.composing`)."""
    with api.composing() as compose:
        # no preset sets hydra.sweeper.params, so the overrides alone make the jobs
        config = OmegaConf.create({"hydra": {"sweeper": {"params": None}, "overrides": {"task": overrides}}})
        return sweep_jobs(config, compose=compose)


RUNS_CSV_LIMIT = 64 * 2**20
"""The most bytes of a ``runs.csv`` the dry run reads (the committed ones hold under 200 KB)."""


def recorded(csv_path: Path) -> dict[str, float]:
    """The wall time a build's ``runs.csv`` records per job (its ``run``), for the rows that have
    one; a file that is not a regular UTF-8 CSV under :data:`RUNS_CSV_LIMIT`, or a time that is
    not a finite number of seconds >= 0, is refused in one line."""
    if not csv_path.is_file():
        return {}
    try:
        rows = list(csv.DictReader(io.StringIO(read_text_checked(csv_path, RUNS_CSV_LIMIT))))
    except (ValueError, csv.Error) as exc:
        raise GnntrainError(f"{csv_path}: {first_line(exc)}; valid: the runs.csv a build wrote") from None
    walls = {}
    for row in rows:
        text = row.get(WALL)
        if not text:
            continue
        try:
            wall = float(text)
        except ValueError:
            wall = math.nan
        if not 0 <= wall < math.inf:
            raise GnntrainError(f"{csv_path}: run {row.get('run')}'s {WALL}={text}; valid: seconds, finite and >= 0")
        walls[row.get("run")] = wall
    return walls


def job_lines(planned: list[list[str]], names: list[str], walls: dict[str, float]) -> list[str]:
    """One line per job of a sweep: its name, the overrides it alone has in the sweep, its recorded
    wall time."""
    common = set.intersection(*(set(job) for job in planned))
    lines = []
    for name, job in zip(names, planned):
        own = " ".join(o for o in job if o not in common) or "the sweep's only job"
        wall = f"{clock(walls[name])} recorded" if name in walls else "no recorded time"
        lines.append(f"   {name}: {own}: {wall}")
    return lines


def counted(number: int, noun: str) -> str:
    """``1 job``, ``2 jobs``."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


LOAD_PROBE_S = 0.5
"""Seconds over which :func:`present_load` samples the machine."""


def present_load() -> float:
    """How many times slower than an idle machine this one runs a job now: the processes other
    than this one that want a core (``procs_running`` of ``/proc/stat``, sampled 10 times over
    :data:`LOAD_PROBE_S` seconds) share the cores with a job that uses them all: ``(others +
    cores) / cores`` (1 on an idle machine; 1 where it cannot be read)."""
    samples = []
    for _ in range(10):
        try:
            stat = Path("/proc/stat").read_text()
        except OSError:
            return 1.0
        samples += [int(line.split()[1]) for line in stat.splitlines() if line.startswith("procs_running")]
        time.sleep(LOAD_PROBE_S / 10)
    cores = len(os.sched_getaffinity(0))
    others = max(0.0, sum(samples) / max(len(samples), 1) - 1)
    return (others + cores) / cores


def estimate(walls: list[float | None], sweeps: int, csv_path: Path) -> str:
    """The line that sums up a dry run: the jobs and sweeps to run and the wall time the
    recorded jobs suggest, saying which jobs and what it leaves out."""
    known = [wall for wall in walls if wall is not None]
    line = f"{counted(len(walls), 'job')} in {counted(sweeps, 'sweep')}; "
    if not walls:
        return line + "nothing to run"
    if not known:
        where = (f"{in_checkout(csv_path)} records no wall time ({WALL}) for any of them" if csv_path.is_file()
                 else f"there is no {in_checkout(csv_path)}")
        return line + f"estimated wall time unknown: {where} (a build records one for each of its jobs)"
    load = present_load()
    line += (f"estimated wall time {clock(sum(known))}: the sum of the wall times {in_checkout(csv_path)} records "
             f"for {len(known)} of {len(walls)} jobs, run one after another on a machine that ran nothing else")
    if load > 1.1:
        line += (f"; at this machine's present load (a {LOAD_PROBE_S:g} s probe: {load:.1f}x slower than idle) "
                 f"about {clock(sum(known) * load)}")
    if len(known) < len(walls):
        line += f"; no recorded time for {len(walls) - len(known)} of {len(walls)} jobs (not in the estimate)"
    return line + ("; not counted: each sweep's start-up (interpreter, imports, the check of its jobs) and "
                   "building the tables")


def dry_run(title: str, sweeps: list[Sweep], root: Path, csv_path: Path) -> str:
    """What a build would run, with nothing started: each sweep's command (or why it does not
    run) and jobs with their recorded wall times (``csv_path``), then :func:`estimate`."""
    walls = recorded(csv_path)
    lines = [f"{title}: dry run, nothing is started"]
    job_walls: list[float | None] = []
    for sweep in sweeps:
        if sweep.skipped is not None:
            lines.append(f"== {sweep.name}: not run ({sweep.skipped})")
            continue
        planned = expand(sweep.overrides)
        names = [f"{sweep.name}/{number}" for number in range(len(planned))]
        added = [f"<{sweep.added}>"] if sweep.added else []
        lines.append(f"== {sweep.name}: {shown([*sweep.overrides, *added], root / sweep.name)} "
                     f"({counted(len(planned), 'job')})")
        lines += job_lines(planned, names, walls)
        job_walls += [walls.get(name) for name in names]
    lines.append(estimate(job_walls, sum(sweep.skipped is None for sweep in sweeps), csv_path))
    return "\n".join(lines)
