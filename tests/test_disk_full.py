"""A full disk ends a run in one line naming the file, its summary says failed and why, and what
was written completely stays usable: nothing partly written is left looking complete.

The run dir lies on a small tmpfs mounted for the test; where mounting is not allowed (not root)
the tests skip saying so."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from types import SimpleNamespace

from gnntrain.engine.recorder import JsonlSink
from gnntrain.engine.summary import RunSummary
from gnntrain.errors import DiskFull

GNNTRAIN = str(Path(sys.executable).with_name("gnntrain"))
ENV = {**os.environ, "WANDB_MODE": "disabled"}
JOB = ["dataset.num_nodes=300", "train.epochs=40", "train.checkpoint_every=1"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 200 KiB filesystem: two checkpoints of the job fit, the third does not."""
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(tmp_path)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mounted.stderr.strip() or 'not permitted'})")
    try:
        yield tmp_path
    finally:
        subprocess.run(["umount", str(tmp_path)], check=True)


def _gnntrain(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([GNNTRAIN, *args], capture_output=True, text=True, env=ENV, timeout=180)


def test_a_disk_that_fills_mid_run_ends_it_in_one_line_keeping_complete_checkpoints(small_disk: Path) -> None:
    run_dir = small_disk / "run"
    res = _gnntrain(*JOB, f"hydra.run.dir={run_dir}")
    assert res.returncode == 1
    (line,) = res.stderr.strip().splitlines()
    # Every rank writes its own file of a checkpoint at once, so which rank finds the disk full
    # first is a race: the line names that rank, whichever it is.
    assert re.match(r"gnntrain: error: worker rank [01] failed: DiskFull: no space left to write "
                    + re.escape(str(run_dir / "checkpoints")), line) and "train.resume=true continues" in line
    summary = RunSummary.read(run_dir)
    assert summary.status == "failed" and "no space left to write" in summary.error
    kept = sorted((run_dir / "checkpoints").iterdir())
    assert kept and all((where / "manifest.json").exists() for where in kept)
    assert not list(run_dir.rglob("*.tmp"))


def test_a_full_disk_at_the_start_is_one_line_and_leaves_no_empty_config(small_disk: Path) -> None:
    filler = small_disk / "filler"
    subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1k", "count=400"], capture_output=True)
    run_dir = small_disk / "run"
    res = _gnntrain(*JOB, f"hydra.run.dir={run_dir}")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"gnntrain: error: no space left to write {run_dir / '.gnntrain.lock'} (0 bytes written, 0 bytes free there); "
        "free space on that filesystem, then train.resume=true continues from the last complete checkpoint"]
    assert not [p for p in run_dir.rglob("*") if p.is_file() and p.stat().st_size == 0 and p.name != ".gnntrain.lock"]


def test_a_record_that_fills_the_disk_is_one_error_and_closing_the_file_adds_none(small_disk: Path) -> None:
    """The write that finds the disk full raises DiskFull naming metrics.jsonl; the bytes it left
    in the file's buffer do not raise again when the sink closes (over the one-line error)."""
    sink = JsonlSink(small_disk / "metrics.jsonl")
    subprocess.run(["dd", "if=/dev/zero", f"of={small_disk / 'filler'}", "bs=1k", "count=400"], capture_output=True)
    record = SimpleNamespace(to_dict=lambda: {"epoch": 1, "loss": 0.5})
    try:
        with pytest.raises(DiskFull, match=re.escape(str(small_disk / "metrics.jsonl"))):
            for _ in range(50):
                sink.log(record)
    finally:
        sink.close()


def test_a_full_cache_is_named_as_the_cache_not_the_run_dir(small_disk: Path, tmp_path_factory) -> None:
    subprocess.run(["dd", "if=/dev/zero", f"of={small_disk / 'filler'}", "bs=1k", "count=400"], capture_output=True)
    run_dir = tmp_path_factory.mktemp("run")
    res = _gnntrain("dataset.num_nodes=300", "train.epochs=1", f"partition.cache_dir={small_disk / 'cache'}",
                    f"hydra.run.dir={run_dir}")
    (line,) = res.stderr.strip().splitlines()
    assert res.returncode != 0 and line.startswith(f"gnntrain: error: no space left to write {small_disk / 'cache'}")


@pytest.mark.slow
def test_a_file_size_limit_is_one_line_naming_the_limit(tmp_path: Path) -> None:
    """``ulimit -f`` stops a write (EFBIG): one line naming the file and the limit, not torch's
    'enforce fail': first METIS's spill of the features into the cache, then, the partition
    cached, a checkpoint's rank file."""
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (20 * 1024, resource.RLIM_INFINITY))

    cache = f"partition.cache_dir={tmp_path / 'cache'}"
    for attempt, where in (("spill", tmp_path / "cache" / "partitions"), ("checkpoint", tmp_path / "run")):
        run_dir = tmp_path / "run"
        res = subprocess.run([GNNTRAIN, *JOB, cache, f"hydra.run.dir={run_dir}"], capture_output=True, text=True,
                             env=ENV, timeout=180, preexec_fn=limited)
        (line,) = res.stderr.strip().splitlines()
        assert res.returncode != 0 and line.startswith("gnntrain: error: ")
        assert f"cannot write {where}" in line and "file-size limit (20480 bytes, ulimit -f" in line, line
        if attempt == "spill":  # partition without the limit: the next run's first write past it is a checkpoint
            subprocess.run([str(Path(GNNTRAIN).with_name("gnntrain-partition")), "dataset.num_nodes=300", cache,
                            "partition.parts=2", f"hydra.run.dir={tmp_path / 'partition'}"], capture_output=True,
                           env=ENV, timeout=180, check=True)
