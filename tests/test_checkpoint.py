"""Checkpoints and resuming (gnntrain.engine.checkpoint): a resumed run continues exactly where
the checkpointed one was, and a checkpoint that does not fit the run is refused in one line."""

from __future__ import annotations

import json

import re
import shutil
from pathlib import Path

import pytest

from conftest import assert_same_training, make_run, train_records
from gnntrain.job import api
from gnntrain.engine.checkpoint import Resume
from gnntrain.errors import ConfigError, WorkerFailed
from gnntrain.engine.summary import RunSummary
from gnntrain.strategies import METHODS

COMMON = ("dataset.num_nodes=500", "dataset.avg_degree=6", "train.epochs=6", "train.dtype=float64",
          "model.dropout=0.5", "model=sage", "model.hidden=16", "train.checkpoint_every=2")
SETTINGS = {
    "pipegcn": ["strategy.smooth=gf", "strategy.bits=4"],
    "bns": ["strategy.p=0.5"],
    "bes": ["strategy.p=0.5"],
    "dropedge": ["strategy.p=0.5"],
    "adaqp": ["strategy.period=2", "strategy.group_size=20"],
    "gnnpipe": ["strategy.chunks=4", "strategy.alpha=3"],
    "minibatch": ["strategy.batch_size=100", "strategy.fanout=3"],
    "lo": ["strategy.batch_size=100", "strategy.fanout=3"],
    "hopgnn": ["strategy.batch_size=40", "strategy.fanout=3"],
    "p3": ["strategy.batch_size=100", "strategy.fanout=3"],
    "naive": ["strategy.batch_size=100", "strategy.fanout=3"],
}
"""Settings that give a method state to carry across a checkpoint (every registered method is
resumed; one without settings here runs at its defaults): AdaQP adaptive, widths reassigned every
2 epochs from traces and a profiled cost model, with stochastic rounding; PipeGCN with smoothing
and quantized stale halos in flight at every checkpoint; GNNPipe with its history refreshed every
3 epochs (so the checkpoint of epoch 4 holds a history older than the epoch's rows); HopGNN with
the merge count its examination chose in epoch 2 (8 iterations per epoch) carried by the
checkpoints; the mini-batch family on small batches and fan-outs."""
VARIANTS = {"gnnpipe_historical_gradients": ["strategy=gnnpipe", "strategy.chunks=4", "strategy.detach_history=false",
                                             "strategy.fixed_history=false"]}
"""Settings of one method resumed besides its own: GNNPipe without tricks 2 and 3, whose
historical gradients are handed on across the checkpoint."""
STRATEGIES = {**{name: [f"strategy={name}", *SETTINGS.get(name, [])] for name in METHODS}, **VARIANTS}


def test_every_setting_names_a_registered_method() -> None:
    assert set(SETTINGS) <= set(METHODS)


def _run(run_dir: Path, *overrides: str) -> list[dict]:
    return train_records(run_dir, *COMMON, *overrides)


def _same_training(resumed: list[dict], uninterrupted: list[dict]) -> None:
    assert_same_training(resumed, uninterrupted, 6)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n == "hopgnn" else pytest.mark.slow)
                                  for n in sorted(STRATEGIES)])
def test_a_run_resumed_from_a_checkpoint_equals_the_uninterrupted_run(name: str, tmp_path) -> None:
    """The run checkpoints at epochs 2, 4 and 6 (two kept); a copy of it without the last
    checkpoint resumes from epoch 4 (``train.resume=true`` in its dir) and retraces epochs 5 and
    6 exactly (float64). The restarted process warms up again: its first two epochs are left out
    of the summary's means as the run's first two are."""
    original = _run(tmp_path / "original", *STRATEGIES[name])
    assert sorted(p.name for p in (tmp_path / "original" / "checkpoints").iterdir()) == ["epoch_000004",
                                                                                         "epoch_000006"]
    shutil.copytree(tmp_path / "original", tmp_path / "copy")
    shutil.rmtree(tmp_path / "copy" / "checkpoints" / "epoch_000006")
    resumed = _run(tmp_path / "copy", *STRATEGIES[name], "train.resume=true")
    _same_training(resumed, original)
    assert [r["epoch"] for r in resumed if r["cold"]] == [1, 2, 5, 6]
    summary = RunSummary.read(tmp_path / "copy")
    steady = [r["epoch_time"] for r in resumed if r["epoch"] in (3, 4) and not r["strategy_metrics"].get("examination")]
    assert summary.warmup_epochs_excluded == 4
    assert summary.mean_epoch_time == pytest.approx(sum(steady) / len(steady))


@pytest.mark.slow
def test_a_crashed_run_resumes_and_finishes_as_if_it_had_not_crashed(tmp_path) -> None:
    """A worker dies at the start of epoch 5; the same command with ``train.resume=true``
    continues after the checkpoint of epoch 4, and metrics.jsonl has each epoch once. Resuming
    it into another run dir (``train.resume=<dir>``) does the same."""
    uninterrupted = _run(tmp_path / "uninterrupted")
    with pytest.raises(WorkerFailed):
        _run(tmp_path / "crashed", "fault.rank=1", "fault.epoch=5")
    assert len((tmp_path / "crashed" / "metrics.jsonl").read_text().splitlines()) == 4
    _same_training(_run(tmp_path / "elsewhere", f"train.resume={tmp_path / 'crashed'}"), uninterrupted)
    _same_training(_run(tmp_path / "crashed", "train.resume=true"), uninterrupted)
    summary = RunSummary.read(tmp_path / "crashed")
    assert summary.status == "completed" and summary.epochs == 6


def test_resume_true_without_a_checkpoint_starts_afresh(tmp_path) -> None:
    assert [r["epoch"] for r in _run(tmp_path, "train.epochs=2", "train.resume=true")] == [1, 2]


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("checkpointed")
    _run(run_dir, "train.epochs=2")
    return run_dir


def _refusal(*overrides: str) -> str:
    run = make_run(*COMMON, "train.epochs=2", *overrides)
    with pytest.raises(ConfigError) as refused:
        Resume.find(run).check(run, run.cluster.world_size)
    return str(refused.value)


def test_a_checkpoint_of_another_config_or_world_size_is_refused_naming_the_mismatch(checkpointed) -> None:
    line = _refusal(f"train.resume={checkpointed}", "model.hidden=32")
    assert "model.hidden=16, this run has model.hidden=32" in line and "\n" not in line
    line = _refusal(f"train.resume={checkpointed}", "cluster.world_size=3")
    assert "written by 2 workers, this run has 3; valid: cluster.world_size=2" in line
    Resume.find(make_run(*COMMON, f"train.resume={checkpointed}", "train.epochs=9")).check(
        make_run(*COMMON, "train.epochs=9"), 2)  # more epochs: fine


def test_a_damaged_only_checkpoint_is_refused_in_one_line(checkpointed, tmp_path) -> None:
    """A rank file cut short, a manifest that is not JSON or lacks its keys: with no older
    checkpoint, one line before any worker starts."""
    shutil.copytree(checkpointed, tmp_path / "run")
    where = tmp_path / "run" / "checkpoints" / "epoch_000002"
    (where / "rank1.pt").write_bytes((where / "rank1.pt").read_bytes()[:100])
    line = _refusal(f"train.resume={tmp_path / 'run'}")
    assert "no intact checkpoint" in line and "epoch_000002: rank1.pt unreadable" in line and "\n" not in line
    for manifest, damage in (("{", "manifest unreadable"), ("{}", "manifest lacks format, epoch, world_size, config")):
        (where / "manifest.json").write_text(manifest)
        assert damage in _refusal(f"train.resume={tmp_path / 'run'}")


@pytest.mark.parametrize("key, value", [("epoch", "2"), ("world_size", 2.5), ("config", [1]), ("format", None),
                                        ("wandb_id", "a/b?c")])
def test_a_manifest_field_of_the_wrong_type_is_a_damaged_checkpoint(checkpointed, tmp_path, key, value) -> None:
    shutil.copytree(checkpointed, tmp_path / "run")
    path = tmp_path / "run" / "checkpoints" / "epoch_000002" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest[key] = value
    path.write_text(json.dumps(manifest))
    line = _refusal(f"train.resume={tmp_path / 'run'}")
    assert "no intact checkpoint" in line and f"manifest holds {key}={value!r}" in line and "\n" not in line


def test_a_damaged_latest_checkpoint_falls_back_to_the_one_before(tmp_path) -> None:
    """The newest checkpoint's rank file is empty (a disk that filled while it was written): the
    run resumes from the checkpoint before, says so, and retraces the epochs after it exactly."""
    uninterrupted = _run(tmp_path / "uninterrupted", "train.epochs=4")
    shutil.copytree(tmp_path / "uninterrupted", tmp_path / "damaged")
    (tmp_path / "damaged" / "checkpoints" / "epoch_000004" / "rank0.pt").write_bytes(b"")
    resume = Resume.find(make_run(*COMMON, "train.epochs=4", f"train.resume={tmp_path / 'damaged'}"))
    assert resume.epoch == 2
    assert resume.describe_skipped() == [f"checkpoint {tmp_path / 'damaged' / 'checkpoints' / 'epoch_000004'} is "
                                         "damaged (rank0.pt unreadable: Expected input to be a checkpoint returned by "
                                         "torch.save); resuming from epoch_000002 instead"]
    assert_same_training(_run(tmp_path / "resumed", "train.epochs=4", f"train.resume={tmp_path / 'damaged'}"),
                         uninterrupted, 4)


@pytest.mark.parametrize("overrides, line", [
    (("train.checkpoint_every=-1",), "train.checkpoint_every=-1 is invalid; it must be >= 0 (0: none)"),
    (("train.resume=''",), "train.resume= is invalid; it must be true, false or a run dir"),
])
def test_bad_checkpoint_settings_are_refused_in_one_line(overrides, line) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(line) + "$"):
        api.check(api.compose(list(overrides)))
