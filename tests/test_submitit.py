"""Sweeps on a cluster through Hydra's submitit launcher, tried with its local executor: every
job runs as a submitit job, a job of several tasks trains as one world of them (as SLURM's
tasks would), and a sweep's jobs share one W&B group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gnntrain.engine.summary import RunSummary

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
GNNTRAIN = str(BIN / "gnntrain")
SMALL = ["dataset.num_nodes=300", "train.epochs=3", "train.dtype=float64"]


def _sweep(tmp_path: Path, *overrides: str, wandb: str = "disabled") -> Path:
    sweep = tmp_path / "sweep"
    res = subprocess.run([GNNTRAIN, "-m", "hydra/launcher=submitit_local", *SMALL, *overrides,
                          f"hydra.sweep.dir={sweep}"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, WANDB_MODE=wandb))
    assert res.returncode == 0, res.stdout + res.stderr
    return sweep


def _summary(run_dir: Path) -> RunSummary:
    return RunSummary.read(run_dir)


def _losses(run_dir: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_a_two_job_sweep_runs_as_submitit_jobs_in_one_wandb_group(tmp_path) -> None:
    sweep = _sweep(tmp_path, "model=gcn,sage", wandb="offline")
    assert list((sweep / ".submitit").glob("*/*_0_result.pkl")), "the jobs ran through submitit"
    summaries = [_summary(sweep / str(job)) for job in (0, 1)]
    assert [(s.status, s.model) for s in summaries] == [("completed", "gcn"), ("completed", "sage")]
    groups = {s.wandb["group"] for s in summaries}
    assert groups == {str(sweep)}, "one W&B group per sweep, named after it"
    assert [s.wandb["name"] for s in summaries] == [
        "dataset.num_nodes=300,model=gcn,train.dtype=float64,train.epochs=3",
        "dataset.num_nodes=300,model=sage,train.dtype=float64,train.epochs=3"]


def test_a_job_of_two_tasks_trains_as_a_world_of_two_like_the_local_spawn(tmp_path) -> None:
    sweep = _sweep(tmp_path, "hydra.launcher.tasks_per_node=2")
    assert _summary(sweep / "0").world_size == 2
    local = tmp_path / "local"
    res = subprocess.run([GNNTRAIN, *SMALL, "cluster.world_size=2", f"hydra.run.dir={local}"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, env=dict(os.environ, WANDB_MODE="disabled"))
    assert res.returncode == 0, res.stderr
    assert _losses(sweep / "0") == _losses(local)
