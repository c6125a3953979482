"""How the reproduction tables compute a speed figure: every system of a table timed over the
same epochs (warm-up and examination epochs before them, for all alike), a speed-up per
interleaved round with its spread, a target met only where the interval says so, and a
baseline's reached share marked where it misses its calibration target."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from gnntrain.engine.metrics import EpochRecord
from gnntrain.engine.summary import RunSummary
from gnntrain.report.runs import Run
from gnntrain.report.stats import Ratio
from gnntrain.repro.tables import share_cell, speedup, timed_from


def _run(seed: int, times: list[float], examined: tuple[int, ...] = (), warmup: int = 1, comm: float = 0.0,
         target: float | None = None) -> Run:
    records = [EpochRecord(epoch=e, loss=1.0, train_acc=None, val_acc=None, test_acc=None, epoch_time=t,
                           compute_time=t - comm * t, comm_time=comm * t, comm_total_time=0.0, reduce_time=0.0,
                           eval_time=0.0, comm_bytes=0,
                           strategy_metrics={"examination": 1.0} if e in examined else {})
               for e, t in enumerate(times, start=1)]
    steady = [t for e, t in enumerate(times, start=1) if e > warmup and e not in examined]
    summary = RunSummary(mean_epoch_time=sum(steady) / len(steady), mean_comm_time=comm * sum(steady) / len(steady),
                         comm_share=comm, network={"calibration": None if target is None else {"share": target}})
    return Run(Path(f"/runs/{seed}"), summary, {"seed": seed, "train.warmup_epochs": warmup}, records)


def test_every_system_is_timed_from_the_first_epoch_none_of_them_warms_up_or_examines_in() -> None:
    dgl = _run(0, [9.0, 2.0, 2.0, 2.0, 2.0])
    hopgnn = _run(0, [9.0, 5.0, 1.0, 1.0, 1.0], examined=(2,))
    start = timed_from([dgl, hopgnn])
    assert start == 3, "HopGNN's examination epoch 2 is left out of DGL's timing too"
    assert speedup([dgl], [hopgnn], start).values == [2.0]


def test_a_speedup_is_paired_by_round_with_its_interval() -> None:
    base = [_run(seed, [1.0, t, t]) for seed, t in enumerate((2.0, 2.2, 1.8))]
    method = [_run(seed, [1.0, t, t]) for seed, t in enumerate((1.0, 1.0, 1.0))]
    ratio = speedup(base, method, timed_from(base + method))
    assert ratio.values == pytest.approx([2.0, 2.2, 1.8]) and ratio.median == pytest.approx(2.0)
    low, high = ratio.bounds
    logs = [math.log(v) for v in (2.0, 2.2, 1.8)]
    half = 4.303 * statistics.stdev(logs) / 3**0.5
    assert low < 2.0 < high and math.log(high / low) == pytest.approx(2 * half, rel=1e-3), "t-interval of the logs"
    assert math.sqrt(low * high) == pytest.approx(math.exp(statistics.fmean(logs))), "centred on the geometric mean"
    assert str(ratio).startswith("2.00x [")


def test_a_ratios_interval_never_reaches_zero_and_a_wide_one_is_marked() -> None:
    """Three rounds of 0.2, 1.1 and 0.8: a linear t-interval would reach below zero; on the log
    scale the interval stays positive, spans more than 2x, and says so."""
    spread = Ratio([0.2, 1.1, 0.8])
    low, high = spread.bounds
    assert 0 < low < high and spread.wide and str(spread).endswith("(spans more than 2x: more rounds needed)")
    assert not Ratio([1.5, 1.6, 1.55]).wide and "more rounds" not in str(Ratio([1.5, 1.6, 1.55]))
    assert Ratio([2.0, 0.5]).bounds[0] == pytest.approx(1 / Ratio([2.0, 0.5]).bounds[1]), "r and 1/r alike"


def test_a_target_is_met_only_where_the_whole_interval_is_past_it() -> None:
    assert Ratio([1.5, 1.6, 1.55]).met(1.4) == "met"
    assert Ratio([1.1, 1.2, 1.15]).met(1.4) == "**missed**"
    assert Ratio([0.95, 1.08, 1.02]).met(1.0).startswith("undecided")
    assert str(Ratio([1.3])) == "1.30x (1 round)"


def test_a_baselines_share_is_marked_where_it_misses_its_calibration_by_more_than_003() -> None:
    assert share_cell([_run(0, [1.0, 1.0], comm=0.66, target=0.6583)]) == "0.66"
    assert share_cell([_run(0, [1.0, 1.0], comm=0.61, target=0.67)]) == "0.61 (**off its target 0.67**)"
    assert share_cell([_run(0, [1.0, 1.0], comm=0.5)]) == "0.50"
