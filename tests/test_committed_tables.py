"""A committed table rebuilds byte for byte from the runs committed beside it
(``results/<paper>/runs.tar.gz``, :mod:`gnntrain.repro.archive`): the tables below the header line
(which names the commit and the build's wall time) and every run's row in ``runs.csv``."""

from __future__ import annotations

import io
import re
import sys
import tarfile
from pathlib import Path

import pytest

from gnntrain.errors import GnntrainError
from gnntrain.repro import CHECKOUT, build
from gnntrain.repro import archive as archive_module
from gnntrain.repro.archive import archived_files, extract_runs_archive, write_runs_archive

ARCHIVES = sorted(CHECKOUT.glob("results/*/runs.tar.gz"))
SLOW = {"hopgnn": "its Table 1 samples micrographs of 10 layers on the arxiv-sized graph again: minutes",
        "gnnpipe": "19 s here, a twentieth of the fast suite's six minutes",
        "pipeqs": "11 s here: 8 ranks' traced runs, each replayed at 24 bandwidths",
        "granndis": "9 s here: idem",
        "bns": "9 s here: 4 speed sweeps' runs and the share curve replayed",
        "adaqp": "7 s here: idem, at two device settings"}
"""Tables whose rebuild from their runs takes long, run with the slow tests."""


@pytest.mark.parametrize("archive", [pytest.param(path, marks=pytest.mark.slow if path.parent.name in SLOW else ())
                                     for path in ARCHIVES], ids=lambda path: path.parent.name)
def test_a_table_rebuilds_byte_for_byte_from_its_committed_runs(archive: Path, tmp_path: Path, monkeypatch) -> None:
    runs = extract_runs_archive(archive, tmp_path / "runs")
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["gnntrain.repro", archive.parent.name, "--tables-only", "--runs", str(runs),
                                      "--out", str(out)])
    build.main()
    committed = archive.parent
    assert (out / "table.md").read_text().split("\n", 1)[1] == (committed / "table.md").read_text().split("\n", 1)[1]
    assert (out / "runs.csv").read_text() == (committed / "runs.csv").read_text()


def test_an_archive_keeps_what_a_table_reads_and_refuses_a_member_outside_its_folder(tmp_path: Path) -> None:
    job = tmp_path / "runs" / "speed" / "repeat0" / "0"
    (job / ".hydra").mkdir(parents=True)
    (job / "checkpoints").mkdir()
    for name in ("summary.json", "metrics.jsonl", ".hydra/config.yaml", "checkpoints/rank0.pt", "wandb.log",
                 "trace.jsonl"):
        (job / name).write_text(name)
    other = job.parent / "1"
    other.mkdir()
    (other / "trace.jsonl").write_text("not replayed")
    (job / "calibration_probe" / "preset").mkdir(parents=True)
    (job / "calibration_probe" / "preset" / "summary.json").write_text("{}")
    kept = [path.relative_to(tmp_path / "runs").as_posix()
            for path in archived_files(tmp_path / "runs", ["speed"], replayed=(job,))]
    assert kept == ["speed/repeat0/0/.hydra/config.yaml", "speed/repeat0/0/metrics.jsonl",
                    "speed/repeat0/0/summary.json", "speed/repeat0/0/trace.jsonl"], \
        "a trace only where the share curve replays it"
    (tmp_path / "someone_elses").write_text("keep me")
    (tmp_path / "runs.tar.gz").symlink_to(tmp_path / "someone_elses")
    write_runs_archive(tmp_path / "runs", ["speed"], tmp_path / "runs.tar.gz")
    assert (tmp_path / "someone_elses").read_text() == "keep me", "a planted link is replaced, not written through"
    back = extract_runs_archive(tmp_path / "runs.tar.gz", tmp_path / "back")
    assert (back / "speed" / "repeat0" / "0" / "summary.json").stat().st_mtime == (job / "summary.json").stat().st_mtime
    with tarfile.open(tmp_path / "evil.tar.gz", "w:gz") as evil:
        evil.add(job / "summary.json", arcname="../outside.json")
    with pytest.raises(GnntrainError, match="member ../outside.json: .*valid: members inside"):
        extract_runs_archive(tmp_path / "evil.tar.gz", tmp_path / "unpacked")
    assert not (tmp_path / "outside.json").exists()


def _archive(path: Path, members: list[tuple[str, bytes | str]]) -> Path:
    """A .tar.gz of ``(name, content)`` members: bytes a file's, a str a link to it."""
    with tarfile.open(path, "w:gz") as archive:
        for name, content in members:
            info = tarfile.TarInfo(name)
            if isinstance(content, str):
                info.type, info.linkname = tarfile.SYMTYPE, content
                archive.addfile(info)
            else:
                info.size = len(content)
                archive.addfile(info, io.BytesIO(content))
    return path


@pytest.mark.parametrize("members, line", [
    ([("a/summary.json", b"{}"), ("a/link", "summary.json")], "member a/link is not a plain file or folder"),
    ([("a/summary.json", b"{}")] * 4, "more than 3 members"),
    ([("a/summary.json", b"x" * 5000)], "or 0 GiB"),
])
def test_an_archive_is_checked_whole_before_anything_is_unpacked(tmp_path: Path, monkeypatch, members: list,
                                                                  line: str) -> None:
    """A link among its members (after a good one), more members or bytes than the bounds: one
    line, nothing extracted; a file that is no archive likewise."""
    monkeypatch.setattr(archive_module, "MAX_MEMBERS", 3)
    monkeypatch.setattr(archive_module, "MAX_BYTES", 4096)
    with pytest.raises(GnntrainError, match=re.escape(line)) as refused:
        extract_runs_archive(_archive(tmp_path / "runs.tar.gz", members), tmp_path / "into")
    assert "\n" not in str(refused.value) and not (tmp_path / "into").exists()
    (tmp_path / "plain.tar.gz").write_text("not an archive")
    with pytest.raises(GnntrainError, match="cannot be unpacked"):
        extract_runs_archive(tmp_path / "plain.tar.gz", tmp_path / "into")
