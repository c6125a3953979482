"""The key lists derived from the schemas' field metadata: resume, tables, dataset caches and
the calibration probe each read the part a key plays, not a list of their own."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conftest import make_run

from gnntrain.job import calibration
from gnntrain.config import flatten
from gnntrain.config.keys import keys_playing, part_of, plays, setting
from gnntrain.config.schema import CONDUCT, PLACE, WORKLOAD
from gnntrain.config.typed import plain
from gnntrain.data.job import dataset_key
from gnntrain.engine.checkpoint import FREE_ON_RESUME, _trained_config
from gnntrain.report import IGNORED_KEYS, differing_keys
from gnntrain.engine.summary import RunSummary
from gnntrain.report.runs import Run


def test_parts_of_keys_follow_their_fields_and_sections() -> None:
    assert part_of("dataset.root") == part_of("partition.cache_dir") == part_of("run_dir") == PLACE
    assert part_of("wandb.project") == PLACE  # the whole section
    assert part_of("train.epochs") == part_of("fault.rank") == part_of("cluster.timeout_s") == CONDUCT
    assert part_of("dataset.name") == part_of("model.hidden") == part_of("train.dtype") == WORKLOAD
    assert part_of("train.lr") is None and part_of("strategy.name") is None


def test_resume_and_tables_read_the_parts() -> None:
    assert set(FREE_ON_RESUME) == set(keys_playing(PLACE)) | set(keys_playing(CONDUCT))
    assert IGNORED_KEYS == keys_playing(PLACE)
    assert not any(plays(key, FREE_ON_RESUME) for key in ("train.lr", "model.hidden", "strategy.name", "seed"))
    assert plays("wandb.run.id", FREE_ON_RESUME) and not plays("partition.dirs", ("partition.dir",))


def test_a_resume_and_a_table_tell_configs_apart_by_what_they_compute() -> None:
    """A checkpoint's trained config and a report's columns ignore where a run lives and how long
    it runs, and keep what it computes."""
    base = make_run("train.epochs=5")
    moved = make_run("train.epochs=9", "cluster.master_port=29999", "wandb.project=other", "partition.cache_dir=/x")
    retuned = make_run("train.epochs=5", "train.lr=0.5")
    assert _trained_config(moved) == _trained_config(base) != _trained_config(retuned)
    runs = [Run(Path(str(i)), RunSummary(), flatten(plain(c))) for i, c in enumerate((base, moved, retuned))]
    assert differing_keys(runs) == ["train.epochs", "train.lr"]


def test_dataset_key_ignores_where_the_files_are_and_whether_to_download() -> None:
    cora = make_run("dataset=cora").dataset
    moved = replace(cora, root="/elsewhere", download=False)
    assert dataset_key(moved) == dataset_key(cora)
    assert dataset_key(replace(cora, to_undirected=False)) != dataset_key(cora)


def test_calibration_probe_keeps_the_setting_and_resets_the_rest() -> None:
    run = replace(make_run("strategy=pipegcn", "network=eth10g", "network.calibrate_share=0.5", "model.hidden=32",
                           "cluster.threads_per_worker=1", "train.lr=0.1", "train.patience=3",
                           "train.checkpoint_every=2", "train.dtype=float64", "fault.rank=1", "fault.epoch=2"),
                  run_dir="/tmp/run")
    probe = calibration.probe_config(run, calibration.probe_strategy(run), 0.5, "preset")
    traced = {"cluster.trace": True, "cluster.clock": "virtual"}  # the probe is traced, to be replayed
    assert setting(flatten(plain(probe))) == {**setting(flatten(plain(run))), **traced}
    assert probe.train.lr == 0.01 and probe.train.patience == 0 and probe.train.checkpoint_every == 0
    assert plain(probe.fault) == {"rank": None, "epoch": None, "stop": False, "link_down": False}
    assert probe.train.epochs == probe.train.eval_every == run.network.probe_epochs
    assert probe.strategy.name == "vanilla" and probe.network.calibrate_share is None
    assert probe.network.bandwidth_gbps == run.network.bandwidth_gbps * 0.5
    assert probe.run_dir == "/tmp/run/calibration_probe/preset" and probe.wandb.mode == "disabled"


def test_calibration_cache_key_ignores_place_keys_only() -> None:
    run = make_run("network=eth10g", "network.calibrate_share=0.5")
    baseline = calibration.probe_strategy(run)
    elsewhere = make_run("network=eth10g", "network.calibrate_share=0.5", "cluster.master_port=29999",
                         "wandb.project=other")
    wider = make_run("network=eth10g", "network.calibrate_share=0.5", "model.hidden=32")
    assert calibration._setting_key(elsewhere, baseline) == calibration._setting_key(run, baseline)
    assert calibration._setting_key(wider, baseline) != calibration._setting_key(run, baseline)
