"""Shared fixtures: config composition, dataset root, isolated caches, training runs and their records."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from gnntrain.job import api
from gnntrain.config.schema import ModelConfig, RootConfig
from gnntrain.models import MODELS
from gnntrain.strategies import method

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "datasets" / "pyg"
DATA_ROOT = Path(os.environ.get("GNNTRAIN_DATA", SHARED_DATA))

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("GNNTRAIN_DATA", str(DATA_ROOT))

HAS_REAL_DATA = (DATA_ROOT / "Cora" / "raw").is_dir()
needs_real_data = pytest.mark.skipif(not HAS_REAL_DATA, reason=f"real datasets not found under {DATA_ROOT}")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Say once, at the top of the run, that the real-data tests will be skipped, and why."""
    if HAS_REAL_DATA:
        return
    skipped = sum(1 for item in session.items if any(m.name == "skipif" and m.kwargs.get("reason", "").startswith(
        "real datasets not found") for m in item.iter_markers()))
    if skipped:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        reporter.write_line(f"gnntrain: {skipped} real-data tests will be skipped: no Cora/raw under {DATA_ROOT}; "
                            "set GNNTRAIN_DATA to a folder holding the PyG dataset roots (e.g. ../shared/datasets/pyg)",
                            yellow=True)


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Partition and processed-dataset caches live in a per-session temp dir."""
    cache = tmp_path_factory.mktemp("gnntrain-cache")
    os.environ["GNNTRAIN_CACHE"] = str(cache)
    return cache


@pytest.fixture(scope="session")
def plugin_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """docs/extending.md's sweep, run once for the tests of the sweeper and of the report: the
    baselines vanilla and AdaQP and the int8-halo plugin at two values of its own knob (four jobs,
    numbered in that order), 3 epochs of a 600-node graph on 2 workers."""
    root = tmp_path_factory.mktemp("plugin_sweep") / "sweep"
    env = {**os.environ, "WANDB_MODE": "disabled", "GNNTRAIN_PLUGINS": str(REPO / "docs" / "examples" / "int8_halo.py")}
    done = subprocess.run([sys.executable, "-m", "gnntrain.commands.train", "-m", "strategy=vanilla,adaqp,int8_halo",
                           "strategy.clip=0.5,1", "dataset.num_nodes=600", "dataset.avg_degree=6", "train.epochs=3",
                           "train.warmup_epochs=1", "cluster.world_size=2", f"hydra.sweep.dir={root}"],
                          capture_output=True, text=True, env=env, cwd=root.parent)
    assert done.returncode == 0, done.stderr
    return root


def make_cfg(*overrides: str) -> dict:
    """The resolved config ``gnntrain`` would build for these overrides, as a plain dict,
    checked as ``gnntrain`` checks it (:mod:`gnntrain.job.api`)."""
    cfg = api.compose(list(overrides))
    api.check(cfg)
    return cfg


def make_run(*overrides: str) -> RootConfig:
    """:func:`make_cfg`'s config, typed as a run reads it (:class:`~gnntrain.config.schema.RootConfig`)."""
    return api.check(api.compose(list(overrides)))


def batch_for(name: str, train_nodes: int) -> list[str]:
    """Strategy ``name``'s override for a small synthetic graph of ``train_nodes`` training
    nodes: a mini-batch method's batch of half of them (two iterations per epoch; its default
    batch of 1024 exceeds these graphs' training sets, which the launcher refuses); nothing for
    the others."""
    return [f"strategy.batch_size={train_nodes // 2}"] if method(name).family.name == "minibatch" else []


def model_config(name: str, **keys: Any) -> ModelConfig:
    """Model ``name``'s config dataclass with those of ``keys`` it has, its defaults elsewhere (one
    set of keys serves every model)."""
    config = MODELS[name].config
    own = {f.name for f in dataclasses.fields(config)}
    return config(name=name, **{k: v for k, v in keys.items() if k in own})


def train_records(run_dir: Path, *overrides: str) -> list[dict]:
    """Train a job of ``overrides`` (spawned workers, as ``gnntrain`` runs it) into ``run_dir``;
    its ``metrics.jsonl`` records."""
    cfg = make_cfg(*overrides)
    cfg["run_dir"] = str(run_dir)
    api.run(cfg)
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def assert_same_training(runs: list[dict], reference: list[dict], epochs: int) -> None:
    """The runs' records cover epochs 1..``epochs`` with the reference's losses, accuracies and
    bytes (training and evaluation), exactly."""
    assert [r["epoch"] for r in runs] == [r["epoch"] for r in reference] == list(range(1, epochs + 1))
    for key in ("loss", "train_acc", "val_acc", "test_acc", "comm_bytes_by_kind", "eval_comm_bytes"):
        assert [r[key] for r in runs] == [r[key] for r in reference], key
