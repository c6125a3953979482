"""Sweeps (``gnntrain -m``): every job's config is checked before the first job starts, a job
that fails at run time is reported and the sweep goes on, and the failed jobs are summed up at
the end (:data:`LAST_SWEEP`, which the CLI turns into its last line and a non-zero exit).

:class:`SweepChecks` is a Hydra callback (``hydra.callbacks.sweep`` in ``conf/config.yaml``).
Up front it enumerates the jobs as Hydra's basic sweeper does (the cartesian product of the
swept values, in the order given) and composes, validates and lays out each; other sweepers
(e.g. Optuna's) choose their jobs as they go and are not checked up front. At the end it reads
how each job ended from its ``summary.json`` (:func:`gnntrain.engine.metrics.record_stop`), so
it works the same for jobs that ran in other processes or on other machines.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from gnntrain.config import one_line, validate
from gnntrain.errors import GnntrainError
from gnntrain.report import natural_key

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"



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


class SweepChecks(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if config.hydra.sweeper._target_ != BASIC_SWEEPER:
            return
        jobs = sweep_jobs(config)
        problems = [f"job {num} ({' '.join(job)}): {problem}"
                    for num, job in enumerate(jobs) if (problem := job_problem(config, job))]
        if problems:
            raise SweepRefused(f"{len(problems)} of {len(jobs)} sweep jobs are invalid, none was started: "
                               + "; ".join(problems))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        jobs = job_dirs(Path(config.hydra.sweep.dir))
        LAST_SWEEP.jobs = len(jobs)
        LAST_SWEEP.failed = [line for job in jobs if (line := failure(job))]


def sweep_jobs(config: DictConfig) -> list[list[str]]:
    """Each job's overrides, as the basic sweeper will launch them."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    loader = GlobalHydra.instance().config_loader()
    params = [f"{key}={value}" for key, value in (config.hydra.sweeper.params or {}).items()]
    overrides = OverridesParser.create(config_loader=loader).parse_overrides(
        params + list(config.hydra.overrides.task))
    return [list(job) for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]


def job_problem(config: DictConfig, overrides: list[str]) -> str | None:
    """Why the job with these overrides would be refused at its start, or None."""
    from gnntrain.launch import job_layout, resolve_world_size

    try:
        job = GlobalHydra.instance().config_loader().load_sweep_config(config, overrides)
        with open_dict(job):
            del job["hydra"]
        plain = OmegaConf.to_container(job, resolve=True, enum_to_str=True)
        validate(plain)
        job_layout(plain, resolve_world_size(plain))
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
    path = job_dir / "summary.json"
    if not path.exists():
        return f"job {job_dir.name} ({overrides}): no summary.json (the job was killed)"
    summary = json.loads(path.read_text())
    if summary.get("status", "completed") == "completed":
        return None
    return f"job {job_dir.name} ({overrides}): {summary.get('error') or summary['status']}"
