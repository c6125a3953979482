"""A build's runs, committed beside its table (``results/<paper>/runs.tar.gz``), so that the table
can be rebuilt from them byte for byte (``python -m gnntrain.repro <paper> --tables-only --runs
DIR``, ``tests/test_committed_tables.py``): of every job the build read, failed ones included, the
files a table is built from — ``summary.json``, ``metrics.jsonl``, the ``trace.jsonl`` of the runs
its share curve replays and Hydra's ``.hydra/*.yaml`` (the job's config, its choices, its
overrides) — each with its modification time, which a job's wall time in ``runs.csv`` is read
from. Checkpoints, W&B folders and calibration probes stay out.
An archive is unpacked with tarfile's ``data`` filter: a member that would land outside the
folder, or that is not a plain file or folder, is refused."""

from __future__ import annotations

import tarfile
from pathlib import Path

KEPT = ("summary.json", "metrics.jsonl")
"""A job's files a table reads, besides ``.hydra/*.yaml`` and a replayed run's :data:`TRACE`."""
TRACE = "trace.jsonl"
"""A traced run's record, kept for the runs the share curve times again (:mod:`gnntrain.repro.replayed`)."""


def archived_files(runs_root: Path, sweeps: list[str], replayed: tuple[Path, ...] = ()) -> list[Path]:
    """The files of the jobs under ``runs_root``'s ``sweeps`` that a table reads, in path order;
    ``trace.jsonl`` of the ``replayed`` run folders only."""
    files = []
    for sweep in sweeps:
        folder = runs_root / sweep
        if not folder.is_dir():
            continue
        for path in folder.rglob("*"):
            inside = path.relative_to(runs_root).parts
            if "calibration_probe" in inside or not path.is_file():
                continue
            if (path.name in KEPT or (path.name == TRACE and path.parent in replayed)
                    or (path.parent.name == ".hydra" and path.suffix == ".yaml")):
                files.append(path)
    return sorted(files)


def write_runs_archive(runs_root: Path, sweeps: list[str], path: Path, replayed: tuple[Path, ...] = ()) -> None:
    """The table's runs (:func:`archived_files`) to ``path``, named relative to ``runs_root``, with
    no owner and a fixed mode, so that the same runs give the same members."""
    with tarfile.open(path, "w:gz") as archive:
        for file in archived_files(runs_root, sweeps, replayed):
            info = archive.gettarinfo(str(file), arcname=str(file.relative_to(runs_root)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o644
            with open(file, "rb") as fh:
                archive.addfile(info, fh)


def extract_runs_archive(path: Path, into: Path) -> Path:
    """The runs of the archive ``path`` unpacked under ``into`` (tarfile's ``data`` filter); ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "r:gz") as archive:
        archive.extractall(into, filter="data")
    return into
