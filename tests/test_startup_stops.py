"""A stop at any moment of a launcher's start ends it within seconds, says so, and leaves no
process or temporary folder behind; a launcher killed outright leaves its temporary folder to the
next one, which removes it. The launcher sends itself the signal at each named start-up phase
(:mod:`gnntrain.job.startup`'s test hook)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gnntrain.engine.summary import RunSummary
from gnntrain.job.startup import PHASES, SIGNAL_AT_VARIABLE
from test_cli import live_processes

GNNTRAIN = str(Path(sys.executable).with_name("gnntrain"))
SMALL = ["dataset.num_nodes=600", "cluster.world_size=2", "train.epochs=50"]
RUN_DIR_MADE = PHASES.index("composed")
"""Phases from which the job has a run dir, whose summary says it was interrupted (completed,
where the stop came as it ended)."""


@pytest.fixture
def temp() -> Iterator[Path]:
    """A temporary directory of the launcher's own, short: the fork server's socket path in it is
    limited to 107 bytes, which a test's ``tmp_path`` may use up."""
    folder = Path(tempfile.mkdtemp(prefix="st-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _start(tmp_path: Path, temp: Path, signal_at: str, wandb_mode: str = "offline") -> tuple[subprocess.Popen, Path]:
    run_dir = tmp_path / "run"
    env = dict(os.environ, WANDB_MODE=wandb_mode, TMPDIR=str(temp), **{SIGNAL_AT_VARIABLE: signal_at})
    job = subprocess.Popen([GNNTRAIN, *SMALL, f"hydra.run.dir={run_dir}"], cwd=tmp_path, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                           preexec_fn=_as_in_a_terminal)
    return job, run_dir


def _ours(temp: Path) -> list[Path]:
    """What is in the temporary directory, less torch's compiler cache (``torchinductor_<user>``,
    one per user, kept across runs as a cache is)."""
    return [path for path in temp.iterdir() if not path.name.startswith("torchinductor_")]


def _as_in_a_terminal() -> None:
    """Ctrl-C's default action, which a test run started in the background has not."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _left_in_group(group: int, wait_s: float = 10) -> list[int]:
    deadline = time.monotonic() + wait_s
    while (left := live_processes(group=group)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        os.killpg(group, signal.SIGKILL)
    return left


@pytest.mark.slow
@pytest.mark.parametrize("phase,signal_name", [(phase, "SIGTERM") for phase in PHASES]
                         + [("fork-server", "SIGINT"), ("spawned", "SIGINT")])
def test_a_stop_at_each_start_up_phase_ends_the_launcher_and_leaves_nothing(phase: str, signal_name: str,
                                                                             tmp_path: Path, temp: Path) -> None:
    job, run_dir = _start(tmp_path, temp, f"{phase}:{signal_name}")
    _, err = job.communicate(timeout=120)
    ended = time.time()
    sent = re.search(rf"test hook: {signal_name} at {phase} \(([0-9.]+)\)", err)
    assert sent, err
    assert ended - float(sent.group(1)) < 10, err
    signum = signal.Signals[signal_name]
    assert job.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    said = [line for line in err.splitlines() if "test hook" not in line]
    assert len(said) == 1 and f"interrupted by {signal_name}" in said[0], said
    left = _left_in_group(job.pid)
    assert left == [], left
    assert _ours(temp) == [], sorted(temp.rglob("*"))
    if PHASES.index(phase) >= RUN_DIR_MADE:
        assert RunSummary.read(run_dir).status == ("completed" if phase == "job-ended" else "interrupted")


@pytest.mark.slow
def test_a_stop_between_a_sweeps_jobs_ends_the_sweep_at_the_next_job(tmp_path: Path, temp: Path) -> None:
    """Held while Hydra moves on (it would take the stop for a failed job's error and go on), then
    raised as the next job takes its run dir: that job says it was interrupted, none runs after."""
    sweep = tmp_path / "sweep"
    env = dict(os.environ, WANDB_MODE="disabled", TMPDIR=str(temp), **{SIGNAL_AT_VARIABLE: "job-ended"})
    done = subprocess.run([GNNTRAIN, "-m", "dataset.num_nodes=600,700,800", "train.epochs=2",
                           f"hydra.sweep.dir={sweep}"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300, start_new_session=True, preexec_fn=_as_in_a_terminal)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert RunSummary.read(sweep / "0").status == "completed"
    assert RunSummary.read(sweep / "1").status == "interrupted" and RunSummary.read(sweep / "1").epochs == 0
    assert not (sweep / "2").exists()
    assert _ours(temp) == []


@pytest.mark.slow
def test_a_killed_launchers_temporary_folder_goes_with_the_next_launcher(tmp_path: Path, temp: Path) -> None:
    """SIGKILL runs no clean-up: the workers stop (they watch the launcher) and the fork server with
    them, but the launcher's folder (its fork server's socket, the workers' private folder) stays
    until the next launcher starts. (W&B's own temporary files, in offline mode, stay as they do
    for any process killed so: W&B's to clean, not gnntrain's; this run has W&B disabled.)"""
    job, _ = _start(tmp_path, temp, "joining:SIGKILL", wandb_mode="disabled")
    job.communicate(timeout=120)
    assert job.returncode == -signal.SIGKILL
    assert _left_in_group(job.pid) == []
    (kept,) = _ours(temp)
    assert kept.name.startswith(f"gnntrain-{job.pid}-")
    refused = subprocess.run([GNNTRAIN, "no_such_key=1"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, WANDB_MODE="disabled", TMPDIR=str(temp)))
    assert refused.returncode == 2, refused.stderr
    assert _ours(temp) == []
