"""Broadcast training (``strategy=broadcast``) equals single-process training; Sancus
(``strategy=sancus``) with its skip threshold at 0 equals broadcast training, bytes included;
its broadcast bytes fall as the threshold rises, counted, with the skips announced."""

from __future__ import annotations

import pytest

from conftest import make_run, train_records
from dist_helpers import assert_same_traces, trace_full_batch, trace_job
from gnntrain.errors import ConfigError
from gnntrain.job.validation import validate

EPOCHS = 3
COMMON = ("model=sage", "model.layers=3", "model.hidden=16", "model.dropout=0.5", "train.dtype=float64",
          f"train.epochs={EPOCHS}", "dataset.num_nodes=400", "seed=6")


def test_broadcast_equals_single_process_and_sancus_at_zero_equals_broadcast(tmp_path) -> None:
    single = trace_job(tmp_path, "single", *COMMON, "cluster.world_size=1", worker=trace_full_batch)
    broadcast = trace_job(tmp_path, "broadcast", *COMMON, "strategy=broadcast", "cluster.world_size=3",
                          worker=trace_full_batch)
    sancus = trace_job(tmp_path, "sancus", *COMMON, "strategy=sancus", "strategy.threshold=0", "cluster.world_size=3",
                       worker=trace_full_batch)
    assert_same_traces(broadcast, single, 1e-9, "broadcast against one process, ")
    assert_same_traces(sancus, broadcast, 1e-9, "sancus at threshold 0 against broadcast, ")
    assert [t["bytes"] for t in sancus] == [t["bytes"] for t in broadcast]
    assert all("skip_flags" not in t["bytes"] for t in sancus)


def test_broadcast_sends_every_partition_to_every_peer(tmp_path) -> None:
    """Per epoch and layer each of 3 ranks sends its inner rows twice (two peers), at the layer's
    input width (32 features, then 16): ``2 N (32 + 16 + 16)`` float32 values over all ranks."""
    records = train_records(tmp_path, *COMMON, "strategy=broadcast", "cluster.world_size=3", "train.dtype=float32")
    for record in records:
        assert record["comm_bytes_by_kind"]["bcast_fwd"] == 2 * 400 * (32 + 16 + 16) * 4


@pytest.mark.slow
def test_sancus_broadcasts_less_as_its_threshold_rises(tmp_path) -> None:
    """8 epochs on 2 ranks: the input features never change, so any threshold skips them until the
    staleness bound; higher thresholds skip more of the hidden layers' broadcasts too. Every
    skip decision is announced: one byte per rank, peer and layer."""
    overrides = (*COMMON, "strategy=sancus", "cluster.world_size=2", "train.epochs=8", "strategy.max_staleness=8")
    sent = {}
    for threshold in (0.0, 0.05, 0.5, 10.0):
        records = train_records(tmp_path / str(threshold), *overrides, f"strategy.threshold={threshold}")
        sent[threshold] = sum(r["comm_bytes_by_kind"]["bcast_fwd"] for r in records)
        flags = [r["comm_bytes_by_kind"].get("skip_flags", 0) for r in records]
        assert flags == [0] * 8 if threshold == 0 else flags == [2 * 3] * 8
    assert sent[0.0] > sent[0.05] >= sent[0.5] > sent[10.0]
    assert sent[10.0] == sent[0.0] / 8, "a threshold nothing reaches broadcasts in the first epoch only"


def test_sancus_refuses_a_negative_threshold() -> None:
    with pytest.raises(ConfigError, match=r"strategy.threshold=-1.*>= 0"):
        validate(make_run("strategy=sancus", "strategy.threshold=-1"))
