"""``gnntrain``: Hydra composes the config; the job is checked, calibrated and run by
:mod:`gnntrain.job.api`, as every other caller runs one.

Errors a user can cause (an unknown option, a misspelt key, a wrong type, a missing dataset,
a dead worker) are printed as one line, ``gnntrain: error: ...``, with exit code 2 (bad
input) or 1 (the job failed). A worker that raised (a bug in a plugin, a backend refusing a
tensor) also gets its traceback printed under that line, and kept in the run dir's
``error.txt``, which ``summary.json``'s ``error_file`` names. ``GNNTRAIN_DEBUG=1`` raises the
error in the launcher instead, with the launcher's own traceback (for errors in gnntrain's
checks and launch). Ctrl-C or SIGTERM stops the workers within seconds and exits with 128 +
the signal's number.

Every run directory ends with a ``summary.json`` whose ``status`` says how the run ended:
``completed``, ``failed`` or ``interrupted`` (with the error line and the figures of the epochs
it completed). In a sweep a failed job is reported and the sweep goes on; the last line then
sums up the failed jobs and the exit code is 1 (:mod:`gnntrain.job.sweep`).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from contextlib import ExitStack, suppress
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gnntrain.config import one_line, refuse_set_by_gnntrain
from gnntrain.config.schema import RootConfig, check_path
from gnntrain.errors import (ConfigError, DiskFull, GnntrainError, JobInterrupted, WorkerFailed, first_line, hold_stops,
                             interrupt, release_stops, warn)
from gnntrain.job.help import print_help, wants_help
from gnntrain.job.launch.join import adopt_submitit_tasks, leave_torchrun_world, under_torchrun
from gnntrain.job.run_dir import RunDirRefused, owned, write_hydra_files
from gnntrain.job.startup import reached
from gnntrain.job.sweep import LAST_SWEEP, SweepRefused


@hydra.main(config_path="pkg://gnntrain.conf", config_name="config", version_base="1.3")
def _job(cfg: DictConfig) -> None:
    """One job, in the command's process (the basic launcher) or as the entry point of a task that
    a non-local launcher started (submitit, where :func:`main` did not run and the stop handlers
    are set here). Stops are held until the job's run dir is its own, and again once it ends, until
    the next job's is (:func:`~gnntrain.errors.hold_stops`)."""
    own_handlers = _catch_stops() if signal.getsignal(signal.SIGTERM) is not interrupt else None
    hold_stops()  # held already, except where this is the entry point
    try:
        _one_job(cfg)
    finally:
        hold_stops()
        reached("job-ended")
        if own_handlers is not None:
            _restore(own_handlers)


def _one_job(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    try:  # before anything is written: an empty dir would be wherever the job starts
        check_path("hydra.sweep.dir" if multirun else "hydra.run.dir", hydra_cfg.sweep.dir if multirun else hydra_cfg.run.dir)
        if not multirun and cfg.cluster.name == "slurm":
            raise ConfigError("cluster=slurm submits through Hydra's submitit launcher, which only a sweep uses: "
                              "without -m the job would run here, on this machine; valid: gnntrain -m cluster=slurm "
                              "... (docs/clusters.md)")
    except ConfigError as exc:
        _exit_with(exc)
    run_dir = Path(hydra_cfg.runtime.output_dir).resolve()
    # Hydra has just made it for this job (rank 0's to judge under torchrun, where the dir is shared)
    fresh = int(os.environ.get("RANK", "0")) == 0 and run_dir.is_dir() and not any(run_dir.iterdir())
    reached("composed")
    from gnntrain.job import api  # noqa: F401  (torch: imported while a stop is held, never half-way)
    reached("torch-imported")
    try:
        adopt_submitit_tasks()  # a task of a submitit job knows its rank from here on
        with ExitStack() as held:
            if int(os.environ.get("RANK", "0")) == 0:  # under torchrun or submitit rank 0 holds it for the job
                held.enter_context(owned(run_dir))
            release_stops()  # a stop held since the command (or the last job) began is raised here, in this job's dir
            write_hydra_files(run_dir, cfg, hydra_cfg)
            reached("run-dir-owned")
            _run_job(cfg, run_dir, hydra_cfg)
    except RunDirRefused as exc:  # the dir is another job's, or planted: nothing is recorded in it
        if hydra_cfg.mode != RunMode.MULTIRUN:
            _exit_with(exc)
        print(f"gnntrain: error: job {hydra_cfg.job.num} failed: {exc}; the sweep goes on", file=sys.stderr, flush=True)
    except JobInterrupted as exc:
        _stop_interrupted(exc, cfg, run_dir)
    except (GnntrainError, OmegaConfBaseException) as exc:
        # here, not in main(): Hydra would print an extra line for a failed job
        line = one_line(exc)
        if fresh and hydra_cfg.mode != RunMode.MULTIRUN and _only_the_jobs_own(run_dir):
            _remove_fresh(run_dir)  # refused before it trained: nothing of it to keep
            _exit_with(exc)
        _record_stop(cfg, run_dir, "failed", line)
        if hydra_cfg.mode != RunMode.MULTIRUN or os.environ.get("GNNTRAIN_DEBUG") == "1" or _world_broken(exc):
            _exit_with(exc, run_dir)
        print(f"gnntrain: error: job {hydra_cfg.job.num} ({' '.join(hydra_cfg.overrides.task)}) failed: {line}; "
              "the sweep goes on" + _worker_traceback(exc, run_dir), file=sys.stderr, flush=True)


def _run_job(cfg: DictConfig, run_dir: Path, hydra_cfg: DictConfig) -> None:
    from gnntrain.job import api

    plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    if plain["run_dir"]:
        raise ConfigError(f"run_dir={plain['run_dir']} is set by gnntrain; valid: hydra.run.dir=<dir> "
                          "(hydra.sweep.dir=<dir> in a sweep)")
    plain["run_dir"] = str(run_dir)
    if hydra_cfg.mode == RunMode.MULTIRUN:
        name_sweep_job(plain["wandb"], hydra_cfg)
    if plain["partition"]["only"]:
        _write_partitioned_dataset(api.check(plain))
        return
    api.run(plain)


def _write_partitioned_dataset(run: RootConfig) -> None:
    """``partition.only``: cut the dataset into ``partition.parts`` parts (default: as many as
    the job's strategy and workers need) and write the per-part files."""
    from gnntrain.data.job import write_partitioned_dataset
    from gnntrain.job.validation import job_layout, resolve_world_size

    parts = run.partition.parts or job_layout(run, resolve_world_size(run)).parts
    parted = write_partitioned_dataset(run, parts)
    facts = parted.facts
    print(f"wrote {parts} parts of {facts.name} ({facts.num_nodes} nodes, {facts.num_edges} edges) to {parted.folder}; "
          f"runs of a graph-parallel strategy on {parts} workers with the same dataset and partition settings "
          "now load one part per rank", flush=True)


def name_sweep_job(wandb: dict, hydra_cfg: DictConfig) -> None:
    """A sweep's jobs share one W&B group, the sweep dir, and each is named by its overrides
    (where ``wandb.group`` and ``wandb.name`` are not set), so W&B's tables compare them."""
    wandb["group"] = wandb["group"] or str(hydra_cfg.sweep.dir)
    wandb["name"] = wandb["name"] or hydra_cfg.job.override_dirname or str(hydra_cfg.job.num)


def _only_the_jobs_own(run_dir: Path) -> bool:
    """Whether the run dir holds only what a job writes before it starts training (its lock and
    ``.hydra``): a job refused then has recorded nothing a user would keep."""
    from gnntrain.job.run_dir import HYDRA_FILES, LOCK_FILE

    return {p.name for p in run_dir.iterdir()} <= {LOCK_FILE, HYDRA_FILES}


def _remove_fresh(run_dir: Path) -> None:
    """Remove a run dir Hydra made for a job that was refused, and the folders above it that Hydra
    made for it and that are left empty (``outputs/<date>``), up to the current folder."""
    shutil.rmtree(run_dir, ignore_errors=True)
    here = Path.cwd().resolve()
    for parent in run_dir.parents:
        if parent == here or here not in parent.parents:
            break
        try:
            parent.rmdir()
        except OSError:  # not empty: another run's
            break


def _record_stop(cfg: DictConfig, run_dir: Path, status: str, line: str) -> int:
    """Mark the run's summary (rank 0 only); the number of completed epochs. Where the disk is
    too full for it, a warning says so, unless the full disk is the error itself."""
    from gnntrain.engine.recorder import record_stop

    if int(os.environ.get("RANK", "0")) != 0:
        return 0
    try:
        return record_stop(run_dir, status, line, cfg.train.warmup_epochs)
    except DiskFull as exc:
        if DiskFull.PHRASE not in line:
            warn(f"summary.json could not be marked {status}: {exc}")
        return 0


def _stop_interrupted(exc: JobInterrupted, cfg: DictConfig, run_dir: Path) -> None:
    epochs = _record_stop(cfg, run_dir, "interrupted", str(exc))
    print(f"gnntrain: {exc} after {epochs} completed epoch(s); partial results in {run_dir}", file=sys.stderr,
          flush=True)
    sys.exit(128 + exc.signum)


def _exit_with(exc: BaseException, run_dir: Path | None = None, hint: str = "") -> None:
    """Print the one-line error (and ``hint``) and exit: 1 when a started job failed, 2 for bad input."""
    if os.environ.get("GNNTRAIN_DEBUG") == "1":
        raise exc
    print(f"gnntrain: error: {one_line(exc)}{hint}" + _worker_traceback(exc, run_dir), file=sys.stderr)
    sys.exit(1 if isinstance(exc, WorkerFailed) else 2)


def _world_broken(exc: BaseException) -> bool:
    """Whether a failed worker leaves this process's world unusable for the sweep's next jobs:
    under torchrun every job of a sweep runs in the same process group, which a rank that failed
    has broken, so the sweep ends here (torchrun then stops the other ranks)."""
    return isinstance(exc, WorkerFailed) and under_torchrun()


def _unswept_knob_hint(exc: BaseException, argv: list[str]) -> str:
    """Hydra composes a sweep's config once before its jobs, with the values not swept: a knob
    of one strategy (model) given one plain value fails there for the options without it. The
    way to give it: a sweep of that one value, which each job then keeps where its option has
    the key (:mod:`gnntrain.job.sweep`)."""
    if not {"-m", "--multirun"} & set(argv):
        return ""
    for override in argv:
        key, _, value = override.partition("=")
        if (key.partition(".")[0] in ("strategy", "model") and "." in key and value
                and "," not in value and "(" not in value and key in one_line(exc)):
            return (f"; in a sweep, a knob that only some of the swept options have is given as a sweep of "
                    f"its value: {key}=choice({value})")
    return ""


def _worker_traceback(exc: BaseException, run_dir: Path | None) -> str:
    """The lines under the one-line error of a worker that raised: its traceback (file, line and
    the frames that led there) and the file that keeps it; under torchrun, a rank that failed
    after a peer (its connection to the peer broke) names the peer's instead."""
    from gnntrain.engine.recorder import ERROR_FILE

    if not isinstance(exc, WorkerFailed) or not exc.trace or exc.by_user_error:
        return ""
    kept = run_dir / ERROR_FILE if run_dir is not None else None
    if kept is None or not kept.exists():
        return f"\nworker rank {exc.rank}'s traceback:\n{exc.trace.rstrip()}"
    first = kept.read_text().partition("\n")[0]
    if first != str(exc):
        return f"\nthe first failure: {first}; its traceback is in {kept}"
    return f"\nworker rank {exc.rank}'s traceback (also in {kept}):\n{exc.trace.rstrip()}"


def register_sweeper() -> None:
    """Make gnntrain's sweeper known to Hydra, which finds plugins by listing the ``hydra_plugins``
    folders, which an editable install has none of. Imported after Hydra's scan of its plugins,
    which executes the basic sweeper's module again: the subclass must extend the class it left."""
    from hydra.core.plugins import Plugins

    plugins = Plugins.instance()
    from hydra_plugins.gnntrain_sweeper import KnobSweeper

    plugins.register(KnobSweeper)


def _catch_stops() -> dict:
    """SIGTERM, and SIGINT where it is not ignored (a background job), raise
    :class:`~gnntrain.errors.JobInterrupted`; the handlers they had."""
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, interrupt)
    if previous[signal.SIGINT] is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupt)
    return previous


def _restore(handlers: dict) -> None:
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def main() -> None:
    """The command: stops are handled from its first step and held until its job's run dir is its
    own (:func:`_job`); one that comes while it ends another way ends it in one line too."""
    previous = _catch_stops()
    hold_stops()
    reached("handlers")
    try:
        _command()
    except JobInterrupted as exc:
        print(f"gnntrain: {exc}", file=sys.stderr, flush=True)
        sys.exit(128 + exc.signum)
    finally:
        _restore(previous)
        with suppress(JobInterrupted):  # held during --help or an error exit: the command ends anyway
            release_stops()
    if LAST_SWEEP.failed:
        print(f"gnntrain: error: {len(LAST_SWEEP.failed)} of {LAST_SWEEP.jobs} sweep jobs failed: "
              + "; ".join(LAST_SWEEP.failed), file=sys.stderr)
        sys.exit(1)
    if under_torchrun():
        leave_torchrun_world()


def _command() -> None:
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let composition errors reach us, not Hydra's printer
    try:
        # imports the strategies, and the plugins GNNTRAIN_PLUGINS names: their errors are one line too
        from gnntrain.job.composition import register_schemas
        from gnntrain.job.launch.fork_server import worker_context

        register_schemas()
        register_sweeper()
        reached("registered")
        if wants_help(sys.argv[1:]):
            print_help(sys.argv[1:])
            return
        refuse_set_by_gnntrain(sys.argv[1:])
        if not under_torchrun():
            reached("fork-server")
            worker_context()  # the fork server imports torch while this process composes the job
        _job()
        release_stops()  # a stop held after the last job (or where no job ran) ends the command here
    except JobInterrupted:
        raise
    except (HydraException, OmegaConfBaseException, GnntrainError) as exc:
        _exit_with(exc, hint=_unswept_knob_hint(exc, sys.argv[1:]))
    except SweepRefused as exc:
        print(f"gnntrain: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:  # a run dir or cache that cannot be made or written (no such parent, read-only, full)
        where = exc.filename or "the run dir or partition.cache_dir"
        print(f"gnntrain: error: cannot write {where}: {exc.strerror or first_line(exc)}", file=sys.stderr)
        sys.exit(2)


def partition_main() -> None:
    """``gnntrain-partition``: ``gnntrain partition.only=true``."""
    sys.argv.append("partition.only=true")
    main()


if __name__ == "__main__":
    main()
