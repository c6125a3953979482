"""The per-rank memory estimate made before training, and the stop it can order."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import make_cfg, make_run
from gnntrain.job import api
from gnntrain.cost import memory as memory_arithmetic
from gnntrain.job import memory as memory_estimate
from gnntrain.data.graph_data import GraphFacts
from gnntrain.errors import ConfigError
from gnntrain.strategies.graph_parallel.config import SAMPLED_GRAPH_BYTES_PER_EDGE
from gnntrain.engine.summary import RunSummary

GNNTRAIN = str(Path(sys.executable).with_name("gnntrain"))


def test_saved_activations_grow_with_the_rows_and_the_model() -> None:
    """The fitted bytes per inner row grow with the hidden width and the layers; GraphSAGE saves
    nothing per edge (its aggregation keeps only the matrix), GAT does (attention per edge)."""
    sage = make_run("model=sage", "model.hidden=32").model
    wider = make_run("model=sage", "model.hidden=64").model
    per_inner, _, per_edge = memory_arithmetic.saved_bytes_per_row(sage, 16, 4)
    assert 0 < per_inner < memory_arithmetic.saved_bytes_per_row(wider, 16, 4)[0] and per_edge == 0
    assert memory_arithmetic.saved_bytes_per_row(make_run("model=gat").model, 16, 4)[2] > 0


def test_an_estimate_over_the_memory_here_stops_the_job_in_one_line(monkeypatch) -> None:
    run = make_run("model=sage")
    facts = GraphFacts("g", 4_000_000, 200_000_000, 100, 47, False, 1000)
    stats = {"inner_nodes": [2_000_000] * 2, "boundary_nodes": [500_000] * 2, "inner_edges": [100_000_000] * 2}
    estimates = memory_estimate.estimate_job(run, facts, stats)
    assert estimates[0].graph_mb > 100_000_000 * memory_arithmetic.BYTES_PER_EDGE / 2**20 - 1
    monkeypatch.setattr(memory_estimate, "available_mb", lambda: 8 * 1024.0)
    with pytest.raises(ConfigError) as err:
        memory_estimate.check_fits(estimates, [0, 1], 2, mapped_mb=None)
    message = str(err.value)
    assert "\n" not in message and "8.0 GiB is available" in message
    assert "cluster.world_size > 2" in message and "gnntrain-partition" in message
    monkeypatch.setattr(memory_estimate, "available_mb", lambda: 1024.0**3)
    memory_estimate.check_fits(estimates, [0, 1], 2, mapped_mb=None)  # fits: no error


def test_part_files_mapped_from_disk_and_the_shared_runtime_count_once(monkeypatch) -> None:
    """Ranks that map their part files need their peaks less the files (page cache, which
    MemAvailable counts) and less the runtime's libraries for every rank but one."""
    run = make_run("model=sage")
    facts = GraphFacts("g", 4_000_000, 200_000_000, 100, 47, False, 1000)
    stats = {"inner_nodes": [2_000_000] * 2, "boundary_nodes": [500_000] * 2, "inner_edges": [100_000_000] * 2}
    estimates = memory_estimate.estimate_job(run, facts, stats)
    own = 2 * estimates[0].total_mb - 2 * 3000.0 - memory_arithmetic.SHARED_RUNTIME_MB
    monkeypatch.setattr(memory_estimate, "available_mb", lambda: own + 1)
    memory_estimate.check_fits(estimates, [0, 1], 2, mapped_mb={0: 3000.0, 1: 3000.0})
    monkeypatch.setattr(memory_estimate, "available_mb", lambda: own - 1)
    with pytest.raises(ConfigError, match="besides the 5.9 GiB of part files they map") as err:
        memory_estimate.check_fits(estimates, [0, 1], 2, mapped_mb={0: 3000.0, 1: 3000.0})
    assert "gnntrain-partition" not in str(err.value)


def test_methods_that_keep_more_than_vanilla_say_how_much() -> None:
    """PipeGCN adds its exchanges in flight, 2 (H + S) sum_l d_l values (more with smoothing);
    BNS-GCN its sampled graph, per in-edge, and nothing at p = 1; AdaQP nothing."""
    facts = GraphFacts("g", 1_000_000, 50_000_000, 100, 47, False, 1000)
    stats = {"inner_nodes": [500_000] * 2, "boundary_nodes": [200_000] * 2, "sent_rows": [300_000] * 2,
             "inner_edges": [25_000_000] * 2}

    def method_mb(*overrides: str) -> float:
        estimates = memory_estimate.estimate_job(make_run("model=sage", "model.hidden=64", *overrides), facts, stats)
        return estimates[0].method_mb

    widths = 100 + 64
    assert method_mb("strategy=vanilla") == method_mb("strategy=adaqp") == 0
    assert method_mb("strategy=pipegcn") * 2**20 == pytest.approx(2 * 500_000 * widths * 4)
    assert method_mb("strategy=pipegcn", "strategy.smooth=gf") * 2**20 == pytest.approx(3 * 500_000 * widths * 4)
    assert method_mb("strategy=bns") * 2**20 == pytest.approx(25_000_000 * SAMPLED_GRAPH_BYTES_PER_EDGE)
    assert method_mb("strategy=bns", "strategy.p=1") == 0


def test_the_summary_holds_the_estimate_beside_the_measured_peak(tmp_path) -> None:
    """On a graph whose data takes some 80 MB a rank: a forked worker's resident runtime before
    its data comes out either near 280 or near 350 MiB from one run to the next (the library
    pages it faults in; :data:`~gnntrain.cost.memory.RUNTIME_MB`), and on the default graph of a
    few MB that alone decided the bound (352.6 estimated against 281.4 measured in 2 of 7 full
    suites here); at 80 MB (estimated 430 against 360 measured at 280 MiB of runtime) the bound holds
    on either side."""
    cfg = make_cfg("model=sage", "train.epochs=2", "cluster.world_size=2", "dataset.num_nodes=60000",
                   "dataset.avg_degree=10")
    cfg["run_dir"] = str(tmp_path)
    api.run(cfg)
    summary = RunSummary.read(tmp_path)
    estimate, measured = summary.estimated_peak_mem_mb, summary.peak_mem_mb
    assert summary.memory_estimate["total_mb"] == estimate
    assert 0.75 <= estimate / measured <= 1.25


@pytest.mark.slow
def test_a_graph_too_big_for_this_machine_is_refused_before_it_is_drawn_or_partitioned(tmp_path) -> None:
    """The new user's case: BNS-GCN at p = 0.1, 4 workers, GraphSAGE-64 on a synthetic graph of
    2M nodes and 120M directed edges (60M undirected), as many more as this machine's memory
    needs: refused in one line with its estimate, in seconds (a proxy's partition), with no
    partition of the graph computed."""
    nodes = 2_000_000 * max(1, math.ceil(memory_estimate.available_mb() / (16 * 1024)))
    start = time.monotonic()
    done = subprocess.run([GNNTRAIN, "strategy=bns", "strategy.p=0.1", "cluster.world_size=4", "model=sage",
                           "model.hidden=64", f"dataset.num_nodes={nodes}", "dataset.avg_degree=60",
                           f"partition.cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={tmp_path / 'run'}"],
                          capture_output=True, text=True, env={**os.environ, "WANDB_MODE": "disabled"}, timeout=300)
    assert done.returncode == 2 and time.monotonic() - start < 30
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("gnntrain: error: ") and "need" in line and "an estimated" in line
    assert f"(estimated before drawing or partitioning the {nodes}-node graph" in line
    assert len(list((tmp_path / "cache" / "partitions").iterdir())) <= 1  # the proxy's, where the ranks were estimated


@pytest.mark.slow
def test_ranks_carving_their_parts_are_estimated_within_a_quarter_with_the_shared_graph(tmp_path) -> None:
    """A user's case: 200k nodes of degree 50 and 128 features, BNS-GCN, GraphSAGE-64, 4 spawned
    workers without part files: 0.72 of the measured peak before the shared whole graph was
    counted."""
    run_dir = tmp_path / "run"
    subprocess.run([GNNTRAIN, "strategy=bns", "model=sage", "model.hidden=64", "cluster.world_size=4",
                    "dataset.num_nodes=200000", "dataset.avg_degree=50", "dataset.num_features=128", "train.epochs=2",
                    f"partition.cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={run_dir}"], check=True,
                   capture_output=True, env={**os.environ, "WANDB_MODE": "disabled"}, timeout=600)
    summary = RunSummary.read(run_dir)
    assert summary.memory_estimate["shared_mb"] > 0
    assert 0.75 <= summary.estimated_peak_mem_mb / summary.peak_mem_mb <= 1.25


def test_the_partition_peak_estimate_covers_the_measured_peaks() -> None:
    """At most 40% above the peaks measured (make scale at ogbn-products' size: 11.63 GiB; the
    default synthetic graph at 2M nodes and average degree 60: 14.52 GiB), never below them."""
    for nodes, edges, features, measured_gib in ((2_449_029, 123_639_324, 100, 11.63),
                                                 (2_000_000, 117_487_592, 32, 14.52)):
        estimate = memory_arithmetic.partition_peak_mb(nodes, edges, features, "float32") / 1024
        assert measured_gib <= estimate <= 1.4 * measured_gib, (estimate, measured_gib)


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [["dataset.num_features=100000000"], ["model.hidden=100000000"],
                                       ["dataset.num_nodes=10000000", "dataset.num_classes=10000000"],
                                       ["dataset.num_nodes=1000000000"]],
                         ids=["1e8 features", "1e8 hidden", "1e7 classes", "1e9 nodes"])
def test_sizes_beyond_memory_are_refused_before_anything_of_their_size_is_allocated(overrides: list[str],
                                                                                    tmp_path) -> None:
    start = time.monotonic()
    done = subprocess.run([GNNTRAIN, *overrides, f"partition.cache_dir={tmp_path / 'cache'}",
                           f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True,
                          env={**os.environ, "WANDB_MODE": "disabled"}, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and time.monotonic() - start < 30 and len(lines) == 1
    assert lines[0].startswith("gnntrain: error: ") and " GiB is available" in lines[0]
