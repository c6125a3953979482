"""A distributed vanilla run equals single-process full-graph training (dropout 0, same seed):
per-epoch loss, model outputs and parameter gradients, to 1e-5 relative, for every model
(GCNII at 32 layers)."""

from __future__ import annotations

import pytest
import torch

from conftest import make_cfg, needs_real_data
from dist_helpers import trace_training
from gnntrain.data import prepare_job_data
from gnntrain.launch import launch
from gnntrain.models import build_model
from gnntrain.train import WorkerContext

EPOCHS = 4
RTOL = 1e-5


def assert_close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    """Equal to ``RTOL`` relative, elementwise, with elements near zero compared against
    ``RTOL`` x the tensor's largest magnitude (float32 sums in another order, amplified by
    Adam's sign-like first steps, move near-zero entries by ~1e-6 absolute)."""
    atol = RTOL * float(expected.abs().max())
    torch.testing.assert_close(actual, expected, rtol=RTOL, atol=atol, msg=lambda m: f"{what}: {m}")


def _cfg(dataset: str, model: str, world: int, tmp_path) -> dict:
    overrides = [f"dataset={dataset}", f"model={model}", "model.dropout=0", "model.hidden=16",
                 f"cluster.world_size={world}", f"train.epochs={EPOCHS}", "seed=7"]
    if model == "gcnii":
        overrides += ["model.layers=32"]
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
@pytest.mark.parametrize("model", ["gcn", "sage", "gat", "gcnii"])
@pytest.mark.parametrize("world", [2, 4])
def test_distributed_equals_single_process(dataset: str, model: str, world: int, tmp_path) -> None:
    cfg = _cfg(dataset, model, world, tmp_path)
    reference = _single_process(cfg)
    launch(cfg, trace_training)
    num_nodes = reference["out"][0].shape[0]
    dist_run = _assemble(tmp_path, world, num_nodes)

    torch.testing.assert_close(torch.tensor(dist_run["loss"]), torch.tensor(reference["loss"]), rtol=RTOL, atol=0)
    for epoch in range(EPOCHS):
        assert_close(dist_run["out"][epoch], reference["out"][epoch], f"outputs, epoch {epoch + 1}")
        for name, grad in reference["grads"][epoch].items():
            assert_close(dist_run["grads"][epoch][name], grad, f"gradient of {name}, epoch {epoch + 1}")
    assert reference["loss"][-1] < reference["loss"][0], "training should reduce the loss"
    _assert_analytic_bytes(cfg, world, tmp_path)


def _assert_analytic_bytes(cfg: dict, world: int, tmp_path) -> None:
    """Per epoch: halo rows x each message-passing layer's input width x 4 bytes forward; the
    same backward for every layer whose input needs a gradient (all but the raw features of the
    first layer; GCNII's first convolution follows its input linear map, so it sends one too);
    and every rank's gradient payload. GAT moves its layer input once, not once per head."""
    job = prepare_job_data(cfg, world)
    model = build_model(cfg["model"], job.data.num_features, job.data.num_classes)
    halo_rows = sum(job.stats["boundary_nodes"])
    widths = model.input_widths
    grad_widths = widths if cfg["model"]["name"] == "gcnii" else widths[1:]
    expected = {
        "halo_fwd": EPOCHS * halo_rows * sum(widths) * 4,
        "halo_bwd": EPOCHS * halo_rows * sum(grad_widths) * 4,
        "allreduce": EPOCHS * world * sum(p.numel() for p in model.parameters()) * 4,
    }
    measured: dict[str, int] = {}
    for rank in range(world):
        for kind, count in torch.load(tmp_path / f"rank{rank}.pt")["bytes"].items():
            measured[kind] = measured.get(kind, 0) + count
    assert {k: v for k, v in measured.items() if not k.startswith("eval_")} == expected
