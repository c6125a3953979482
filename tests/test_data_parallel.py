"""The second family (data parallelism on a named device mesh) equals single-process
full-graph training: loss, gradients and evaluation scores, float64, dropout 0.5, for every
replica layout (2 replicas of the whole graph; 2 graph-parallel groups x 2 replicas), with
cross-rank batch norm; and the communicator's point-to-point transfers stay inside a mesh axis and are counted."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from conftest import make_run
from dist_helpers import assert_gradients_close, ring_transfers, trace_full_batch, trace_job
from gnntrain.job import api
from gnntrain.job.composition import typed_run
from gnntrain.errors import ConfigError
from gnntrain.job.validation import job_layout

EPOCHS = 3
COMMON = ("model.layers=3", "model.hidden=16", "model.dropout=0.5", "train.dtype=float64",
          f"train.epochs={EPOCHS}", "dataset.num_nodes=800", "seed=5")


def _traces(tmp_path, name: str, world: int, *overrides: str) -> list[dict]:
    return trace_job(tmp_path, name, *COMMON, *overrides, f"cluster.world_size={world}", worker=trace_full_batch)


@pytest.mark.parametrize("model,norm", [("gcn", "none"), pytest.param("sage", "batch", marks=pytest.mark.slow)])
@pytest.mark.parametrize("world,group", [pytest.param(2, 1, marks=pytest.mark.slow), (4, 2)])
def test_data_parallel_equals_single_process(model: str, norm: str, world: int, group: int, tmp_path) -> None:
    reference = _traces(tmp_path, "single", 1, f"model={model}", f"model.norm={norm}")[0]
    traces = _traces(tmp_path, "dp", world, f"model={model}", f"model.norm={norm}", "strategy=data_parallel",
                     f"strategy.graph_parallel={group}")
    torch.testing.assert_close(torch.tensor(traces[0]["loss"]), torch.tensor(reference["loss"]), rtol=1e-9, atol=0)
    for epoch in range(EPOCHS):
        torch.testing.assert_close(traces[0]["counts"][epoch], reference["counts"][epoch], rtol=0, atol=0)
        torch.testing.assert_close(traces[0]["eval_loss"][epoch], reference["eval_loss"][epoch], rtol=1e-9, atol=0)
        for rank, trace in enumerate(traces):
            assert_gradients_close(trace["grads"][epoch], reference["grads"][epoch], 1e-9,
                                   f"rank {rank}, epoch {epoch + 1}")
    halo = sum(t["bytes"].get("halo_fwd", 0) for t in traces)
    assert (halo > 0) == (group > 1), "halo rows travel only within graph-parallel groups"
    assert all(t["bytes"]["allreduce"] > 0 for t in traces)


def test_data_parallel_layout_is_checked_before_the_workers_start() -> None:
    run = typed_run(api.compose(["strategy=data_parallel", "strategy.graph_parallel=3", "cluster.world_size=4"]))
    with pytest.raises(ConfigError, match=r"strategy.graph_parallel=3 must divide .*\(4\); valid: 1, 2, 4"):
        job_layout(run, 4)
    layout = job_layout(make_run("strategy=data_parallel", "strategy.graph_parallel=2"), 4)
    assert layout.axes == {"dp": 2, "gp": 2} and layout.parts == 2


@pytest.mark.slow
def test_point_to_point_transfers_stay_on_their_mesh_axis(tmp_path) -> None:
    run = make_run("strategy=data_parallel", "strategy.graph_parallel=2", "cluster.world_size=4",
                   "dataset.num_nodes=200")
    api.run(run, partial(ring_transfers, trace_dir=str(tmp_path)))
    traces = [torch.load(tmp_path / f"rank{r}.pt") for r in range(4)]
    # mesh dp x gp = 2 x 2: gp groups {0, 1}, {2, 3}; dp groups {0, 2}, {1, 3}
    assert [t["received"]["gp"][0] for t in traces] == [1.0, 0.0, 3.0, 2.0]
    assert [t["received"]["dp"][0] for t in traces] == [2.0, 3.0, 0.0, 1.0]
    assert all(t["bytes"] == {"pipe_fwd": 2 * 3 * 4} for t in traces)
