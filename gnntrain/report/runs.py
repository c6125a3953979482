"""The runs a report reads: every completed run at or below a folder, each from its own files
(``summary.json``, ``metrics.jsonl`` and Hydra's ``.hydra/config.yaml``), so runs copied back from a
cluster read the same."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from gnntrain.config import flatten
from gnntrain.engine.metrics import EpochRecord, read_records
from gnntrain.engine.summary import SUMMARY_FILE, SUMMARY_LIMIT, RunSummary
from gnntrain.storage.files import read_text_checked
from gnntrain.errors import GnntrainError, first_line, warn


@dataclass
class Run:
    path: Path
    summary: RunSummary
    config: dict = field(default_factory=dict)
    """The flattened config (``section.key`` -> value) Hydra saved, interpolations resolved;
    empty if none was saved."""
    records: list[EpochRecord] = field(default_factory=list)
    interpolated: frozenset[str] = frozenset()
    """The keys of ``config`` whose saved value is an interpolation (``${seed}``): they follow
    other keys."""


def one_clock(*groups: list[Run]) -> str:
    """The clock every run of ``groups`` was timed on (``summary.json``'s ``clock``); a one-line
    error where they differ (:func:`same_clock`)."""
    return same_clock([(run.summary.clock, str(run.path)) for group in groups for run in group])


def same_clock(timed: list[tuple[str, str]]) -> str:
    """The one clock of ``(clock, run)`` pairs; a one-line error where they differ: a ratio of a
    wall-clock time to a virtual one compares two clocks, not two methods."""
    clocks = dict(timed)
    if len(clocks) > 1:
        named = ", ".join(f"{clock} ({run})" for clock, run in sorted(clocks.items()))
        raise GnntrainError(f"runs timed on different clocks cannot share a ratio: {named}; valid: runs of one "
                            "cluster.clock")
    return next(iter(clocks), "wall")


def find_runs(root: Path) -> list[Run]:
    """Every completed run at or below ``root`` (sorted by path); the others (``status``
    running, failed or interrupted) and links to folders (not followed: a link can loop or lead
    anywhere) are left out with a one-line notice; one-line errors for a bad path."""
    if not root.exists():
        raise GnntrainError(f"no such directory: {root}")
    if not root.is_dir():
        raise GnntrainError(f"not a directory: {root} (give a run directory or a multirun directory)")
    for link in sorted(p for p in root.rglob("*") if p.is_symlink() and p.is_dir()):
        warn(f"left out {link.relative_to(root)}: a link to a folder ({os.readlink(link)}), which is not followed; "
             f"valid: the run folders themselves under {root}")
    summaries = sorted(root.rglob("summary.json"), key=lambda p: natural_key(p.parent.relative_to(root)))
    runs = []
    for path in summaries:
        if "calibration_probe" in path.parts:
            continue
        try:
            runs.append(load_run(path.parent))
        except GnntrainError as exc:
            warn(f"left out {path.parent.relative_to(root) if path.parent != root else root}: {exc}")
    completed = [run for run in runs if run.summary.status == "completed"]
    if len(completed) < len(runs):
        warn(f"left out {len(runs) - len(completed)} run(s) that did not complete: "
             + ", ".join(f"{run.path.relative_to(root)} ({run.summary.status})" for run in runs
                         if run not in completed))
    if not completed:
        raise GnntrainError(f"no runs under {root}: no summary.json of a completed run found")
    return completed


def natural_key(path: Path) -> list:
    """Sort key: numbered job folders in numeric order, named folders after them."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in path.parts]


REPORTED_SUMMARY_KEYS = ("status", "strategy", "model", "dataset", "world_size", "mean_epoch_time",
                         "mean_compute_time", "mean_comm_time", "mean_comm_total_time", "mean_reduce_time",
                         "mean_comm_bytes_per_epoch", "best_val", "test_at_best_val", "peak_mem_mb")
"""The keys of ``summary.json`` every run's row needs (:func:`figures`)."""


def load_run(path: Path) -> Run:
    """The run in ``path``; GnntrainError in one line where its files cannot be read."""
    try:
        saved = json.loads(read_text_checked(path / SUMMARY_FILE, SUMMARY_LIMIT))
    except (OSError, ValueError) as exc:
        raise GnntrainError(f"cannot read {path / SUMMARY_FILE}: {first_line(exc)}") from None
    lacking = [key for key in REPORTED_SUMMARY_KEYS if not isinstance(saved, dict) or key not in saved]
    if lacking:
        raise GnntrainError(f"{path / SUMMARY_FILE} lacks {', '.join(lacking)}")
    try:
        summary = RunSummary.from_dict(saved)
    except TypeError as exc:
        raise GnntrainError(f"cannot read {path / SUMMARY_FILE}: {first_line(exc)}") from None
    hydra_config = path / ".hydra" / "config.yaml"
    try:
        config, interpolated = resolved_config(hydra_config) if hydra_config.exists() else ({}, frozenset())
    except Exception as exc:  # noqa: BLE001 - YAML and OmegaConf errors alike: the file is unreadable
        raise GnntrainError(f"cannot read {hydra_config}: {first_line(exc)}") from None
    try:
        records = read_records(path / "metrics.jsonl")
    except (OSError, ValueError, TypeError) as exc:
        raise GnntrainError(f"cannot read {path / 'metrics.jsonl'}: {first_line(exc)}") from None
    return Run(path, summary, config, records, interpolated)


def resolved_config(path: Path) -> tuple[dict, frozenset[str]]:
    """The flattened config saved at ``path`` with its interpolations resolved against it, and the
    keys that held one. An interpolation that cannot be resolved here (Hydra's own resolvers,
    an environment variable this shell lacks) is kept as written."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    saved = OmegaConf.load(path)
    config = flatten(OmegaConf.to_container(saved, resolve=False))
    interpolated = frozenset(k for k, v in config.items() if "${" in json.dumps(v))
    for key in interpolated:
        try:
            node = OmegaConf.select(saved, key, throw_on_resolution_failure=True)
            config[key] = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
        except OmegaConfBaseException:
            pass
    return config, interpolated
