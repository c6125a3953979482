"""A run's records — ``metrics.jsonl``, ``summary.json``, the W&B run, the console — behind one
interface, :class:`RunRecorder`, whoever runs the job.

Rank 0 of every job opens a recorder, logs each epoch to it, completes it with the summary and
closes it with the exit code. What differs between launches is only who holds the W&B run:

* a job of spawned workers: the launcher (:func:`follow_in_launcher`), so the run is finished
  whatever the workers' fate; it follows ``metrics.jsonl`` (:class:`WandbFollower`) and the
  recorder, told so by ``wandb.run``, opens none;
* a job under torchrun or submitit: rank 0's recorder itself (:class:`WandbSink`).

``summary.json`` says ``running`` from the first epoch on, ``completed`` at the end; a run that
stops early is marked ``failed`` or ``interrupted`` by whoever catches the error
(:func:`record_stop`). A worker that raised leaves its traceback in ``error.txt``
(:func:`write_worker_error`), which the summary names.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator

from gnntrain.config.schema import RootConfig
from gnntrain.config.typed import plain
from gnntrain.engine.checkpoint import discard_incomplete
from gnntrain.engine.metrics import EpochRecord, read_records
from gnntrain.engine.summary import SUMMARY_FILE, RunSummary
from gnntrain.errors import disk_full_named, interrupts_deferred, is_disk_full
from gnntrain.storage.files import write_atomically


class RunRecorder:
    """Rank 0's records of a run: ``metrics.jsonl`` (continuing ``kept``, a resumed run's epochs),
    W&B where enabled and the launcher holds no run for the job, and the console; ``facts`` (what
    the run is: dataset, strategy, partition, ...) head ``summary.json`` and gain the W&B run's
    identity."""

    def __init__(self, run: RootConfig, facts: RunSummary, kept: list[EpochRecord], wandb_id: str | None = None
                 ) -> None:
        """``wandb_id``: the W&B run to continue (a resumed run's)."""
        self.run_dir = Path(run.run_dir)
        self.warmup = run.train.warmup_epochs
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.sinks: list[Any] = [JsonlSink(self.run_dir / "metrics.jsonl", kept)]
        if run.wandb.run is not None:  # the launcher's (follow_in_launcher)
            facts = replace(facts, wandb=run.wandb.run)
        elif run.wandb.mode != "disabled":
            wandb_sink = WandbSink(run, self.run_dir, wandb_id)
            self.sinks.append(wandb_sink)
            facts = replace(facts, wandb=wandb_sink.identity())
        self.facts = facts
        replace(facts, status="running").with_records(kept, self.warmup).write(self.run_dir)
        self.sinks.append(ConsoleProgress(run.train.epochs, self.run_dir))

    @property
    def wandb_id(self) -> str | None:
        """The W&B run's id (checkpoints keep it, so a resumed run continues it)."""
        return self.facts.wandb["id"] if self.facts.wandb else None

    def log(self, record: EpochRecord) -> None:
        for sink in self.sinks:
            sink.log(record)

    def complete(self, records: list[EpochRecord], early_stop: dict | None, total_wall_time: float,
                 code: list[str]) -> RunSummary:
        """Write ``summary.json`` of the run completed with ``records`` and hand it to the sinks;
        returns it."""
        summary = self.facts.completed(records, self.warmup, early_stop, total_wall_time, code)
        summary.write(self.run_dir)
        for sink in self.sinks:
            sink.summarize(summary)
        return summary

    def close(self, exit_code: int) -> None:
        for sink in self.sinks:
            sink.close(exit_code)


@contextmanager
def closed_after(close: Callable[[int], None] | None) -> Iterator[None]:
    """Run the block, then ``close`` (a recorder's or a follower's) with its exit code: 0 where
    the block completed, 1 where it raised; signals wait while it closes. Nothing where ``close``
    is None (not rank 0, or no W&B run to follow)."""
    exit_code = 1
    try:
        yield
        exit_code = 0
    finally:
        if close is not None:
            with interrupts_deferred():
                close(exit_code)


def follow_in_launcher(run: RootConfig, wandb_id: str | None,
                       first_epoch: int) -> tuple[RootConfig, WandbFollower | None]:
    """The launcher's share of a spawned job's records: the job's W&B run (where enabled), opened
    here and fed from ``metrics.jsonl`` by the returned follower from ``first_epoch`` on; and
    ``run`` with ``wandb.run`` naming it, so that rank 0's recorder opens none."""
    if run.wandb.mode == "disabled":
        return run, None
    sink = WandbSink(run, Path(run.run_dir), wandb_id)
    follower = WandbFollower(sink, Path(run.run_dir), first_epoch)
    return replace(run, wandb=replace(run.wandb, run=sink.identity())), follower


class JsonlSink:
    """Appends each epoch's record to ``metrics.jsonl``, which it first replaces (atomically) by
    the ``kept`` records of a resumed run's epochs before the checkpoint (none for a new run).
    The replacement is a rename, so the new file's inode differs from an earlier run's file's:
    :class:`WandbFollower` tells them apart by it."""

    def __init__(self, path: Path, kept: list[EpochRecord] = ()) -> None:
        write_atomically(path, "".join(json.dumps(r.to_dict()) + "\n" for r in kept))
        self.file = open(path, "a", buffering=1)

    def log(self, record: EpochRecord) -> None:
        with disk_full_named(self.file.name):
            self.file.write(json.dumps(record.to_dict()) + "\n")
            self.file.flush()
            os.fsync(self.file.fileno())

    def summarize(self, summary: RunSummary) -> None:
        pass

    def close(self, exit_code: int = 0) -> None:
        """Close the file; the bytes of a record whose write found the disk full stay in its
        buffer, and flushing them fails again: that was reported once (DiskFull), and the file
        is closed all the same."""
        try:
            self.file.close()
        except OSError as exc:
            if not is_disk_full(exc):
                raise


class WandbSink:
    """Per-epoch numbers to a W&B run (rank 0 only). Offline runs live under the run dir. W&B's
    own console lines are kept out of the terminal unless ``wandb.verbose``; an offline run's
    upload command is printed with the summary instead."""

    def __init__(self, run: RootConfig, run_dir: Path, run_id: str | None = None) -> None:
        """``run_id``: continue that W&B run (a resumed run)."""
        import wandb

        options = run.wandb
        self.wandb_run = wandb.init(project=options.project, group=options.group, mode=str(options.mode),
                                    dir=str(run_dir), name=options.name or run_dir.name, config=plain(run),
                                    reinit="finish_previous", id=run_id, resume="allow" if run_id else None,
                                    settings=wandb.Settings(silent=not options.verbose))
        self.offline_dir = Path(self.wandb_run.dir).parent if options.mode == "offline" else None
        self.run_dir = run_dir

    def identity(self) -> dict[str, str | None]:
        """The run as W&B knows it: id, project, group, name."""
        known = self.wandb_run
        return {"id": known.id, "project": known.project, "group": known.group, "name": known.name}

    def log(self, record: EpochRecord) -> None:
        row = record.to_dict()
        for key in [k for k in row if k.endswith(("_by_kind", "_by_category"))]:
            prefix = key.removesuffix("_by_kind").removesuffix("_by_category")
            row.update({f"{prefix}/{k}": v for k, v in row.pop(key).items()})
        row.update({f"per_rank/{name}/{rank}": v for name, values in row.pop("per_rank").items()
                    for rank, v in enumerate(values)})
        row.update(row.pop("strategy_metrics"))
        self.wandb_run.log({k: v for k, v in row.items() if v is not None}, step=record.epoch)

    def summarize(self, summary: RunSummary) -> None:
        for key, value in summary.to_dict().items():
            self.wandb_run.summary[key] = value
        if self.offline_dir is not None:
            print(f"W&B offline run in {self.offline_dir}; upload it with: wandb sync {self.offline_dir}", flush=True)

    def close(self, exit_code: int = 0) -> None:
        """Finish the run; a failed one takes the failing worker's error line into its summary
        and ``error.txt`` among its files, where the worker's traceback is there by now (always
        for spawned workers: the launcher writes it first)."""
        worker_error = self.run_dir / ERROR_FILE
        if exit_code and worker_error.exists():
            self.wandb_run.summary["error"] = worker_error.read_text().partition("\n")[0]
            self.wandb_run.save(str(worker_error), base_path=str(self.run_dir), policy="now")
        self.wandb_run.finish(exit_code=exit_code)


class WandbFollower:
    """The W&B run of a spawned job, kept by the launcher: opened before the workers start, fed
    with each epoch that rank 0 appends to ``metrics.jsonl``, and finished after the workers
    have ended, however they ended (completed, failed, killed or stopped). A worker's fate
    cannot leave it unfinished. Under torchrun there is no such launcher: rank 0 keeps a
    :class:`WandbSink` itself.

    A ``metrics.jsonl`` already in the run dir (an earlier run's) is not read: rank 0 replaces
    it by another inode (:class:`JsonlSink`). Epochs up to ``first_epoch - 1`` (a resumed run's
    kept ones) are in the W&B run already."""

    def __init__(self, sink: WandbSink, run_dir: Path, first_epoch: int = 1) -> None:
        self.sink, self.run_dir = sink, run_dir
        self.logged = first_epoch - 1
        self.path = run_dir / "metrics.jsonl"
        self.stale = self.path.stat().st_ino if self.path.exists() else None
        self.inode, self.offset = None, 0

    def poll(self) -> None:
        """Log the epochs appended since the last call (complete lines only)."""
        try:
            file = self.path.open("rb")
        except FileNotFoundError:
            return
        with file:
            inode = os.fstat(file.fileno()).st_ino
            if inode == self.stale:
                return
            if inode != self.inode:
                self.inode, self.offset = inode, 0
            file.seek(self.offset)
            data = file.read()
        complete = data[:data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.splitlines():
            record = EpochRecord(**json.loads(line))
            if record.epoch > self.logged:
                self.sink.log(record)
                self.logged = record.epoch

    def finish(self, exit_code: int) -> None:
        """Log the last epochs, the summary of a completed run, and finish the W&B run."""
        self.poll()
        path = self.run_dir / SUMMARY_FILE
        summary = RunSummary.read(path) if path.exists() else None
        if exit_code == 0 and summary is not None and summary.status == "completed":
            self.sink.summarize(summary)
        self.sink.close(exit_code)


class ConsoleProgress:
    """A rich progress bar on a terminal; otherwise a plain line every ~5% of the epochs."""

    def __init__(self, epochs: int, run_dir: Path) -> None:
        self.epochs, self.run_dir = epochs, run_dir
        self.every = max(1, epochs // 20)
        self.progress = None
        if sys.stdout.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.progress = Progress(TextColumn("epoch"), MofNCompleteColumn(), BarColumn(),
                                     TextColumn("{task.fields[status]}"), TimeRemainingColumn())
            self.task = self.progress.add_task("train", total=epochs, status="")
            self.progress.start()

    @staticmethod
    def status(r: EpochRecord) -> str:
        val = "  -   " if r.val_acc is None else f"{r.val_acc:.4f}"
        return (f"loss {r.loss:.4f}  val {val}  {r.epoch_time * 1e3:7.1f} ms/epoch  "
                f"{r.comm_bytes / 2**20:8.2f} MiB/epoch")

    def log(self, record: EpochRecord) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=record.epoch, status=self.status(record))
        elif record.epoch == 1 or record.epoch % self.every == 0 or record.epoch == self.epochs:
            print(f"epoch {record.epoch:>{len(str(self.epochs))}}/{self.epochs}  {self.status(record)}", flush=True)

    def summarize(self, s: RunSummary) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        best = "-" if s.best_val is None else f"{s.best_val:.4f}"
        test = "-" if s.test_at_best_val is None else f"{s.test_at_best_val:.4f}"
        examined = f"and {s.examination_epochs} examination " if s.examination_epochs else ""
        print(f"done: best val {best} (epoch {s.best_epoch}), test at best val {test}; "
              f"mean epoch {s.mean_epoch_time * 1e3:.1f} ms ({s.warmup_epochs_excluded} warm-up {examined}"
              f"excluded), {s.mean_comm_bytes_per_epoch / 2**20:.2f} MiB/epoch; results in {self.run_dir}",
              flush=True)

    def close(self, exit_code: int = 0) -> None:
        if self.progress is not None:
            self.progress.stop()


ERROR_FILE = "error.txt"
"""A failed run's first failing worker: its one-line error, then its traceback."""


def write_worker_error(run_dir: Path, error: str, trace: str) -> Path | None:
    """``error.txt`` in ``run_dir``: the error line and the worker's traceback. The first failure
    of the run wins (a torchrun rank whose peer failed first fails too, with a broken connection):
    None where the file exists."""
    path = run_dir / ERROR_FILE
    try:
        with open(path, "x") as fh:
            fh.write(f"{error}\n\n{trace}")
    except FileExistsError:
        return None
    except OSError as exc:  # a full disk: the error line still reaches the console and the summary
        if not is_disk_full(exc):
            raise
        path.unlink(missing_ok=True)
        return None
    return path


def forget_worker_error(run_dir: Path) -> None:
    """Remove an earlier attempt's ``error.txt`` (a resumed or restarted run in the same dir)."""
    (run_dir / ERROR_FILE).unlink(missing_ok=True)


def record_stop(run_dir: Path, status: str, error: str, warmup_epochs: int) -> int:
    """Mark a run that did not complete: its ``summary.json`` gets ``status`` (``failed`` or
    ``interrupted``), the error line, and the figures of the epochs ``metrics.jsonl`` holds.
    Where a worker's traceback is in ``error.txt``, the run failed: the summary takes that
    worker's error line (not this rank's, which may be a peer's broken connection or torchrun
    stopping it) and ``error_file`` names the file. Returns the number of completed epochs."""
    path = run_dir / SUMMARY_FILE
    summary = RunSummary.read(path) if path.exists() else RunSummary()
    if path.exists() and summary.status == "completed":
        return summary.epochs
    worker_error, error_file = run_dir / ERROR_FILE, None
    if worker_error.exists():
        status, error, error_file = "failed", worker_error.read_text().partition("\n")[0], ERROR_FILE
    summary = summary.stopped(status, error, read_records(run_dir / "metrics.jsonl"), warmup_epochs, error_file)
    run_dir.mkdir(parents=True, exist_ok=True)
    discard_incomplete(run_dir)  # never resumed from; on a full disk their space lets the summary be written
    summary.write(run_dir)
    return summary.epochs
