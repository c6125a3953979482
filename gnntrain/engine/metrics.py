"""Per-epoch records and where they go: ``metrics.jsonl``, W&B, and the console.

The results contract: each epoch appends one JSON object to ``metrics.jsonl`` (flushed at
once, so a crashed job keeps the epochs it completed). Times are the maximum over ranks
(seconds), bytes the sum over ranks of payload bytes sent, memory the maximum over ranks.
Communication is reported per category (:mod:`gnntrain.comm.meter`: ``data``, ``sync``,
``control``), with the same meaning for every strategy. For multilabel datasets the
``*_acc`` fields hold F1-micro.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import torch

from gnntrain.files import write_atomically


@dataclass
class EpochRecord:
    """One epoch of a run: one line of ``metrics.jsonl``, one W&B step (nested dicts flattened
    as ``comm_bytes/<kind or category>``, ``comm_time/<category>``, ``comm_total_time/<category>``)."""

    epoch: int
    """The epoch, from 1."""
    loss: float
    """Training loss of the epoch (mean over its iterations for mini-batch strategies)."""
    train_acc: Optional[float]
    """Score on the training nodes (accuracy; F1-micro for multilabel graphs); null on epochs without evaluation."""
    val_acc: Optional[float]
    """Score on the validation nodes; null on epochs without evaluation."""
    test_acc: Optional[float]
    """Score on the test nodes; null on epochs without evaluation."""
    epoch_time: float
    """Seconds of training in the epoch, evaluation left out, max over ranks; on a GPU it ends
    with the device synchronised."""
    compute_time: float
    """``epoch_time`` less the exposed communication of every category."""
    comm_time: float
    """Exposed ``data`` communication: seconds a rank waited on the traffic its method moves to
    compute (halo rows, stage activations; their gradients), max over ranks; on a GPU the
    seconds the device's stream stalled (:mod:`gnntrain.comm.communicator`)."""
    comm_total_time: float
    """Seconds the ``data`` transfers were in flight, overlapped or not (max over ranks)."""
    reduce_time: float
    """Exposed ``sync`` communication: seconds a rank waited on gradient all-reduces and
    cross-rank statistics (max over ranks)."""
    eval_time: float
    """Seconds of evaluation after the epoch (0 where none was due)."""
    comm_bytes: int
    """Payload bytes sent in training (categories ``data``, ``sync``, ``control``), summed over ranks."""
    comm_bytes_by_kind: dict[str, int] = field(default_factory=dict)
    """Bytes per traffic kind (below), ``eval_`` and ``diag_`` kinds included."""
    comm_bytes_by_category: dict[str, int] = field(default_factory=dict)
    """Bytes per category, ``eval`` and ``diag`` included."""
    comm_time_by_category: dict[str, float] = field(default_factory=dict)
    """Exposed seconds per training category (``data``, ``sync``, ``control``), max over ranks."""
    comm_total_time_by_category: dict[str, float] = field(default_factory=dict)
    """In-flight seconds per training category, max over ranks."""
    eval_comm_bytes: int = 0
    """Bytes sent by evaluation, summed over ranks."""
    link_busy_time: float = 0.0
    """Under an emulated network: seconds the rank's links spent moving its training bytes
    (bytes / bandwidth), max over ranks; 0 on the real transport."""
    link_latency_time: float = 0.0
    """Under an emulated network: seconds of latency terms of the rank's training transfers,
    max over ranks."""
    peak_mem_mb: float = 0.0
    """Peak memory in the epoch, max over ranks: CPU, the peak resident set; GPU, the peak allocated."""
    strategy_metrics: dict[str, float] = field(default_factory=dict)
    """Every strategy's ``projected_rows`` (rows through the models' weight maps, summed over
    ranks) and the strategy's own figures (see each strategy's page)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak-memory window (per epoch): CUDA allocator stats, or Linux's RSS
    high-water mark via ``/proc/self/clear_refs``."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory since :func:`reset_peak_memory`: CUDA bytes allocated, or peak RSS on CPU
    (``VmHWM``; the process lifetime peak where that cannot be reset)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class JsonlSink:
    """Appends each epoch's record to ``metrics.jsonl``, which it first replaces (atomically) by
    the ``kept`` records of a resumed run's epochs before the checkpoint (none for a new run).
    The replacement is a rename, so the new file's inode differs from an earlier run's file's:
    :class:`WandbFollower` tells them apart by it."""

    def __init__(self, path: Path, kept: list[EpochRecord] = ()) -> None:
        write_atomically(path, "".join(json.dumps(r.to_dict()) + "\n" for r in kept))
        self.file = open(path, "a", buffering=1)

    def log(self, record: EpochRecord) -> None:
        self.file.write(json.dumps(record.to_dict()) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())

    def summarize(self, summary: dict) -> None:
        pass

    def close(self, exit_code: int = 0) -> None:
        self.file.close()


class WandbSink:
    """Per-epoch numbers to a W&B run (rank 0 only). Offline runs live under the run dir. W&B's
    own console lines are kept out of the terminal unless ``wandb.verbose``; an offline run's
    upload command is printed with the summary instead."""

    def __init__(self, cfg: dict, run_dir: Path, run_id: str | None = None) -> None:
        """``run_id``: continue that W&B run (a resumed run)."""
        import wandb

        wcfg = cfg["wandb"]
        self.run = wandb.init(project=wcfg["project"], group=wcfg["group"], mode=wcfg["mode"],
                              dir=str(run_dir), name=wcfg["name"] or run_dir.name, config=cfg, reinit="finish_previous",
                              id=run_id, resume="allow" if run_id else None,
                              settings=wandb.Settings(silent=not wcfg["verbose"]))
        self.offline_dir = Path(self.run.dir).parent if wcfg["mode"] == "offline" else None

    def identity(self) -> dict[str, str | None]:
        """The run as W&B knows it: id, project, group, name."""
        return {"id": self.run.id, "project": self.run.project, "group": self.run.group, "name": self.run.name}

    def log(self, record: EpochRecord) -> None:
        row = record.to_dict()
        for key in ("comm_bytes_by_kind", "comm_bytes_by_category", "comm_time_by_category",
                    "comm_total_time_by_category"):
            prefix = key.removesuffix("_by_kind").removesuffix("_by_category")
            row.update({f"{prefix}/{k}": v for k, v in row.pop(key).items()})
        row.update(row.pop("strategy_metrics"))
        self.run.log({k: v for k, v in row.items() if v is not None}, step=record.epoch)

    def summarize(self, summary: dict) -> None:
        for key, value in summary.items():
            self.run.summary[key] = value
        if self.offline_dir is not None:
            print(f"W&B offline run in {self.offline_dir}; upload it with: wandb sync {self.offline_dir}", flush=True)

    def close(self, exit_code: int = 0) -> None:
        self.run.finish(exit_code=exit_code)


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
        path = self.run_dir / "summary.json"
        summary = json.loads(path.read_text()) if path.exists() else {}
        if exit_code == 0 and summary.get("status") == "completed":
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
                f"{r.comm_bytes / 2**20:8.2f} MB/epoch")

    def log(self, record: EpochRecord) -> None:
        if self.progress is not None:
            self.progress.update(self.task, completed=record.epoch, status=self.status(record))
        elif record.epoch == 1 or record.epoch % self.every == 0 or record.epoch == self.epochs:
            print(f"epoch {record.epoch:>{len(str(self.epochs))}}/{self.epochs}  {self.status(record)}", flush=True)

    def summarize(self, s: dict) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        best = "-" if s["best_val"] is None else f"{s['best_val']:.4f}"
        test = "-" if s["test_at_best_val"] is None else f"{s['test_at_best_val']:.4f}"
        print(f"done: best val {best} (epoch {s['best_epoch']}), test at best val {test}; "
              f"mean epoch {s['mean_epoch_time'] * 1e3:.1f} ms (first {s['warmup_epochs_excluded']} "
              f"{'and ' + str(s['examination_epochs']) + ' examination ' if s['examination_epochs'] else ''}"
              f"excluded), {s['mean_comm_bytes_per_epoch'] / 2**20:.2f} MB/epoch; results in {self.run_dir}",
              flush=True)

    def close(self, exit_code: int = 0) -> None:
        if self.progress is not None:
            self.progress.stop()


def write_summary(run_dir: Path, summary: dict) -> None:
    """``summary.json``, replaced atomically (a reader never sees half a file)."""
    write_atomically(run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")


def read_records(path: Path) -> list[EpochRecord]:
    """The epochs of a ``metrics.jsonl`` (a line cut short by a killed writer is left out)."""
    records = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            records.append(EpochRecord(**json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            break
    return records


def record_stop(run_dir: Path, status: str, error: str, warmup_epochs: int) -> int:
    """Mark a run that did not complete: its ``summary.json`` gets ``status`` (``failed`` or
    ``interrupted``), the error line, and the figures of the epochs ``metrics.jsonl`` holds.
    Returns the number of completed epochs."""
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    if summary.get("status") == "completed":
        return summary["epochs"]
    summary.update(summarize(read_records(run_dir / "metrics.jsonl"), warmup_epochs), status=status, error=error)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_summary(run_dir, summary)
    return summary["epochs"]


def summarize(records: list[EpochRecord], warmup_epochs: int) -> dict[str, Any]:
    """Best validation score, test score at that epoch, and per-epoch means over the steady
    epochs: those after the first ``warmup_epochs`` that are not part of a strategy's
    examination (``strategy_metrics["examination"]``, e.g. HopGNN timing its merge counts),
    all epochs if there are no others. The examination epochs' mean time is reported apart."""
    evaluated = [r for r in records if r.val_acc is not None]
    best = max(evaluated, key=lambda r: r.val_acc, default=None)
    examined = [r for r in records if r.strategy_metrics.get("examination")]
    steady = [r for r in records[warmup_epochs:] if not r.strategy_metrics.get("examination")]
    warmed = min(warmup_epochs, len(records)) if steady else 0
    steady = steady or records
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return {
        "epochs": len(records),
        "best_val": best.val_acc if best else None,
        "test_at_best_val": best.test_acc if best else None,
        "best_epoch": best.epoch if best else None,
        "final_loss": records[-1].loss if records else None,
        "warmup_epochs_excluded": warmed,
        "examination_epochs": len(examined),
        "mean_examination_epoch_time": mean([r.epoch_time for r in examined]),
        "mean_epoch_time": mean([r.epoch_time for r in steady]),
        "mean_compute_time": mean([r.compute_time for r in steady]),
        "mean_comm_time": mean([r.comm_time for r in steady]),
        "mean_comm_total_time": mean([r.comm_total_time for r in steady]),
        "mean_reduce_time": mean([r.reduce_time for r in steady]),
        "mean_link_busy_time": mean([r.link_busy_time for r in steady]),
        "mean_link_latency_time": mean([r.link_latency_time for r in steady]),
        "mean_comm_bytes_per_epoch": mean([r.comm_bytes for r in steady]),
        **{f"mean_{field}": {k: mean([getattr(r, field).get(k, 0) for r in steady])
                             for k in sorted({k for r in steady for k in getattr(r, field)})}
           for field in ("comm_bytes_by_kind", "comm_bytes_by_category", "comm_time_by_category",
                         "comm_total_time_by_category")},
        "peak_mem_mb": max((r.peak_mem_mb for r in records), default=None),
        "mean_strategy_metrics": {k: mean([r.strategy_metrics[k] for r in steady if k in r.strategy_metrics])
                                  for k in sorted({k for r in steady for k in r.strategy_metrics})},
    }
