"""PipeGCN: equal to vanilla once the weights stop changing, halos exactly one epoch stale
(forward and backward), smoothing as a moving average, the same bytes as vanilla."""

from __future__ import annotations

import json

import pytest
import torch

from dist_helpers import trace_job, trace_pipeline, trace_training
from test_cli import GNNTRAIN, SMALL, run

EPOCHS = 6


def _traces(strategy: str, world: int, tmp_path, *extra: str, worker=trace_training) -> list[dict]:
    """Every rank's trace of a job of ``strategy`` under ``worker``, written to ``tmp_path/strategy``."""
    return trace_job(tmp_path, strategy, f"strategy={strategy}", "model=sage", "model.layers=2", "model.hidden=16",
                     "model.dropout=0", f"cluster.world_size={world}", f"train.epochs={EPOCHS}",
                     "dataset.num_nodes=1200", "seed=3", *extra, worker=worker)


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_equals_vanilla_once_weights_stop_changing(world: int, tmp_path) -> None:
    """lr = 0: a 2-layer model's stale halos are fresh from epoch 3 on (epoch 1 uses zeros,
    epoch 2 the layer-2 inputs computed from epoch 1's zero halos), so its training loss and
    training outputs equal vanilla's; the boundary gradients lag one more layer's worth, so the
    parameter gradients agree from epoch 5 on. Bytes are vanilla's in every epoch."""
    vanilla, pipe = (_traces(strategy, world, tmp_path, "train.lr=0") for strategy in ("vanilla", "pipegcn"))
    assert pipe[0]["loss"][0] != pytest.approx(vanilla[0]["loss"][0], rel=1e-5), "epoch 1 must differ (zero halos)"
    torch.testing.assert_close(torch.tensor(pipe[0]["loss"][2:]), torch.tensor(vanilla[0]["loss"][2:]),
                               rtol=1e-5, atol=0)
    for p, v in zip(pipe, vanilla):
        for epoch in range(2, EPOCHS):
            torch.testing.assert_close(p["train_out"][epoch], v["train_out"][epoch], rtol=1e-5, atol=1e-5)
        for epoch in range(4, EPOCHS):
            for name, grad in v["grads"][epoch].items():
                torch.testing.assert_close(p["grads"][epoch][name], grad, rtol=1e-4, atol=1e-6)
        assert p["bytes"]["halo_fwd"] == v["bytes"]["halo_fwd"] and p["bytes"]["halo_bwd"] == v["bytes"]["halo_bwd"]


def _by_global_id(traces: list[dict], epoch: int, layer: int, key: str, num_nodes: int) -> torch.Tensor:
    """Rows every rank recorded under ``key`` (inner rows: layer inputs), placed by global id."""
    width = traces[0]["epochs"][epoch][layer][key].shape[1]
    out = torch.zeros(num_nodes, width)
    for t in traces:
        out[t["inner"]] = t["epochs"][epoch][layer][key]
    return out


def _halo_gradients_by_owner_row(traces: list[dict], epoch: int, layer: int, num_nodes: int) -> torch.Tensor:
    """Sum over ranks of the gradients of their halo rows, placed by global id (what the owners
    receive and add to their boundary rows)."""
    width = traces[0]["epochs"][epoch][layer]["grad_halo"].shape[1]
    out = torch.zeros(num_nodes, width)
    for t in traces:
        out.index_add_(0, t["halo"], t["epochs"][epoch][layer]["grad_halo"])
    return out


def _ema(previous: torch.Tensor | None, fresh: torch.Tensor, smooth: str, gamma: float, start: str) -> torch.Tensor:
    """The paper's smoothing, started at zero or at the first received value; ``fresh`` when not
    smoothing."""
    if smooth == "none":
        return fresh
    if previous is None:
        previous = torch.zeros_like(fresh) if start == "zero" else fresh
    return gamma * previous + (1 - gamma) * fresh


@pytest.mark.slow
@pytest.mark.parametrize("smooth, start", [("none", "zero"), ("gf", "zero"), ("gf", "first")])
def test_halos_are_exactly_one_epoch_stale(smooth: str, start: str, tmp_path) -> None:
    """With the weights changing every epoch: the halo rows layer l uses in epoch t are the rows
    their owners computed in epoch t-1, and the boundary-row gradient a rank applies in epoch t
    is what its peers computed in epoch t-1 (with smoothing: the moving average of those, from
    zero as the authors' code or from the first value)."""
    world, gamma = 3, 0.9
    traces = _traces("pipegcn", world, tmp_path, "train.lr=0.05", f"strategy.smooth={smooth}",
                     f"strategy.gamma={gamma}", f"strategy.smooth_start={start}", worker=trace_pipeline)
    n = 1200
    for layer in (0, 1):
        for t in traces:
            assert t["epochs"][0][layer]["used"].abs().max() == 0, "epoch 1 uses zero halos"
        expected_used = {t["rank"]: None for t in traces}
        expected_grad = {t["rank"]: None for t in traces}
        for epoch in range(1, EPOCHS):
            inputs = _by_global_id(traces, epoch - 1, layer, "input", n)
            for t in traces:
                expected_used[t["rank"]] = _ema(expected_used[t["rank"]], inputs[t["halo"]], smooth, gamma, start)
                torch.testing.assert_close(t["epochs"][epoch][layer]["used"], expected_used[t["rank"]],
                                           rtol=1e-5, atol=1e-6)
            if layer == 0:
                continue  # the input features need no gradient
            grads = _halo_gradients_by_owner_row(traces, epoch - 1, layer, n)
            for t in traces:
                expected_grad[t["rank"]] = _ema(expected_grad[t["rank"]], grads[t["inner"]], smooth, gamma, start)
                torch.testing.assert_close(t["epochs"][epoch][layer]["grad_from_peers"], expected_grad[t["rank"]],
                                           rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_staleness_error_is_logged(tmp_path) -> None:
    run_dir = tmp_path / "run"
    res = run([GNNTRAIN, "strategy=pipegcn", "strategy.track_staleness_error=true", "train.epochs=4", *SMALL,
               f"hydra.run.dir={run_dir}"], tmp_path)
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    errors = records[-1]["strategy_metrics"]
    assert {"staleness_error/features/layer0", "staleness_error/features/layer1",
            "staleness_error/gradients/layer1"} <= errors.keys()
    assert errors["staleness_error/features/layer0"] == 0  # the input features never change
    assert errors["staleness_error/features/layer1"] > 0
    assert all(r["comm_bytes"] == sum(v for k, v in r["comm_bytes_by_kind"].items() if not k.startswith("diag_"))
               for r in records)
