"""A worker that raises shows the user where: its traceback (rank, exception, file and line)
under the one-line error, in the run dir's ``error.txt`` and named by ``summary.json``, whether
the workers were spawned here or started by torchrun or submitit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_cli import live_processes

from gnntrain.comm.dtypes import COLLECTIVE_DTYPES, check_sendable
from gnntrain.engine.summary import RunSummary
from gnntrain.job.launch import rank as launch_rank

BIN = Path(sys.executable).parent
PLUGIN = Path(__file__).parent / "data" / "failing_strategy.py"


def _where(mark: str) -> str:
    """The traceback line of the plugin's line marked ``mark``."""
    number = next(n for n, line in enumerate(PLUGIN.read_text().splitlines(), 1) if mark in line)
    return f'File "{PLUGIN}", line {number}, in training_view'


WHERE = _where("RAISES HERE")
JOB = ["strategy=failing", "dataset.num_nodes=300", "train.epochs=4"]
ENV = {**os.environ, "GNNTRAIN_PLUGINS": str(PLUGIN), "WANDB_MODE": "disabled"}


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=ENV, timeout=300)


def _check_run_dir(run_dir: Path) -> None:
    """``error.txt`` holds rank 1's line and traceback; the summary says failed and names it."""
    kept = (run_dir / "error.txt").read_text()
    assert kept.startswith("worker rank 1 failed: ValueError: rank 1 cannot go on\n") and WHERE in kept
    summary = RunSummary.read(run_dir)
    assert summary.status == "failed" and summary.error_file == "error.txt"
    assert summary.error == "worker rank 1 failed: ValueError: rank 1 cannot go on"
    assert summary.epochs == 1


def test_a_spawned_worker_that_raises_shows_its_file_and_line(tmp_path) -> None:
    run_dir = tmp_path / "run"
    done = _run([str(BIN / "gnntrain"), *JOB, f"hydra.run.dir={run_dir}"], tmp_path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "gnntrain: error: worker rank 1 failed: ValueError: rank 1 cannot go on"
    assert lines[1] == f"worker rank 1's traceback (also in {run_dir / 'error.txt'}):"
    assert WHERE in done.stderr and lines[-1] == "ValueError: rank 1 cannot go on"
    _check_run_dir(run_dir)


@pytest.mark.slow
def test_a_sweep_job_that_fails_shows_its_traceback_and_the_sweep_goes_on(tmp_path) -> None:
    sweep = tmp_path / "sweep"
    done = _run([str(BIN / "gnntrain"), "-m", *JOB, "strategy=failing,vanilla", "train.epochs=2",
                 f"hydra.sweep.dir={sweep}"], tmp_path)
    assert done.returncode == 1 and WHERE in done.stderr
    _check_run_dir(sweep / "0")
    assert RunSummary.read(sweep / "1").status == "completed"


def test_a_plugin_sending_int16_stops_at_its_call_naming_the_valid_dtypes(tmp_path) -> None:
    done = _run([str(BIN / "gnntrain"), "strategy=int16_halo", "dataset.num_nodes=300", "train.epochs=2",
                 f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert done.returncode == 1
    first = done.stderr.splitlines()[0]
    assert first.startswith("gnntrain: error: worker rank ") and "TypeError: gloo cannot send int16 tensors" in first
    assert "valid: bfloat16, bool," in first and "uint8" in first
    assert _where("SENDS INT16") in done.stderr


def test_each_backend_refuses_what_it_cannot_move_and_nothing_else() -> None:
    for dtype in (torch.int16, torch.uint16, torch.uint32, torch.uint64):
        with pytest.raises(TypeError, match=f"gloo cannot send {str(dtype)[6:]} tensors in a collective"):
            check_sendable("gloo", dtype, "halo_fwd")
        check_sendable("gloo", dtype, "halo_fwd", point_to_point=True)
        with pytest.raises(TypeError, match="nccl cannot send"):
            check_sendable("nccl", dtype, "halo_fwd", point_to_point=True)
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int8, torch.uint8, torch.int32,
                  torch.int64, torch.bool):
        for backend in ("gloo", "nccl", None):
            check_sendable(backend, dtype, "halo_fwd")
            check_sendable(backend, dtype, "halo_fwd", point_to_point=True)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.int16, torch.uint32, torch.bfloat16, torch.int8, torch.bool])
def test_the_gloo_table_is_what_gloo_does(dtype: torch.dtype) -> None:
    """The dtypes :mod:`gnntrain.comm.dtypes` says gloo's collectives refuse are those it refuses."""
    import socket

    import torch.multiprocessing as mp

    from dist_helpers import gloo_all_to_all_moves

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    moved = mp.get_context("spawn").Value("i", -1)
    mp.spawn(gloo_all_to_all_moves, args=(dtype, port, moved), nprocs=2)
    assert moved.value == (dtype in COLLECTIVE_DTYPES["gloo"])


@pytest.mark.slow
def test_under_torchrun_the_failing_rank_shows_its_file_and_line(tmp_path) -> None:
    run_dir = tmp_path / "run"
    done = _run([str(BIN / "torchrun"), "--standalone", "--nproc-per-node=2", "--no-python", str(BIN / "gnntrain"),
                 *JOB, f"hydra.run.dir={run_dir}"], tmp_path)
    assert done.returncode != 0
    assert "gnntrain: error: worker rank 1 failed: ValueError: rank 1 cannot go on" in done.stderr
    assert WHERE in done.stderr
    _check_run_dir(run_dir)


@pytest.mark.slow
def test_in_a_submitit_job_of_two_tasks_the_failing_task_shows_its_file_and_line(tmp_path) -> None:
    sweep = tmp_path / "sweep"
    done = _run([str(BIN / "gnntrain"), "-m", "hydra/launcher=submitit_local", "hydra.launcher.tasks_per_node=2",
                 *JOB, f"hydra.sweep.dir={sweep}"], tmp_path)
    assert done.returncode != 0
    _check_run_dir(sweep / "0")
    logs = "".join(path.read_text() for path in (sweep / ".submitit").glob("*/*.err"))
    assert WHERE in logs


@pytest.mark.slow
def test_the_wandb_run_keeps_the_failing_workers_traceback(tmp_path) -> None:
    run_dir = tmp_path / "run"
    done = subprocess.run([str(BIN / "gnntrain"), *JOB, f"hydra.run.dir={run_dir}"], capture_output=True, text=True,
                          cwd=tmp_path, env={**ENV, "WANDB_MODE": "offline"}, timeout=300)
    assert done.returncode == 1
    kept, = run_dir.glob("wandb/offline-run-*/files/error.txt")
    assert WHERE in kept.read_text()


@pytest.mark.slow
def test_a_sweep_under_torchrun_ends_at_a_failed_worker(tmp_path) -> None:
    """Its jobs share one process group, which the failure broke: no later job starts on it."""
    sweep = tmp_path / "sweep"
    done = _run([str(BIN / "torchrun"), "--standalone", "--nproc-per-node=2", "--no-python", str(BIN / "gnntrain"),
                 "-m", *JOB, "strategy=failing,vanilla", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert done.returncode != 0 and WHERE in done.stderr
    _check_run_dir(sweep / "0")
    assert not (sweep / "1").exists()


@pytest.mark.slow
def test_a_stopped_worker_is_named_as_itself_within_the_timeout(tmp_path) -> None:
    """Rank 1 stops (SIGSTOP) at epoch 3 with cluster.timeout_s=5: the job ends within the
    timeout plus 10 s of the stop, its one line names rank 1, and no worker is left behind.

    The time is taken from the moment the worker is seen stopped, not from the command's start,
    which a loaded machine can stretch by tens of seconds before the fault happens at all."""
    job = subprocess.Popen([str(BIN / "gnntrain"), "dataset.num_nodes=300", "train.epochs=200", "fault.rank=1",
                            "fault.epoch=3", "fault.stop=true", "cluster.timeout_s=5", f"hydra.run.dir={tmp_path}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           env={**os.environ, "WANDB_MODE": "disabled"})
    stopped_since: dict[int, float] = {}
    deadline = time.monotonic() + 120
    while job.poll() is None and time.monotonic() < deadline:
        now = time.monotonic()
        for pid in set(_stopped_pids()) & set(live_processes(ancestor=job.pid)):
            stopped_since.setdefault(pid, now)
        time.sleep(0.05)
    ended = time.monotonic()
    job.kill()
    stderr = job.communicate()[1]
    first_line = stderr.strip().splitlines()[0]
    assert job.returncode == 1
    assert first_line.startswith("gnntrain: error: worker rank 1 stopped responding: its process ")
    named_pid = int(first_line.split("its process ")[1].split()[0])
    assert ended - stopped_since[named_pid] < 5 + 10  # the timeout, then the checks and the workers' stop
    assert RunSummary.read(tmp_path).status == "failed"
    time.sleep(1)
    assert not [pid for pid in _stopped_pids() if "multiprocessing" in _cmdline(pid)]


def _stopped_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                pids.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return pids


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


@pytest.mark.slow
@pytest.mark.parametrize("debug", [False, True])
def test_workers_print_no_cpp_warnings_unless_debugging(debug: bool) -> None:
    """The fork server imports torch with its C++ log level at ERROR (its workers inherit it),
    the launcher's own environment left as it was; ``GNNTRAIN_DEBUG=1`` keeps the warnings."""
    code = ("import os, multiprocessing.forkserver as server\n"
            "from gnntrain.job.launch.fork_server import worker_context\n"
            "worker_context()\n"
            "environ = open(f'/proc/{server._forkserver._forkserver_pid}/environ', 'rb').read().split(b'\\0')\n"
            "print(b'TORCH_CPP_LOG_LEVEL=ERROR' in environ, 'TORCH_CPP_LOG_LEVEL' in os.environ)\n")
    env = {k: v for k, v in ENV.items() if k not in ("TORCH_CPP_LOG_LEVEL", "GNNTRAIN_DEBUG")}
    if debug:
        env["GNNTRAIN_DEBUG"] = "1"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.split() == [str(not debug), "False"], done.stderr


def test_a_store_connection_refused_for_a_moment_is_tried_again(monkeypatch) -> None:
    monkeypatch.setattr(launch_rank, "RETRIES", (0.0, 0.0))
    attempts = []

    def connect() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError("The client socket has failed to connect: Resource temporarily unavailable")
        return "store"

    assert launch_rank.retried(connect) == "store" and len(attempts) == 3
    with pytest.raises(RuntimeError, match="Connection refused"):
        launch_rank.retried(lambda: (_ for _ in ()).throw(RuntimeError("Connection refused")))
