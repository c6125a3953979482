"""PipeQS (``strategy=pipeqs``): without staleness at 32 bits it is the synchronous baseline
exactly (float64, dropout on); every epoch's halo bytes are the records of the widths its plan
assigned to the rows it posted; the cache's hits are reported per epoch and an epoch that hits
sends nothing for that layer; a change above every threshold never hits."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from conftest import make_run, train_records
from dist_helpers import assert_same_traces, trace_full_batch, trace_job
from gnntrain.comm.quantize import record_bytes
from gnntrain.errors import ConfigError
from gnntrain.job.validation import validate
from gnntrain.strategies import strategy_class

EPOCHS = 3
COMMON = ("model=sage", "model.layers=3", "model.hidden=16", "model.dropout=0.5", "dataset.num_nodes=400", "seed=4",
          "cluster.world_size=2")


@pytest.mark.slow
def test_pipeqs_without_staleness_at_full_precision_is_vanilla(tmp_path) -> None:
    vanilla = trace_job(tmp_path, "vanilla", *COMMON, f"train.epochs={EPOCHS}", "train.dtype=float64",
                        worker=trace_full_batch)
    pipeqs = trace_job(tmp_path, "pipeqs", *COMMON, f"train.epochs={EPOCHS}", "train.dtype=float64", "strategy=pipeqs",
                       "strategy.assign=fixed", "strategy.bits=32", "strategy.pipeline=false", worker=trace_full_batch)
    assert_same_traces(pipeqs, vanilla, 1e-12)
    for kind in ("halo_fwd", "halo_bwd"):
        assert sum(t["bytes"][kind] for t in pipeqs) == sum(t["bytes"][kind] for t in vanilla)


def trace_widths(run, ctx, job, *, trace_dir: str) -> None:
    """Train PipeQS, recording per epoch this rank's halo bytes by kind and the bytes its plan's
    widths give the rows it posted (layer by layer: rows x the record of the width at the post)."""
    strategy = strategy_class(run.strategy.name)(run, ctx, job)
    policy = strategy.policy
    posted: list[tuple[str, int, int, int]] = []
    tally = policy._tally

    def watched(key):
        plan, layer, direction = policy.pipe.plan, *key
        width = plan.width.get(key, plan.start)
        rows = policy.pipe.send_index.numel() if direction == "fwd" else policy.pipe.num_halo
        posted.append((f"halo_{direction}", layer, rows, width))
        tally(key)

    policy._tally = watched
    widths = strategy.step.model.input_widths
    trace = {"bytes": [], "expected": [], "hits": []}
    for epoch in range(1, run.train.epochs + 1):
        strategy.meter.reset()
        posted.clear()
        strategy.train_epoch(epoch)
        expected: dict[str, int] = {}
        for kind, layer, rows, width in posted:
            expected[kind] = expected.get(kind, 0) + rows * record_bytes(widths[layer], width)
        trace["bytes"].append({k: strategy.meter.bytes.get(k, 0) for k in ("halo_fwd", "halo_bwd")})
        trace["expected"].append(expected)
        trace["hits"].append(policy.hits)
    strategy.finish()
    dist.barrier()
    torch.save(trace, Path(trace_dir) / f"rank{ctx.rank}.pt")


def test_the_bytes_are_the_records_of_the_widths_it_assigned(tmp_path) -> None:
    traces = trace_job(tmp_path, "pipeqs", *COMMON, "train.epochs=8", "strategy=pipeqs", worker=trace_widths)
    for trace in traces:
        for sent, expected in zip(trace["bytes"], trace["expected"]):
            assert sent == {k: expected.get(k, 0) for k in sent}
    assert any(e["halo_fwd"] != trace["expected"][0]["halo_fwd"] for e in trace["expected"]), "the widths moved"


@pytest.mark.slow
def test_the_cache_hits_are_reported_and_an_epoch_that_hits_sends_less(tmp_path) -> None:
    always = train_records(tmp_path / "always", *COMMON, "train.epochs=6", "strategy=pipeqs", "strategy.assign=fixed",
                           "strategy.bits=8", "strategy.threshold=1")
    never = train_records(tmp_path / "never", *COMMON, "train.epochs=6", "strategy=pipeqs", "strategy.assign=fixed",
                          "strategy.bits=8", "strategy.threshold=0")
    hits = [r["strategy_metrics"]["cache_hits"] for r in always]
    assert hits[:3] == [0, 0, 0] and hits[3] > 0, hits
    assert all(r["strategy_metrics"]["cache_hits"] == 0 for r in never)
    for hit, record, plain in zip(hits, always, never):
        assert (record["comm_bytes_by_kind"]["halo_fwd"] < plain["comm_bytes_by_kind"]["halo_fwd"]) == (hit > 0)


def test_pipeqs_refuses_bad_keys() -> None:
    with pytest.raises(ConfigError, match=r"strategy.bits=3.*one of 2, 4, 8, 32"):
        validate(make_run("strategy=pipeqs", "strategy.bits=3"))
    with pytest.raises(ConfigError, match=r"strategy.threshold=2.*in \[0, 1\]"):
        validate(make_run("strategy=pipeqs", "strategy.threshold=2"))
    with pytest.raises(ConfigError, match=r"strategy.max_skips=0.*>= 1"):
        validate(make_run("strategy=pipeqs", "strategy.max_skips=0"))
