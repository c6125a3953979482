"""What a new user meets in the first hour, tried as they would from the command line: a dataset
added by YAML alone, sizes refused before anything runs, a corrupt cache file named and
rebuilt, sweeps checked up front and surviving a failed job, the run directory named at the
end, an interrupted run's partial summary, ``--help``, the notice on skipped real-data tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import DATA_ROOT, REPO, needs_real_data
from gnntrain.data.synthetic import generate
from test_cli import GNNTRAIN, SMALL, _live_processes_in_group, run, wait_for_epochs
from gnntrain.engine.summary import RunSummary

EXACT = ["train.dtype=float64", "model.dropout=0", "train.epochs=4"]



def _header(stdout: str) -> str:
    """The run's first line after the lines of the phases before training (loading, partitioning)."""
    return next(line for line in stdout.splitlines() if not line.startswith("gnntrain"))

def write_dataset_yaml(conf_dir: Path, name: str, body: str) -> Path:
    """A dataset option ``conf_dir/dataset/<name>.yaml`` as docs/usage.md tells a user to write it."""
    path = conf_dir / "dataset" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("defaults:\n  - /schema/dataset/dataset@_here_\n  - _self_\n\n" f"name: {name}\n{body}")
    return path


def write_npz_graph(path: Path) -> None:
    """A 500-node planted-community graph as a user's own ``.npz`` (edge_index, x, y, masks)."""
    g = generate(500, 8, 4, 12, homophily=0.8, graph_seed=5)
    np.savez(path, edge_index=g.edge_index.numpy(), x=g.x.numpy(), y=g.y.numpy(),
             train_mask=g.train_mask.numpy(), val_mask=g.val_mask.numpy(), test_mask=g.test_mask.numpy())


def losses(run_dir: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_dataset_added_by_yaml_alone_trains_and_one_or_two_workers_agree(tmp_path) -> None:
    write_npz_graph(tmp_path / "mygraph.npz")
    conf = tmp_path / "conf"
    write_dataset_yaml(conf, "mygraph", f"source: file\nfile: {tmp_path / 'mygraph.npz'}\n")
    runs = {}
    for workers in (1, 2):
        run_dir = tmp_path / f"run{workers}"
        res = run([GNNTRAIN, "--config-dir", str(conf), "dataset=mygraph", f"cluster.world_size={workers}",
                   *EXACT, f"hydra.run.dir={run_dir}"], tmp_path)
        assert res.returncode == 0, res.stderr
        assert _header(res.stdout).startswith("mygraph: 500 nodes")
        runs[workers] = losses(run_dir)
    assert len(runs[1]) == 4
    assert np.allclose(runs[1], runs[2], rtol=1e-10, atol=0)


@pytest.mark.slow
@needs_real_data
def test_a_pyg_class_declared_by_yaml_loads_from_the_data_root(tmp_path) -> None:
    conf = tmp_path / "conf"
    write_dataset_yaml(conf, "my-squirrel", "pyg_class: WikipediaNetwork\n"
                                            "args: {name: squirrel, geom_gcn_preprocess: true}\n")
    res = run([GNNTRAIN, "--config-dir", str(conf), "dataset=my-squirrel", "train.epochs=1",
               f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert _header(res.stdout).startswith("my-squirrel: 5201 nodes, 396706 edges")


@pytest.mark.slow
@pytest.mark.parametrize("body,expected", [
    ("pyg_class: Nope\n", ["dataset.pyg_class=Nope", "Planetoid", "WikipediaNetwork"]),
    ("source: file\n", ["dataset.file=None", ".npz", ".pt"]),
    ("source: file\nfile: graph.csv\n", ["dataset.file=graph.csv", ".npz", ".pt"]),
    ("source: ogb\n", ["dataset.ogb_name=None", "ogbn-arxiv"]),
])
def test_a_wrong_dataset_declaration_gets_one_line(body, expected, tmp_path) -> None:
    conf = tmp_path / "conf"
    write_dataset_yaml(conf, "mine", body)
    res = run([GNNTRAIN, "--config-dir", str(conf), "dataset=mine", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gnntrain: error: "), res.stderr
    for text in expected:
        assert text in lines[0]


def test_a_file_without_the_needed_arrays_is_named(tmp_path) -> None:
    np.savez(tmp_path / "bad.npz", x=np.zeros((4, 2), dtype=np.float32))
    conf = tmp_path / "conf"
    write_dataset_yaml(conf, "bad", f"source: file\nfile: {tmp_path / 'bad.npz'}\n")
    res = run([GNNTRAIN, "--config-dir", str(conf), "dataset=bad", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(tmp_path / "bad.npz") in lines[0] and "edge_index" in lines[0], res.stderr


@pytest.mark.slow
@needs_real_data
def test_more_workers_than_nodes_is_refused_before_anything_starts(tmp_path) -> None:
    cache = tmp_path / "cache"
    start = time.monotonic()
    res = run([GNNTRAIN, "dataset=cora", "cluster.world_size=100000", f"hydra.run.dir={tmp_path / 'run'}"],
              tmp_path, timeout=120, env=dict(os.environ, GNNTRAIN_CACHE=str(cache)))
    assert time.monotonic() - start < 60
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "cluster.world_size=100000" in lines[0] and "2708 nodes" in lines[0] and "at most 2708" in lines[0]
    assert not list(cache.rglob("partitions/*.pt"))


@pytest.mark.slow
def test_many_more_workers_than_cores_is_warned_about(tmp_path) -> None:
    workers = 4 * len(os.sched_getaffinity(0)) + 1
    res = run([GNNTRAIN, f"cluster.world_size={workers}", "train.epochs=1", "dataset.num_nodes=400",
               f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("gnntrain: warning:")]
    assert len(warnings) == 1 and f"{workers} workers" in warnings[0] and "cores" in warnings[0]


@pytest.mark.slow
@needs_real_data
def test_a_truncated_processed_dataset_is_named_and_rebuilt(tmp_path) -> None:
    env = dict(os.environ, GNNTRAIN_CACHE=str(tmp_path / "cache"))
    args = [GNNTRAIN, "dataset=cora", "train.epochs=1", f"hydra.run.dir={tmp_path / 'run'}"]
    assert run(args, tmp_path, env=env).returncode == 0
    [processed] = (tmp_path / "cache").rglob("processed/data.pt")
    processed.write_bytes(processed.read_bytes()[:1000])
    res = run(args, tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gnntrain: warning:"), res.stderr
    assert str(processed) in lines[0] and "rebuilding it" in lines[0]
    assert processed.stat().st_size > 1000


def test_a_bad_value_in_one_sweep_job_is_refused_before_the_first_job_runs(tmp_path) -> None:
    sweep = tmp_path / "sweep"
    res = run([GNNTRAIN, "-m", "strategy=bns", "strategy.p=0.5,2,0.1", *SMALL, f"hydra.sweep.dir={sweep}"],
              tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gnntrain: error: "), res.stderr
    assert "job 1 (strategy=bns strategy.p=2" in lines[0] and "strategy.p=2.0 is invalid" in lines[0]
    assert not list(sweep.rglob("metrics.jsonl"))


def test_a_sweep_goes_on_after_a_failed_job_and_reports_it(tmp_path) -> None:
    sweep = tmp_path / "sweep"
    res = run([GNNTRAIN, "-m", "fault.rank=1", "fault.epoch=2,99", "train.epochs=3", *SMALL,
               f"hydra.sweep.dir={sweep}"], tmp_path)
    assert res.returncode == 1
    assert RunSummary.read(sweep / "1").status == "completed"
    failed = RunSummary.read(sweep / "0")
    assert failed.status == "failed" and failed.epochs == 1
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("gnntrain: error: 1 of 2 sweep jobs failed: job 0 (fault.rank=1 fault.epoch=2 ")
    assert "worker rank 1" in last
    progress = [line for line in res.stdout.splitlines() if line.startswith("sweep: ")]
    assert progress[0] == "sweep: job 0 (1 of 2) · 0 done · 0 failed · 2 left"
    assert progress[1].startswith("sweep: job 1 (2 of 2) · 0 done · 1 failed · 1 left · about ")
    assert res.stdout.index(progress[1]) < res.stdout.index("done: best val"), "the sweep's line comes first"


def test_the_sweep_progress_estimates_the_time_left_from_the_jobs_so_far(monkeypatch) -> None:
    from gnntrain.job import sweep

    clock = iter([0.0, 60.0, 100.0, 220.0, 300.0])
    monkeypatch.setattr(sweep.time, "perf_counter", lambda: next(clock))
    progress = sweep.SweepProgress(total=4)
    assert progress.start_job(0) == "sweep: job 0 (1 of 4) · 0 done · 0 failed · 4 left"
    progress.end_job(failed=False)
    progress.start_job(1)
    progress.end_job(failed=True)
    assert progress.start_job(2) == "sweep: job 2 (3 of 4) · 1 done · 1 failed · 2 left · about 3m00s to go (1m30s per job)"
    assert sweep.clock(3725) == "1h02m" and sweep.clock(12.4) == "12s"


@pytest.mark.slow
def test_wandb_keeps_quiet_unless_asked(tmp_path) -> None:
    env = dict(os.environ, WANDB_MODE="offline")
    quiet = run([GNNTRAIN, "train.epochs=1", *SMALL, f"hydra.run.dir={tmp_path / 'a'}"], tmp_path, env=env)
    assert quiet.returncode == 0, quiet.stderr
    chatter = [line for line in (quiet.stdout + quiet.stderr).splitlines() if line.startswith("wandb:")]
    assert chatter == []
    assert "wandb sync" in quiet.stdout
    verbose = run([GNNTRAIN, "train.epochs=1", "wandb.verbose=true", *SMALL, f"hydra.run.dir={tmp_path / 'b'}"],
                  tmp_path, env=env)
    assert verbose.returncode == 0, verbose.stderr
    assert any(line.startswith("wandb:") for line in (verbose.stdout + verbose.stderr).splitlines())


@pytest.mark.slow
@pytest.mark.parametrize("target,sig", [
    ("group", signal.SIGINT), ("launcher", signal.SIGTERM),
    pytest.param("launcher", signal.SIGINT, marks=pytest.mark.slow),
    pytest.param("group", signal.SIGTERM, marks=pytest.mark.slow),
])
def test_an_interrupted_run_stops_and_keeps_a_partial_summary(target, sig, tmp_path) -> None:
    """Ctrl-C (SIGINT to the whole foreground group), a scheduler's SIGTERM to the launcher, and
    the same signals the other way round; the offline W&B run is finished, not cut off."""
    run_dir = tmp_path / "run"
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen([GNNTRAIN, "train.epochs=100000", *SMALL, f"hydra.run.dir={run_dir}"], cwd=tmp_path,
                                stdout=stdout, stderr=stderr, start_new_session=True, preexec_fn=_as_in_a_terminal,
                                env=dict(os.environ, WANDB_MODE="offline"))
    metrics = run_dir / "metrics.jsonl"
    try:
        wait_for_epochs(metrics, proc, err)
        os.killpg(proc.pid, sig) if target == "group" else proc.send_signal(sig)
        start = time.monotonic()
        proc.wait(timeout=30)
        assert time.monotonic() - start < 10
    finally:
        left = _live_processes_in_group(proc.pid, wait_s=10)
        commands = [_command_line(pid) for pid in left]
        if left:
            os.killpg(proc.pid, signal.SIGKILL)
    assert left == [], (commands, err.read_text())
    assert proc.returncode == 128 + sig
    lines = err.read_text().strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0] and str(run_dir) in lines[0], lines
    summary = RunSummary.read(run_dir)
    epochs = len(metrics.read_text().splitlines())
    assert summary.status == "interrupted" and summary.epochs == epochs >= 3
    (wandb_log,) = run_dir.glob("wandb/offline-run-*/logs/debug.log")
    assert "finishing run" in wandb_log.read_text()


@pytest.mark.slow
def test_the_wandb_run_is_finished_when_rank_0_dies_outright(tmp_path) -> None:
    """Rank 0 writes the epochs; the launcher keeps the W&B run, so a rank 0 that dies without
    cleanup (exit code 3, no ``finally``) still leaves it finished, marked failed."""
    run_dir = tmp_path / "run"
    res = run([GNNTRAIN, "fault.rank=0", "fault.epoch=3", "train.epochs=5", *SMALL, f"hydra.run.dir={run_dir}"],
              tmp_path, env=dict(os.environ, WANDB_MODE="offline"))
    assert res.returncode == 1, res.stderr
    summary = RunSummary.read(run_dir)
    assert summary.status == "failed" and summary.epochs == 2
    (wandb_log,) = run_dir.glob(f"wandb/offline-run-*-{summary.wandb['id']}/logs/debug.log")
    log = wandb_log.read_text()
    assert "finishing run" in log and "got exitcode: 1" in log


@pytest.mark.slow
def test_workers_stop_when_the_launcher_is_killed_outright(tmp_path) -> None:
    """SIGKILL to the launcher (the OOM killer, ``kill -9``) cannot be handled; its workers
    stop anyway, and the completed epochs stay on disk."""
    run_dir = tmp_path / "run"
    with (tmp_path / "stderr").open("w") as stderr:
        proc = subprocess.Popen([GNNTRAIN, "train.epochs=100000", *SMALL, f"hydra.run.dir={run_dir}"], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                                env=dict(os.environ, WANDB_MODE="disabled"))
    metrics = run_dir / "metrics.jsonl"
    wait_for_epochs(metrics, proc, tmp_path / "stderr")
    proc.kill()
    proc.wait()
    left = _live_processes_in_group(proc.pid, wait_s=10)
    commands = [_command_line(pid) for pid in left]
    if left:
        os.killpg(proc.pid, signal.SIGKILL)
    assert left == [], commands
    assert len(metrics.read_text().splitlines()) >= 3


def _as_in_a_terminal() -> None:
    """Ctrl-C's default action, as a command started in a terminal has it: a test run started in
    the background (``make test &``, some CI runners) ignores SIGINT, and its children inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return f"{pid} (gone)"


def test_help_shows_the_projects_groups_and_keys_only(tmp_path) -> None:
    res = run([GNNTRAIN, "--help"], tmp_path)
    assert res.returncode == 0, res.stderr
    text = res.stdout
    assert "Hydra" not in text.splitlines()[0] and "schema" not in text
    for line in ("dataset: ", "model: ", "strategy: ", "cluster: ", "network: ", "experiment: "):
        assert any(row.lstrip().startswith(line) for row in text.splitlines()), line
    assert "cora" in text and "gnnpipe" in text and "gcnii" in text
    for key in ("train.epochs", "train.lr", "partition.method", "cluster.world_size", "wandb.mode",
                "dataset.source", "model.hidden"):
        [row] = [row for row in text.splitlines() if row.lstrip().startswith(key + " ")]
        assert len(row.split()) >= 4, row  # key, default, and a description
    assert "gnntrain strategy=gnnpipe model=gcnii" in text
    bns = run([GNNTRAIN, "strategy=bns", "--help"], tmp_path).stdout
    assert any(row.lstrip().startswith("strategy.p ") for row in bns.splitlines())


@pytest.mark.slow
def test_skipped_real_data_tests_are_announced_at_the_top(tmp_path) -> None:
    env = dict(os.environ, GNNTRAIN_DATA=str(tmp_path / "nowhere"))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "tests/test_data.py"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    notice = [line for line in res.stdout.splitlines() if "real-data tests" in line]
    assert len(notice) == 1 and "GNNTRAIN_DATA" in notice[0] and str(tmp_path / "nowhere") in notice[0]
    assert res.stdout.index(notice[0]) < res.stdout.index("test_data.py")
    present = subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "tests/test_data.py"], cwd=REPO,
                             env=dict(os.environ, GNNTRAIN_DATA=str(DATA_ROOT)), capture_output=True, text=True,
                             timeout=120)
    if (DATA_ROOT / "Cora" / "raw").is_dir():
        assert "real-data tests" not in present.stdout


def test_every_config_key_has_a_description_for_the_help() -> None:
    from dataclasses import fields

    from gnntrain.config import schema
    from gnntrain.job.help import field_docs
    from gnntrain.models import MODELS
    from gnntrain.strategies import METHODS

    schemas = [schema.DatasetConfig, schema.SyntheticConfig, schema.ModelConfig, *(m.config for m in MODELS.values()),
               schema.StrategyConfig, schema.ClusterConfig,
               schema.NetworkConfig, schema.PartitionConfig, schema.TrainConfig, schema.WandbConfig,
               schema.FaultConfig, *(m.config for m in METHODS.values())]
    for cls in schemas:
        assert not {f.name for f in fields(cls)} - field_docs(cls).keys(), cls.__name__
    assert not {"seed"} - field_docs(schema.RootConfig).keys()
