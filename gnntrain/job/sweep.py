"""Sweeps (``gnntrain -m``): a knob of one strategy or model reaches only the jobs whose
strategy or model has it (:func:`sweep_jobs`, launched by gnntrain's Hydra sweeper), every
job's config is checked before the first job starts, a job that fails at run time is reported
and the sweep goes on, and the failed jobs are summed up at the end (:data:`LAST_SWEEP`, which
the CLI turns into its last line and a non-zero exit).

:class:`SweepChecks` is a Hydra callback (``hydra.callbacks.sweep`` in ``conf/config.yaml``).
Up front it enumerates the jobs as the sweeper does (:func:`sweep_jobs`) and checks each as a
run would (:func:`gnntrain.job.api.check`); other sweepers (e.g. Optuna's) choose their jobs as
they go and are not checked up front. At the end it reads
how each job ended from its ``summary.json`` (:func:`gnntrain.engine.recorder.record_stop`), so
it works the same for jobs that ran in other processes or on other machines.

Progress: before each job of a sweep run in this process (Hydra's basic launcher) the callback
prints one line for the sweep — the job's number, the jobs done, failed and left, and the time
left at the mean duration of the jobs so far (:class:`SweepProgress`) — above the job's own
epoch display. A launcher that runs jobs elsewhere (submitit) prints its own.
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from gnntrain.config import one_line
from gnntrain.engine.summary import SUMMARY_FILE, RunSummary
from gnntrain.errors import GnntrainError, release_stops
from gnntrain.job.help import GROUPS
from gnntrain.report.runs import natural_key

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
KNOB_SWEEPER = "hydra_plugins.gnntrain_sweeper.KnobSweeper"
BASIC_LAUNCHER = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
KNOB_SECTIONS = ("strategy", "model")
"""The sections whose options differ in their keys: a sweep over several options keeps each
option's own knobs (:func:`own_knobs_only`)."""
Compose = Callable[[list[str]], Any]
"""A job's composed config (a mapping of sections) from its overrides."""
SectionKeys = Callable[[list[str], str], set[str]]
"""The keys a job's section (``strategy``, ``model``) has, from the job's overrides."""



class SweepRefused(BaseException):
    """Invalid jobs found before a sweep started. A BaseException: Hydra turns any Exception a
    callback raises into a warning and goes on."""


@dataclass
class SweepOutcome:
    jobs: int = 0
    failed: list[str] = field(default_factory=list)
    """``job N (overrides): error`` for every job that did not complete."""


LAST_SWEEP = SweepOutcome()
"""How the last sweep of this process ended (set when it ends)."""


@dataclass
class SweepProgress:
    """Where a sweep stands, as jobs start and end in this process."""

    total: int | None = None
    """Jobs in the sweep (None where the sweeper picks them as it goes)."""
    done: int = 0
    failed: int = 0
    durations: list[float] = field(default_factory=list)
    """Seconds each finished job took."""
    started: float = 0.0

    def start_job(self, num: int) -> str:
        """Note the start of job ``num`` (Hydra's job number, from 0); the sweep's progress line."""
        self.started = time.perf_counter()
        number = self.done + self.failed + 1
        parts = [f"job {num} ({number}" + (f" of {self.total})" if self.total else ")"), f"{self.done} done",
                 f"{self.failed} failed"]
        if self.total:
            left = self.total - number + 1
            parts.append(f"{left} left")
            if self.durations:
                per_job = statistics.fmean(self.durations)
                parts.append(f"about {clock(per_job * left)} to go ({clock(per_job)} per job)")
        return "sweep: " + " · ".join(parts)

    def end_job(self, failed: bool) -> None:
        self.durations.append(time.perf_counter() - self.started)
        if failed:
            self.failed += 1
        else:
            self.done += 1


def clock(seconds: float) -> str:
    """``1h02m``, ``4m05s`` or ``12s``."""
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class SweepChecks(Callback):
    def __init__(self) -> None:
        self.progress = SweepProgress()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.launcher.get("_target_") != BASIC_LAUNCHER:
            release_stops()  # its jobs run elsewhere (submitit): this process only waits, and a stop ends it
        self.progress = SweepProgress()
        if config.hydra.sweeper._target_ not in (BASIC_SWEEPER, KNOB_SWEEPER):
            return
        jobs = sweep_jobs(config)
        self.progress.total = len(jobs)
        problems = [f"job {num} ({' '.join(job)}): {problem}"
                    for num, job in enumerate(jobs) if (problem := job_problem(config, job))]
        if problems:
            raise SweepRefused(f"{len(problems)} of {len(jobs)} sweep jobs are invalid, none was started: "
                               + "; ".join(problems))

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.mode == RunMode.MULTIRUN:
            print(self.progress.start_job(config.hydra.job.num), flush=True)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if config.hydra.mode == RunMode.MULTIRUN:
            self.progress.end_job(failure(Path(config.hydra.runtime.output_dir)) is not None)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        jobs = job_dirs(Path(config.hydra.sweep.dir))
        LAST_SWEEP.jobs = len(jobs)
        LAST_SWEEP.failed = [line for job in jobs if (line := failure(job))]


def sweep_jobs(config: DictConfig, compose: Compose | None = None) -> list[list[str]]:
    """Each job's overrides, as the sweeper launches them: the cartesian product of the sweep
    overrides' values, in the order given, the other overrides in every job; under gnntrain's
    sweeper (``hydra_plugins.gnntrain_sweeper``, the default) each job keeps only its
    strategy's and model's own knobs (:func:`own_knobs_only`; ``compose`` builds a job's config
    where its options are chosen by a preset, by default as Hydra will), under Hydra's basic
    sweeper the product stays as it is."""
    loader = GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None
    params = [f"{key}={value}" for key, value in (config.hydra.sweeper.params or {}).items()]
    overrides = OverridesParser.create(config_loader=loader).parse_overrides(
        params + list(config.hydra.overrides.task))
    choices: dict[str, list[str]] = {}  # a key given twice keeps its first place and its last values
    for o in overrides:
        key = o.get_key_element()
        values = list(o.sweep_string_iterator()) if o.is_discrete_sweep() else [o.get_value_element_as_str()]
        choices[key] = [f"{key}={value}" for value in values]
    jobs = [list(job) for job in itertools.product(*choices.values())]
    if config.hydra.sweeper.get("_target_", KNOB_SWEEPER) != KNOB_SWEEPER:
        return jobs
    return own_knobs_only(jobs, section_keys_from(compose or (lambda job: loader.load_sweep_config(config, job))))


def _knob(override: str) -> tuple[str, str] | None:
    """``(section, key)`` of an override that sets a key of a :data:`KNOB_SECTIONS` section
    (``strategy.k=2``), else None."""
    section, dot, rest = override.partition("=")[0].partition(".")
    return (section, rest.split(".")[0]) if dot and section in KNOB_SECTIONS else None


def own_knobs_only(jobs: list[list[str]], section_keys: SectionKeys) -> list[list[str]]:
    """The jobs of a sweep over several strategies (or models), each with its own knobs:
    ``gnntrain -m strategy=vanilla,adaqp,int8_halo strategy.clip=0.5,1`` runs vanilla, adaqp,
    and int8_halo at each ``clip``. A job keeps an override of a strategy or model key
    (``strategy.clip=0.5``) only where its strategy (model) has that key; jobs left the same are
    run once, in the order of their first place. A key that no job's strategy (model) has is
    kept everywhere, so that the sweep's checks refuse it, naming the valid keys."""
    if len({_choices(job) for job in jobs}) == 1 or not any(_knob(o) for job in jobs for o in job):
        return jobs  # every job has the same keys, or no job sets one
    pruned = [[o for o in job if (knob := _knob(o)) is None or knob[1] in section_keys(job, knob[0])]
              for job in jobs]
    kept_anywhere = {_knob(o) for job in pruned for o in job}
    if {_knob(o) for job in jobs for o in job} - kept_anywhere - {None}:
        return jobs
    return [list(job) for job in dict.fromkeys(map(tuple, pruned))]


def _choices(job: list[str]) -> tuple[str, ...]:
    """A job's choices of config group options (``strategy=bns``, ``experiment=...``): what
    decides which keys its sections have."""
    return tuple(o for o in job if o.partition("=")[0] in GROUPS)


def section_keys_from(compose: Compose) -> SectionKeys:
    """The keys of a job's section: its chosen option's schema where the job chooses it
    (``strategy=bns``), else the composed job's (an option a preset chooses), composed once per
    choice of options."""
    composed: dict[tuple[str, ...], Any] = {}

    def section_keys(job: list[str], section: str) -> set[str]:
        chosen = [value for key, _, value in (o.partition("=") for o in job) if key == section]
        if chosen:
            return _schema_keys(section, chosen[-1])
        choices = _choices(job)
        if choices not in composed:
            composed[choices] = compose(list(choices))
        return set(composed[choices][section].keys())

    return section_keys


def _schema_keys(section: str, option: str) -> set[str]:
    """The keys of the registered strategy or model ``option`` (none for an unknown one, which the
    sweep's checks refuse)."""
    from gnntrain.models import model_spec
    from gnntrain.strategies import schema_of

    try:
        schema = schema_of(option) if section == "strategy" else model_spec(option).config
    except GnntrainError:
        return set()
    return {f.name for f in dataclasses.fields(schema)}


def job_problem(config: DictConfig, overrides: list[str]) -> str | None:
    """Why the job with these overrides would be refused at its start, or None."""
    from gnntrain.job import api

    try:
        job = GlobalHydra.instance().config_loader().load_sweep_config(config, overrides)
        with open_dict(job):
            del job["hydra"]
        api.check(OmegaConf.to_container(job, resolve=True, enum_to_str=True))
    except (GnntrainError, OmegaConfBaseException, HydraException) as exc:
        return one_line(exc)
    return None


def job_dirs(sweep_dir: Path) -> list[Path]:
    """The sweep's job directories (Hydra saves each job's overrides in it), in job order."""
    dirs = [p.parent.parent for p in sweep_dir.rglob(".hydra/overrides.yaml")
            if "calibration_probe" not in p.relative_to(sweep_dir).parts]
    return sorted(dirs, key=lambda d: natural_key(d.relative_to(sweep_dir)))


def failure(job_dir: Path) -> str | None:
    """``job N (overrides): error`` for a job that did not complete, else None."""
    overrides = " ".join(OmegaConf.load(job_dir / ".hydra" / "overrides.yaml"))
    path = job_dir / SUMMARY_FILE
    if not path.exists():
        return f"job {job_dir.name} ({overrides}): no summary.json (the job was killed)"
    summary = RunSummary.read(path)
    if summary.status == "completed":
        return None
    return f"job {job_dir.name} ({overrides}): {summary.error or summary.status}"
