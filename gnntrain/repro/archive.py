"""A build's runs, committed beside its table (``results/<paper>/runs.tar.gz``), so that the table
can be rebuilt from them byte for byte (``python -m gnntrain.repro <paper> --tables-only --runs
DIR``, ``tests/test_committed_tables.py``): of every job the build read, failed ones included, the
files a table is built from — ``summary.json``, ``metrics.jsonl``, the ``trace.jsonl`` of the runs
its share curve replays and Hydra's ``.hydra/*.yaml`` (the job's config, its choices, its
overrides) — each with its modification time, which a job's wall time in ``runs.csv`` is read
from. Checkpoints, W&B folders and calibration probes stay out.
An archive is unpacked only after every member has been checked (:func:`extract_runs_archive`):
one that is not a plain file or folder, or would land outside the folder (tarfile's ``data``
filter), or an archive of more than :data:`MAX_MEMBERS` members or :data:`MAX_BYTES` bytes, is
refused in one line with nothing extracted."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path
from typing import BinaryIO

from gnntrain.errors import GnntrainError, first_line
from gnntrain.storage.files import write_atomically

KEPT = ("summary.json", "metrics.jsonl")
"""A job's files a table reads, besides ``.hydra/*.yaml`` and a replayed run's :data:`TRACE`."""
MAX_MEMBERS = 20_000
MAX_BYTES = 2 << 30
"""The most members and bytes an archive unpacks to (the committed ones: at most 336 members and
22 MiB)."""
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
    def write(fileobj: BinaryIO) -> None:  # gzip names the archive, not the temporary file it is written to
        with gzip.GzipFile(path.name, "wb", fileobj=fileobj) as packed, tarfile.open(fileobj=packed, mode="w") as archive:
            for file in archived_files(runs_root, sweeps, replayed):
                info = archive.gettarinfo(str(file), arcname=str(file.relative_to(runs_root)))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode = 0o644
                with open(file, "rb") as fh:
                    archive.addfile(info, fh)

    write_atomically(path, write)  # a link planted at path is replaced, never written through


def extract_runs_archive(path: Path, into: Path) -> Path:
    """The runs of the archive ``path`` unpacked under ``into``; ``into``. Every member is checked
    before any is extracted (module docstring); GnntrainError in one line otherwise."""
    try:
        with tarfile.open(path, "r:gz") as archive:
            members, total = [], 0
            for member in archive:
                if not (member.isfile() or member.isdir()):
                    raise GnntrainError(f"{path}: member {member.name} is not a plain file or folder (a link, a "
                                        "device); valid: an archive gnntrain.repro wrote")
                try:
                    tarfile.data_filter(member, str(into))
                except tarfile.FilterError as exc:
                    raise GnntrainError(f"{path}: member {member.name}: {first_line(exc)}; valid: members inside "
                                        "the folder it unpacks into") from None
                members.append(member)
                total += member.size
                if len(members) > MAX_MEMBERS or total > MAX_BYTES:
                    raise GnntrainError(f"{path}: more than {MAX_MEMBERS} members or {MAX_BYTES >> 30} GiB; valid: "
                                        "the runs of one table")
            into.mkdir(parents=True, exist_ok=True)
            archive.extractall(into, members=members, filter="data")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise GnntrainError(f"{path}: cannot be unpacked ({first_line(exc)}); valid: a runs.tar.gz "
                            "gnntrain.repro wrote") from None
    return into
