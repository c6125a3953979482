"""Partition once, load only your part (gnntrain.data.parted): ``gnntrain-partition`` writes
per-part files whose ranks train exactly as ranks that carve their part from the whole graph;
a precomputed assignment file serves as the partition; a partitioned dataset that does not fit
the run is refused in one line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import assert_same_training, make_run, train_records
from gnntrain.job import api
from gnntrain.job.composition import typed_run
from gnntrain.data.job import JobData, parted_folder, partition_spec, prepare_job_data, write_partitioned_dataset
from gnntrain.data.parted import PartedDataset
from gnntrain.data.partition import carve_part
from gnntrain.errors import ConfigError
from gnntrain.strategies import METHODS, loads_parts
from test_cli import GNNTRAIN

GRAPH = ("dataset.num_nodes=500", "dataset.avg_degree=6", "cluster.world_size=3", "train.epochs=4",
         "train.dtype=float64", "model=sage", "model.hidden=16", "model.dropout=0.5")
PART_LOADING = {
    "vanilla": ["strategy=vanilla"],
    "pipegcn": ["strategy=pipegcn", "strategy.smooth=gf", "strategy.bits=4"],
    "bns": ["strategy=bns", "strategy.p=0.5"],
    "bes": ["strategy=bes", "strategy.p=0.5"],
    "dropedge": ["strategy=dropedge", "strategy.p=0.5"],
    "adaqp": ["strategy=adaqp", "strategy.assign=fixed", "strategy.bits=2"],
    "sylvie": ["strategy=sylvie", "strategy.sync_every=2"],
    "pipeqs": ["strategy=pipeqs"],
    "broadcast": ["strategy=broadcast"],
    "sancus": ["strategy=sancus"],
}
"""Every strategy whose ranks load one part each (GraNNDis's servers reach beyond their parts, so
its ranks carve theirs from the whole graph); AdaQP with fixed widths (its adaptive widths
follow a profiled timing, which differs from run to run)."""


def _records(run_dir: Path, *overrides: str) -> list[dict]:
    return train_records(run_dir, *GRAPH, *overrides)


def test_every_graph_parallel_strategy_loads_parts_and_no_other() -> None:
    assert {name for name in METHODS if loads_parts(name)} == set(PART_LOADING)


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in ("vanilla", "adaqp") else pytest.mark.slow)
                                  for n in sorted(PART_LOADING)])
def test_ranks_loading_their_parts_train_as_ranks_holding_the_whole_graph(name: str, tmp_path) -> None:
    folder = tmp_path / "parted"
    run = make_run(*GRAPH, *PART_LOADING[name], f"partition.dir={folder}")
    write_partitioned_dataset(run, 3)
    job = prepare_job_data(run, 3, loads_parts=True)
    assert job.data is None and job.part is None and job.parted.folder == folder
    whole = _records(tmp_path / "whole", *PART_LOADING[name])
    assert_same_training(_records(tmp_path / "parts", *PART_LOADING[name], f"partition.dir={folder}"), whole, 4)


def test_part_files_hold_what_a_rank_carves_and_the_manifest_describes_them(tmp_path) -> None:
    run = make_run(*GRAPH, f"partition.dir={tmp_path}")
    parted = write_partitioned_dataset(run, 3)
    whole = prepare_job_data(make_run(*GRAPH), 3)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["format"] == 1 and manifest["partition"] == partition_spec(run, 3)
    assert manifest["graph"]["num_nodes"] == 500 and manifest["graph"]["num_train"] == int(whole.data.train_mask.sum())
    assert manifest["stats"] == whole.stats and len(manifest["fingerprint"]) == 40
    for rank in range(3):
        stored, carved = parted.load_part(rank), carve_part(whole.data, whole.part, rank, 3)
        assert stored.keys() == carved.keys()
        for key, value in carved.items():
            assert torch.equal(stored[key], value) if isinstance(value, torch.Tensor) else stored[key] == value, key
        owners = torch.repeat_interleave(torch.arange(3), torch.tensor(stored["recv_splits"]))
        assert torch.equal(whole.part[stored["global_ids"][stored["num_inner"]:]], owners)


def test_without_a_partitioned_dataset_a_run_loads_the_whole_graph(tmp_path) -> None:
    run = make_run(*GRAPH, f"partition.cache_dir={tmp_path}")
    assert PartedDataset.find(parted_folder(run, partition_spec(run, 3))) is None
    assert prepare_job_data(run, 3, loads_parts=True).data is not None


def test_the_cache_copy_serves_a_run_with_the_same_settings(tmp_path) -> None:
    run = make_run(*GRAPH, f"partition.cache_dir={tmp_path}")
    written = write_partitioned_dataset(run, 3)
    assert written.folder.parent == tmp_path / "parted"
    assert prepare_job_data(run, 3, loads_parts=True).parted.folder == written.folder
    assert prepare_job_data(run, 3, loads_parts=False).data is not None  # e.g. gnnpipe: the whole graph
    assert prepare_job_data(make_run(*GRAPH, f"partition.cache_dir={tmp_path}", "seed=1"), 3,
                            loads_parts=True).parted is None


@pytest.mark.slow
def test_an_assignment_file_is_the_partition(tmp_path) -> None:
    metis = prepare_job_data(make_run(*GRAPH), 3)
    path = tmp_path / "assignment.npy"
    np.save(path, metis.part.numpy().astype(np.int32))
    given = prepare_job_data(make_run(*GRAPH, f"partition.assignment={path}"), 3)
    assert torch.equal(given.part, metis.part) and given.stats == metis.stats
    assert_same_training(_records(tmp_path / "given", f"partition.assignment={path}"), _records(tmp_path / "metis"), 4)


@pytest.mark.parametrize("content,error", [
    (np.zeros(499, dtype=np.int64), r"holds a int64 array of shape \(499,\); valid: integer part ids of shape \(500,\)"),
    (np.zeros(500, dtype=np.float32), r"holds a float32 array"),
    (np.full(500, 3), r"gave part ids outside 0..2"),
    (np.arange(500) % 2, r"left 1 of 3 parts .* empty"),
    (None, r"is not a readable .npy file"),
])
def test_a_bad_assignment_file_is_refused_in_one_line(content, error, tmp_path) -> None:
    path = tmp_path / "assignment.npy"
    if content is None:
        path.write_text("not numpy")
    else:
        np.save(path, content)
    with pytest.raises(ConfigError, match=r"^partition.assignment=\S+assignment.npy " + error) as exc:
        prepare_job_data(make_run(*GRAPH, f"partition.assignment={path}"), 3)
    assert "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match="cannot be read"):
        partition_spec(make_run(*GRAPH, f"partition.assignment={tmp_path}/absent.npy"), 3)


def test_a_partitioned_dataset_that_does_not_fit_the_run_is_refused_in_one_line(tmp_path) -> None:
    write_partitioned_dataset(make_run(*GRAPH, f"partition.dir={tmp_path}"), 3)
    for overrides, error in [
        (["dataset.num_nodes=600"], r"has dataset=synthetic-\w+, but this run needs dataset=synthetic-\w+"),
        (["partition.method=random"], "has method=metis, but this run needs method=random"),
        (["seed=3"], "has seed=0, but this run needs seed=3"),
    ]:
        with pytest.raises(ConfigError, match=error):
            prepare_job_data(make_run(*GRAPH, f"partition.dir={tmp_path}", *overrides), 3, loads_parts=True)
    with pytest.raises(ConfigError, match="has parts=3, but this run needs parts=2"):
        prepare_job_data(make_run(*GRAPH, f"partition.dir={tmp_path}"), 2, loads_parts=True)
    with pytest.raises(ConfigError, match="needs the whole graph on its ranks: leave partition.dir unset"):
        prepare_job_data(typed_run(api.compose([*GRAPH, "strategy=gnnpipe", f"partition.dir={tmp_path}"])), 3)
    with pytest.raises(ConfigError, match=r"holds no partitioned dataset \(no manifest.json\)"):
        prepare_job_data(make_run(*GRAPH, f"partition.dir={tmp_path}/elsewhere"), 3, loads_parts=True)
    (tmp_path / "part1.pt").write_bytes(b"broken")
    with pytest.raises(ConfigError, match=r"part file \S+part1.pt has 6 bytes but \d+ were written: it was damaged"):
        prepare_job_data(make_run(*GRAPH, f"partition.dir={tmp_path}"), 3, loads_parts=True)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    del manifest["sizes"]  # as written before the sizes were kept: the rank reading it reports it
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    job = prepare_job_data(make_run(*GRAPH, f"partition.dir={tmp_path}"), 3, loads_parts=True)
    with pytest.raises(ConfigError, match=r"part file \S+part1.pt is unreadable"):
        job.part_fields(1, 3)


@pytest.mark.parametrize("damage", ["emptied", "swapped", "fifo", "device"])
def test_a_part_file_emptied_swapped_or_not_a_file_is_refused_before_any_rank_opens_it(damage: str, tmp_path) -> None:
    """One line naming the file, before any worker starts: a FIFO or /dev/zero would block or
    never end a rank's read; an emptied or swapped file (the manifest keeps each file's size)."""
    write_partitioned_dataset(make_run(*GRAPH, f"partition.dir={tmp_path}"), 3)
    first, second = tmp_path / "part0.pt", tmp_path / "part1.pt"
    if damage == "emptied":
        first.write_bytes(b"")
    elif damage == "swapped":
        held = first.read_bytes()
        first.write_bytes(second.read_bytes())
        second.write_bytes(held)
    else:
        first.unlink()
        os.mkfifo(first) if damage == "fifo" else first.symlink_to("/dev/zero")
    error = "is not a regular file" if damage in ("fifo", "device") else r"has \d+ bytes but \d+ were written"
    with pytest.raises(ConfigError, match=rf"^part file {first} {error}"):
        prepare_job_data(make_run(*GRAPH, f"partition.dir={tmp_path}"), 3, loads_parts=True)


def test_partitioning_alone_writes_any_number_of_parts_a_run_would_refuse() -> None:
    api.check(api.compose([*GRAPH, "partition.only=true", "partition.parts=4"]))
    with pytest.raises(ConfigError, match="partition.parts=4 does not fit strategy=vanilla"):
        api.check(api.compose([*GRAPH, "partition.parts=4"]))


@pytest.mark.slow
def test_gnntrain_partition_writes_the_dataset_and_a_run_then_loads_parts(tmp_path) -> None:
    overrides = ["dataset.num_nodes=400", "cluster.world_size=2", f"partition.dir={tmp_path}/parted"]
    wrote = subprocess.run([f"{GNNTRAIN}-partition", *overrides, f"hydra.run.dir={tmp_path}/p"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert wrote.returncode == 0, wrote.stderr
    assert "wrote 2 parts of synthetic (400 nodes" in wrote.stdout
    assert sorted(p.name for p in (tmp_path / "parted").iterdir()) == ["manifest.json", "part0.pt", "part1.pt"]
    ran = subprocess.run([GNNTRAIN, *overrides, "train.epochs=2", f"hydra.run.dir={tmp_path}/run"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert f"each rank loaded only its part, from {tmp_path}/parted" in ran.stdout


def test_a_job_holding_only_parts_knows_the_graph_from_the_manifest(tmp_path) -> None:
    run = make_run(*GRAPH, f"partition.dir={tmp_path}")
    write_partitioned_dataset(run, 3)
    parts, whole = prepare_job_data(run, 3, loads_parts=True), prepare_job_data(make_run(*GRAPH), 3)
    assert isinstance(parts, JobData) and parts.facts == whole.facts and parts.stats == whole.stats
