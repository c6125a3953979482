"""Tensor parallelism (``strategy=neutrontp``) equals single-process full-graph training, float64
with dropout: loss, gradients, the logits of every node and the evaluation counts, for GCN,
GraphSAGE and GCNII on 2 and 4 workers; its bytes are the analytic count of its transposes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import make_run
from dist_helpers import assert_gradients_close, trace_full_batch, trace_job
from gnntrain.config.schema import RootConfig
from gnntrain.data.job import JobData
from gnntrain.errors import ConfigError
from gnntrain.job.validation import job_layout
from gnntrain.parallel.feature_split import even_blocks, transpose_bytes
from gnntrain.parallel.mesh import WorkerContext

EPOCHS = 3
NODES = 300
COMMON = ("model.layers=3", "model.hidden=16", "model.dropout=0.5", "train.dtype=float64",
          f"train.epochs={EPOCHS}", f"dataset.num_nodes={NODES}", "seed=3")


def trace_with_outputs(run: RootConfig, ctx: WorkerContext, job: JobData, *, trace_dir: str) -> None:
    """:func:`trace_full_batch`, then the trained model's logits of the rank's rows by global id."""
    trace_full_batch(run, ctx, job, trace_dir=trace_dir)
    from gnntrain.strategies import strategy_class

    path = Path(trace_dir) / f"rank{ctx.rank}.pt"
    trace = torch.load(path)
    strategy = strategy_class(run.strategy.name)(run, ctx, job)
    for epoch in range(1, run.train.epochs + 1):
        strategy.train_epoch(epoch)
    halo = getattr(strategy, "aggregation", None) or strategy.policy.evaluation_halo()
    graph = strategy.step.graph
    trace["outputs"] = (graph.global_ids[: graph.num_inner].cpu(), strategy.step.local_outputs(halo).cpu())
    torch.save(trace, path)


def _traces(tmp_path, name: str, world: int, *overrides: str) -> list[dict]:
    return trace_job(tmp_path, name, *COMMON, *overrides, f"cluster.world_size={world}", worker=trace_with_outputs)


def _logits(traces: list[dict]) -> torch.Tensor:
    ids = torch.cat([t["outputs"][0] for t in traces])
    out = torch.cat([t["outputs"][1] for t in traces])
    return out[torch.argsort(ids)]


@pytest.mark.parametrize("model,norm", [("gcn", "none"), pytest.param("sage", "batch", marks=pytest.mark.slow),
                                        pytest.param("gcnii", "none", marks=pytest.mark.slow)])
@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_neutrontp_equals_single_process(model: str, norm: str, world: int, tmp_path) -> None:
    overrides = (f"model={model}", f"model.norm={norm}") + (("model.layers=4",) if model == "gcnii" else ())
    reference = _traces(tmp_path, "single", 1, *overrides)
    traces = _traces(tmp_path, "tp", world, *overrides, "strategy=neutrontp")
    torch.testing.assert_close(torch.tensor(traces[0]["loss"]), torch.tensor(reference[0]["loss"]), rtol=1e-9, atol=0)
    for epoch in range(EPOCHS):
        torch.testing.assert_close(traces[0]["counts"][epoch], reference[0]["counts"][epoch], rtol=0, atol=0)
        for rank, trace in enumerate(traces):
            assert_gradients_close(trace["grads"][epoch], reference[0]["grads"][epoch], 1e-9,
                                   f"rank {rank}, epoch {epoch + 1}")
    expected = _logits(reference)
    torch.testing.assert_close(_logits(traces), expected, rtol=1e-9, atol=1e-9 * float(expected.abs().max()))


def test_neutrontp_bytes_are_its_transposes(tmp_path) -> None:
    """GCN 3 x 16 on 32 features, 5 classes, 3 workers: each layer runs in its narrower width
    (map first where ``out < in``: 16, 16, 5); per epoch two transposes forward and, where the
    layer's messages need a gradient (every layer: each maps first or follows a mapped one), two
    backward; evaluation (once per epoch) two forward; the all-reduce sums every parameter."""
    world = 3
    traces = trace_job(tmp_path, "tp", *COMMON, "model=gcn", "strategy=neutrontp", f"cluster.world_size={world}",
                       worker=trace_full_batch)
    rows = even_blocks(NODES, world)
    per_pass = 2 * sum(transpose_bytes(rows, width, 8) for width in (16, 16, 5))
    assert sum(t["bytes"]["transpose_fwd"] for t in traces) == EPOCHS * per_pass
    assert sum(t["bytes"]["transpose_bwd"] for t in traces) == EPOCHS * per_pass
    assert sum(t["bytes"]["eval_transpose_fwd"] for t in traces) == EPOCHS * per_pass
    parameters = 32 * 16 + 16 + 16 * 16 + 16 + 16 * 5 + 5
    assert all(t["bytes"]["allreduce"] == EPOCHS * parameters * 8 for t in traces)


def test_transposes_move_each_block_once() -> None:
    """Rows of 10, 10 and 11 nodes, 5 columns split 1, 2, 2: each rank keeps its own block."""
    assert even_blocks(31, 3) == [10, 10, 11] and even_blocks(5, 3) == [1, 2, 2]
    assert transpose_bytes([10, 10, 11], 5, 4) == 4 * (31 * 5 - (10 * 1 + 10 * 2 + 11 * 2))


def test_neutrontp_refuses_models_with_per_edge_scores() -> None:
    with pytest.raises(ConfigError, match=r"model=gat.*valid: model=gcn, sage, gcnii"):
        job_layout(make_run("strategy=neutrontp", "model=gat"), 2)
    assert job_layout(make_run("strategy=neutrontp"), 4).axes == {"tp": 4}
