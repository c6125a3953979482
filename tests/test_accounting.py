"""The speed tables' accounting (:mod:`gnntrain.repro.accounting`): the parts of each rank's
epoch, the check that they add up, and both bounds on hiding communication."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import train_records
from gnntrain.engine.metrics import EpochRecord
from gnntrain.engine.summary import RunSummary
from gnntrain.report.runs import Run
from gnntrain.repro.accounting import account, accounting_table


def _record(epoch: int, ranks: list[dict[str, float]]) -> EpochRecord:
    figures = ("epoch_time", "compute_time", "exposed_time", "comm_wait_time", "comm_transfer_time",
               "comm_hidden_time", "reduce_wait_time", "reduce_transfer_time", "reduce_hidden_time")
    per_rank = {f: [rank.get(f, 0.0) for rank in ranks] for f in figures}
    return EpochRecord(epoch=epoch, loss=1.0, train_acc=None, val_acc=None, test_acc=None,
                       epoch_time=max(per_rank["epoch_time"]), compute_time=0.0, comm_time=0.0, comm_total_time=0.0,
                       reduce_time=0.0, eval_time=0.0, comm_bytes=0, per_rank=per_rank)


def _run(clock: str, records: list[EpochRecord]) -> Run:
    return Run(Path("/runs/0"), RunSummary(clock=clock), {"seed": 0}, records)


RANK = {"epoch_time": 1.0, "compute_time": 0.5, "exposed_time": 0.5, "comm_wait_time": 0.1,
        "comm_transfer_time": 0.2, "comm_hidden_time": 0.05, "reduce_wait_time": 0.05, "reduce_transfer_time": 0.1}
"""One rank's epoch of 1 s: 0.5 compute, 0.3 data (0.1 waiting), 0.15 all-reduce, 0.05 control."""


def test_the_parts_of_an_epoch_and_both_bounds() -> None:
    a = account([_run("virtual", [_record(1, [RANK] * 2), _record(2, [RANK] * 2)])], start=2)
    assert (a.compute, a.wait, a.transfer, a.allreduce) == pytest.approx((0.5, 0.1, 0.2, 0.15))
    assert a.other == pytest.approx(0.05) and a.hidden == pytest.approx(0.05) and a.gap == pytest.approx(0.0)
    assert a.hide_all_bound == pytest.approx(1 / 0.7)  # 1 / max(s, 1 - s), s = 0.3
    assert a.shared_link_bound == pytest.approx(1 / 0.7)  # compute dominates: the bounds agree
    link_bound = account([_run("virtual", [_record(1, [{**RANK, "compute_time": 0.1, "epoch_time": 0.6}] * 2)])], 1)
    assert link_bound.hide_all_bound == pytest.approx(0.6 / 0.3)  # the data alone on the link
    assert link_bound.shared_link_bound == pytest.approx(0.6 / (0.15 + 0.05 + 0.3))  # all-reduce, control, data
    assert a.cells()["parts vs epoch"] == "0.00%"


def test_a_rank_whose_parts_miss_its_epoch_by_more_than_one_percent_is_marked() -> None:
    late = {**RANK, "epoch_time": 1.05}
    a = account([_run("virtual", [_record(1, [RANK, late])])], start=1)
    assert a.gap == pytest.approx(0.05 / 1.05)
    assert "**over 1%**" in a.cells()["parts vs epoch"]


def test_under_the_wall_clock_the_table_says_the_parts_add_up_by_definition() -> None:
    table = accounting_table({"vanilla": [_run("wall", [_record(1, [RANK] * 2)])]}, start=1)
    assert "wall clock" in table and "by definition" in table


def test_a_virtual_clock_run_adds_up_per_rank_within_one_percent(tmp_path: Path) -> None:
    """A real PipeGCN run under the virtual clock on a described link: every rank's compute (its
    clock's) plus its exposed communication (the meter's) is its epoch within 1%."""
    records = train_records(tmp_path, "strategy=pipegcn", "dataset.num_nodes=600", "train.epochs=4",
                            "cluster.world_size=2", "cluster.clock=virtual", "network=eth10g")
    run = _run("virtual", [EpochRecord(**r) for r in records])
    a = account([run], start=2)
    assert a.gap <= 0.01 and a.compute > 0 and a.allreduce > 0
