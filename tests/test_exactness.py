"""A distributed vanilla run equals single-process full-graph training (dropout 0, same seed):
per-epoch loss, model outputs and parameter gradients, to 1e-5 relative."""

from __future__ import annotations

import pytest
import torch

from conftest import make_cfg, needs_real_data
from dist_helpers import trace_training
from gnntrain.data import prepare_job_data
from gnntrain.launch import launch
from gnntrain.train import WorkerContext

EPOCHS = 4
RTOL, ATOL = 1e-5, 1e-6


def _cfg(dataset: str, model: str, world: int, tmp_path) -> dict:
    overrides = [f"dataset={dataset}", f"model={model}", "model.dropout=0", "model.hidden=16",
                 f"cluster.world_size={world}", f"train.epochs={EPOCHS}", "seed=7"]
    if dataset == "synthetic":
        overrides += ["dataset.num_nodes=1500", "dataset.avg_degree=8"]
    cfg = make_cfg(*overrides)
    cfg["trace_dir"] = str(tmp_path)
    return cfg


def _single_process(cfg: dict) -> dict:
    cfg = dict(cfg, cluster=dict(cfg["cluster"], world_size=1))
    return trace_training(cfg, WorkerContext(0, 1, torch.device("cpu")), prepare_job_data(cfg, 1))


def _assemble(tmp_path, world: int, num_nodes: int) -> dict:
    """Merge the per-rank traces: outputs placed by global node id, losses/grads from rank 0."""
    traces = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    merged = {"loss": traces[0]["loss"], "grads": traces[0]["grads"], "out": []}
    for epoch in range(EPOCHS):
        out = torch.full((num_nodes, traces[0]["out"][epoch].shape[1]), float("nan"))
        for t in traces:
            out[t["ids"]] = t["out"][epoch]
        merged["out"].append(out)
    for t in traces[1:]:  # every rank holds the same all-reduced gradient
        for g0, g in zip(traces[0]["grads"], t["grads"]):
            for name in g0:
                torch.testing.assert_close(g[name], g0[name], rtol=0, atol=0)
    return merged


@pytest.mark.parametrize("dataset", ["synthetic", pytest.param("cora", marks=needs_real_data)])
@pytest.mark.parametrize("model", ["gcn", "sage"])
@pytest.mark.parametrize("world", [2, 4])
def test_distributed_equals_single_process(dataset: str, model: str, world: int, tmp_path) -> None:
    cfg = _cfg(dataset, model, world, tmp_path)
    reference = _single_process(cfg)
    launch(cfg, trace_training)
    num_nodes = reference["out"][0].shape[0]
    dist_run = _assemble(tmp_path, world, num_nodes)

    torch.testing.assert_close(torch.tensor(dist_run["loss"]), torch.tensor(reference["loss"]), rtol=RTOL, atol=0)
    for epoch in range(EPOCHS):
        torch.testing.assert_close(dist_run["out"][epoch], reference["out"][epoch], rtol=RTOL, atol=ATOL)
        for name, grad in reference["grads"][epoch].items():
            torch.testing.assert_close(dist_run["grads"][epoch][name], grad, rtol=RTOL, atol=ATOL,
                                       msg=lambda m: f"epoch {epoch + 1}, {name}: {m}")
    assert reference["loss"][-1] < reference["loss"][0], "training should reduce the loss"
