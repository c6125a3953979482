"""The virtual clock (``cluster.clock=virtual``, :mod:`gnntrain.timing`): every registered
strategy trains bit for bit as under the wall clock, and every rank's record adds up: its compute
and its exposed communication make its virtual epoch, and the epoch is the slowest rank's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import assert_same_training, make_run, train_records
from gnntrain.engine.summary import RunSummary
from gnntrain.errors import ConfigError, GnntrainError
from gnntrain.report import report
from gnntrain.report.runs import Run
from gnntrain.repro.tables import speedup
from gnntrain.strategies import METHODS

COMMON = ("dataset.num_nodes=400", "dataset.avg_degree=6", "train.epochs=3", "train.warmup_epochs=1",
          "train.dtype=float64", "model.dropout=0.5", "model=sage", "model.hidden=16", "cluster.world_size=2")
SETTINGS = {
    "pipegcn": ["strategy.smooth=gf"],
    "bns": ["strategy.p=0.5"],
    "bes": ["strategy.p=0.5"],
    "dropedge": ["strategy.p=0.5"],
    "adaqp": ["strategy.lambda_=1", "strategy.period=2", "strategy.group_size=20"],
    "gnnpipe": ["strategy.chunks=4"],
    "minibatch": ["strategy.batch_size=100", "strategy.fanout=3"],
    "lo": ["strategy.batch_size=100", "strategy.fanout=3"],
    "hopgnn": ["strategy.batch_size=40", "strategy.fanout=3", "strategy.merge=false"],
    "p3": ["strategy.batch_size=100", "strategy.fanout=3"],
    "naive": ["strategy.batch_size=100", "strategy.fanout=3"],
}
"""Each method's settings: small batches for the mini-batch family. Two methods decide on timings,
so their decisions are fixed here to compare the clocks: AdaQP weighs the variance alone
(``lambda_=1``: its profiled link speeds do not enter the widths) and HopGNN merges no
micrographs (its examination chooses a merge count by the epoch times)."""
FAST = ("vanilla",)
"""Run in the fast suite; PipeGCN's and GNNPipe's virtual paths run there too (the stale
exchange below, ``tests/test_replay.py``'s traces)."""


def test_every_setting_names_a_registered_method() -> None:
    assert set(SETTINGS) <= set(METHODS)


def assert_parts_add_up(records: list[dict]) -> None:
    """Per rank, compute + exposed communication = the rank's virtual epoch; the record's epoch is
    the slowest rank's."""
    for record in records:
        ranks = record["per_rank"]
        for epoch, compute, exposed in zip(ranks["epoch_time"], ranks["compute_time"], ranks["exposed_time"]):
            assert compute + exposed == pytest.approx(epoch, rel=1e-9, abs=1e-12)
            assert compute > 0
        assert record["epoch_time"] == max(ranks["epoch_time"])


@pytest.mark.parametrize("name", [pytest.param(n, marks=[] if n in FAST else pytest.mark.slow)
                                  for n in sorted(METHODS)])
def test_a_strategy_trains_the_same_under_both_clocks(name: str, tmp_path: Path) -> None:
    """Float64, 2 workers: the same losses, accuracies and bytes under the wall clock on the real
    transport and under the virtual clock on a 1 Gbit/s link; the virtual run's parts add up."""
    overrides = (*COMMON, f"strategy={name}", *SETTINGS.get(name, []))
    wall = train_records(tmp_path / "wall", *overrides)
    virtual = train_records(tmp_path / "virtual", *overrides, "cluster.clock=virtual", "network=eth10g",
                            "network.bandwidth_gbps=1")
    assert_same_training(virtual, wall, 3)
    assert_parts_add_up(virtual)
    assert json.loads((tmp_path / "virtual" / "summary.json").read_text())["clock"] == "virtual"
    assert json.loads((tmp_path / "wall" / "summary.json").read_text())["clock"] == "wall"


def test_a_slower_link_shows_in_virtual_time_not_in_wall_time(tmp_path: Path) -> None:
    """Halving the bandwidth of a link that carries most of the epoch lengthens the virtual epoch
    by about the added transfer time; nothing sleeps, so the run is not slower for it. The report
    names the runs' clock."""
    overrides = (*COMMON, "strategy=vanilla", "cluster.clock=virtual", "network=eth10g", "network.latency_us=0")
    fast = train_records(tmp_path / "fast", *overrides, "network.bandwidth_gbps=0.02")[-1]
    slow = train_records(tmp_path / "slow", *overrides, "network.bandwidth_gbps=0.01")[-1]
    added = slow["link_busy_time"] - fast["link_busy_time"]
    assert added > 0.01
    assert slow["epoch_time"] - fast["epoch_time"] == pytest.approx(added, rel=0.3)
    assert_parts_add_up([fast, slow])
    report(tmp_path, tmp_path / "report")
    assert "clock: virtual" in (tmp_path / "report" / "report.md").read_text()
    by_kind = slow["comm_transfer_time_by_kind"]
    assert by_kind["allreduce"] == pytest.approx(slow["comm_transfer_time_by_category"]["sync"])
    assert by_kind["halo_fwd"] > 0 and by_kind["halo_bwd"] > 0


@pytest.mark.parametrize("overrides, line", [
    (["cluster.trace=true"], "cluster.trace=True"),
    (["cluster.clock=virtual", "cluster.threads_per_worker=2", "cluster.virtual_compute=thread"],
     "cluster.virtual_compute=thread"),
    (["network=eth10g", "cluster.clock=wall"], "cluster.clock=wall with network=eth10g"),
    (["cluster.clock=virtual", "network.mode=kernel"], "network.mode=kernel"),
])
def test_bad_clock_settings_are_refused_in_one_line(overrides: list[str], line: str) -> None:
    with pytest.raises(ConfigError) as refused:
        make_run(*COMMON, *overrides)
    assert line in str(refused.value) and "\n" not in str(refused.value)


def test_a_ratio_of_a_wall_clock_run_to_a_virtual_one_is_refused() -> None:
    wall, virtual = (Run(Path(clock), RunSummary(clock=clock), {"seed": 0}) for clock in ("wall", "virtual"))
    with pytest.raises(GnntrainError, match="different clocks cannot share a ratio: virtual \\(virtual\\), "
                                            "wall \\(wall\\)"):
        speedup([wall], [virtual], 1)


def test_a_stale_exchange_is_hidden_for_as_long_as_it_moves(tmp_path: Path) -> None:
    """PipeGCN's stale exchange crosses the epoch's end: the account knows its completion from its
    peers' stamps and counts it hidden for its time on the link, not until the epoch ends."""
    records = train_records(tmp_path, *COMMON, "strategy=pipegcn", "cluster.clock=virtual", "network=eth10g",
                            "network.latency_us=0", "network.bandwidth_gbps=0.5", "train.epochs=4")
    for record in records[1:]:
        hidden, busy = record["comm_hidden_time_by_category"]["data"], record["link_busy_time_by_category"]["data"]
        assert 0.5 * busy <= hidden <= 1.5 * busy < 0.8 * record["epoch_time"], record
