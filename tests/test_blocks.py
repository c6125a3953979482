"""Models as block sequences: every model's blocks, run in two slices that pass on only ``h``
and the extra state the later blocks declare they carry, give the model's output (what a
pipeline stage relies on); message-passing blocks keep their global layer index.

The check runs in float64 to 1e-12: the slices run the model's own ops on the same inputs, but
MKL's float32 GEMM may round differently with its buffers' alignment (CI saw a 1.3e-5 difference
once in float32), so bit-equality is not what the BLAS promises."""

from __future__ import annotations

import copy

import pytest
import torch

from conftest import make_run, model_config
from gnntrain.data.job import prepare_job_data
from gnntrain.data.local_graph import build_local_graph
from gnntrain.models import MODELS, build_model

NO_HALO = lambda h, layer: h.new_zeros(0, h.shape[1])  # noqa: E731


@pytest.mark.parametrize("name", sorted(MODELS))
def test_block_slices_with_their_carried_state_equal_the_model(name: str) -> None:
    data = prepare_job_data(make_run("dataset.num_nodes=300"), 1).data
    graph = build_local_graph(data, torch.zeros(data.num_nodes, dtype=torch.long), 0, 1, torch.float64)
    x = data.x.double()
    config = model_config(name, hidden=16, layers=4, dropout=0.0, norm="none" if name == "gcnii" else "layer", heads=2,
                          out_heads=1, att_dropout=0.0, alpha=0.1, theta=0.5, t=1.0, learn_t=True)
    torch.manual_seed(0)
    model = build_model(config, data.num_features, data.num_classes).double().eval()
    expected = model(x, graph, NO_HALO)
    blocks = model.blocks
    assert [b.layer for b in blocks if b.layer is not None] == list(range(4))
    assert {p for b in blocks for p in b.parameters()} == set(model.parameters())
    for cut in range(1, len(blocks)):
        h, extra = x, {}
        for block in blocks[:cut]:
            h, extra = block(h, extra, graph, NO_HALO)
        extra = {k: v for k, v in extra.items() if any(k in b.carries for b in blocks[cut:])}
        for block in blocks[cut:]:
            h, extra = block(h, extra, graph, NO_HALO)
        torch.testing.assert_close(h, expected, rtol=1e-12, atol=1e-12, msg=lambda m: f"cut after block {cut}: {m}")
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for p in twin.parameters():
            p.mul_(2)
    assert not torch.equal(twin(x, graph, NO_HALO), expected), "a copy runs its own modules"
