"""AdaQP: exact byte counts of quantized halos, 32-bit messages equal vanilla (also with the
central/marginal overlap), adaptive assignment agreed by both ends of every message, and
quantized stale halos under PipeGCN."""

from __future__ import annotations

import pytest
import torch

from conftest import make_run
from dist_helpers import job_bytes, save_variance_coefficients, trace_job
from gnntrain.comm.quantize import record_bytes
from gnntrain.data.job import prepare_job_data
from gnntrain.data.local_graph import build_local_graph
from gnntrain.models.gcn import GCNLayer
from gnntrain.models.gcnii import GCNIILayer
from gnntrain.models.sage import SAGELayer

EPOCHS = 3
COMMON = ("model=gcn", "model.layers=2", "model.hidden=16", "model.dropout=0", "cluster.world_size=2",
          f"train.epochs={EPOCHS}", "dataset.num_nodes=1200", "dataset.num_features=32", "seed=4")
WIDTHS = [32, 16]  # layer inputs: features, hidden


def _expected_halo_bytes(traces: list[dict], bits: int) -> dict[str, int]:
    """Every rank's halo rows arrive once per layer (forward) and their gradients go back for
    every layer but the first (the input features need none)."""
    rows = sum(t["boundary"] for t in traces)
    return {"halo_fwd": EPOCHS * rows * sum(record_bytes(d, bits) for d in WIDTHS),
            "halo_bwd": EPOCHS * rows * sum(record_bytes(d, bits) for d in WIDTHS[1:])}


@pytest.mark.slow
@pytest.mark.parametrize("bits,ratio", [(2, 1 / 16), (8, 1 / 4)])
def test_fixed_width_halo_bytes_are_exact(bits: int, ratio: float, tmp_path) -> None:
    vanilla = trace_job(tmp_path, "vanilla", *COMMON, "strategy=vanilla")
    quantized = trace_job(tmp_path, f"q{bits}", *COMMON, "strategy=adaqp", "strategy.assign=fixed",
                          f"strategy.bits={bits}")
    assert {k: job_bytes(vanilla, k) for k in ("halo_fwd", "halo_bwd")} == _expected_halo_bytes(vanilla, 32)
    expected = _expected_halo_bytes(quantized, bits)
    for kind, count in expected.items():
        assert job_bytes(quantized, kind) == count
        metadata = count - job_bytes(vanilla, kind) * ratio  # codes are `ratio` of float32; plus 4 bytes per row
        assert 0 < metadata <= 4 * EPOCHS * sum(t["boundary"] for t in quantized) * len(WIDTHS)


def test_full_width_messages_equal_vanilla(tmp_path) -> None:
    vanilla = trace_job(tmp_path, "vanilla", *COMMON, "strategy=vanilla")
    full = trace_job(tmp_path, "full", *COMMON, "strategy=adaqp", "strategy.assign=fixed", "strategy.bits=32")
    assert full[0]["loss"] == vanilla[0]["loss"]
    for f, v in zip(full, vanilla):
        assert {k: b for k, b in f["bytes"].items()} == v["bytes"]
        for epoch in range(EPOCHS):
            for name, grad in v["grads"][epoch].items():
                assert torch.equal(f["grads"][epoch][name], grad)


@pytest.mark.slow
@pytest.mark.parametrize("model", [("model=gcn", "model.dropout=0.5"),
                                   ("model=deepgcn", "model.layers=3", "model.norm=batch"),
                                   ("model=gat", "model.heads=2")], ids=["gcn", "deepgcn", "gat"])
def test_overlap_equals_vanilla(model: tuple[str, ...], tmp_path) -> None:
    """Computing the central rows while the halo is in flight changes the order of work, not the
    math: with 32-bit messages the losses, training outputs, gradients and bytes are vanilla's
    (dropout on: the masks are drawn in the same order; cross-rank batch norm in the update step)."""
    common = (*COMMON, *model, "cluster.world_size=3")
    vanilla = trace_job(tmp_path, "vanilla", *common, "strategy=vanilla")
    overlap = trace_job(tmp_path, "overlap", *common, "strategy=adaqp", "strategy.assign=fixed", "strategy.bits=32",
                        "strategy.overlap=true")
    torch.testing.assert_close(overlap[0]["loss"], vanilla[0]["loss"], rtol=1e-6, atol=0)
    for o, v in zip(overlap, vanilla):
        assert o["bytes"] == v["bytes"]
        torch.testing.assert_close(o["train_out"], v["train_out"], rtol=1e-5, atol=1e-6)
        for epoch in range(EPOCHS):
            torch.testing.assert_close(o["grads"][epoch], v["grads"][epoch], rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_adaptive_assignment_runs_and_both_ends_agree(tmp_path) -> None:
    """Reassigning after epoch 2 (period 2): widths come from {2, 4, 8}; a disagreement between the two
    ends of a message would garble the byte layout (shape errors or wrong rows). Bytes lie
    between the all-2-bit and all-8-bit counts."""
    traces = trace_job(tmp_path, "adaptive", *COMMON[:-1], "seed=4", "cluster.world_size=3", "strategy=adaqp",
                       "strategy.period=2", "strategy.group_size=20", "strategy.lambda_=0.2")
    metrics = traces[0]["epoch_metrics"]
    assert metrics[0]["assign_time"] == metrics[1]["assign_time"] == 0 < metrics[2]["assign_time"]
    assert 0 < metrics[2]["solve_time"] <= metrics[2]["assign_time"]
    assert all(2 <= m["mean_bits"] <= 8 for m in metrics)
    low, high = _expected_halo_bytes(traces, 2), _expected_halo_bytes(traces, 8)
    for kind in low:
        assert low[kind] <= job_bytes(traces, kind) <= high[kind]
    assert job_bytes(traces, "assign") > 0
    assert all(torch.isfinite(torch.tensor(t["loss"])).all() for t in traces)


def test_uniform_widths_average_to_the_mean_of_2_4_8_and_are_drawn_every_epoch(tmp_path) -> None:
    traces = trace_job(tmp_path, "uniform", *COMMON, "strategy=adaqp", "strategy.assign=uniform")
    means = [m["mean_bits"] for m in traces[0]["epoch_metrics"]]
    assert means[-1] == pytest.approx(14 / 3, rel=0.08)
    assert len(set(means)) == EPOCHS


@pytest.mark.slow
def test_pipegcn_with_quantized_stale_halos(tmp_path) -> None:
    """PipeGCN's stale exchange through AdaQP's codec: the same bytes as AdaQP at that width."""
    adaqp = trace_job(tmp_path, "adaqp", *COMMON, "strategy=adaqp", "strategy.assign=fixed", "strategy.bits=4")
    pipe = trace_job(tmp_path, "pipe", *COMMON, "strategy=pipegcn", "strategy.bits=4")
    for kind in ("halo_fwd", "halo_bwd"):
        assert job_bytes(pipe, kind) == job_bytes(adaqp, kind) == _expected_halo_bytes(adaqp, 4)[kind]
    assert all(torch.isfinite(torch.tensor(t["loss"])).all() for t in pipe)


@pytest.mark.parametrize("kind", ["gcn", "sage", "gcnii"])
def test_variance_coefficients_are_the_layers_own_squared_weights(kind: str) -> None:
    """``c_k`` of Eq. 11 for a halo row: its squared aggregation weights summed over this
    rank's targets, from the global graph's degrees (GCN: symmetric with self-loops; SAGE: the
    mean; GCNII: (1 - alpha) x GCN's)."""
    data = prepare_job_data(make_run("dataset.num_nodes=600"), 1).data
    part = torch.randint(0, 3, (data.num_nodes,), generator=torch.Generator().manual_seed(0))
    graph = build_local_graph(data, part, 1, 3)
    layer = {"gcn": GCNLayer(8, 8), "sage": SAGELayer(8, 8), "gcnii": GCNIILayer(8, 0.1, 0.5, 1)}[kind]
    src, dst = data.edge_index
    degree = torch.bincount(dst, minlength=data.num_nodes).double()
    weight = 1.0 / degree[dst] if kind == "sage" else ((degree[src] + 1) * (degree[dst] + 1)).rsqrt()
    if kind == "gcnii":
        weight = 0.9 * weight
    into_rank = part[dst] == 1
    expected = torch.zeros(data.num_nodes, dtype=torch.float64).index_add_(0, src[into_rank], weight[into_rank] ** 2)
    halo = graph.global_ids[graph.num_inner:]
    torch.testing.assert_close(layer.squared_weight_sums(graph)[graph.num_inner:].double(), expected[halo], rtol=1e-5,
                               atol=0)


def test_a_gradient_message_gets_the_coefficient_its_row_had_forward(tmp_path) -> None:
    """Eq. 23/27: the gradient of halo row ``k`` sent back to ``k``'s owner carries the ``c_k``
    the halo holder computed for ``k`` in the forward direction, for every layer and pair."""
    traces = trace_job(tmp_path, "coefficients", *COMMON, "cluster.world_size=3", "strategy=adaqp",
                       worker=save_variance_coefficients)
    assert len(traces) == 3
    for owner, t in enumerate(traces):
        sent_to = t["sent"].split(t["send_splits"])
        for holder, h in enumerate(traces):
            if holder == owner or not t["send_splits"][holder]:
                continue
            held_from = h["halo"].split(h["recv_splits"])[owner]
            assert torch.equal(sent_to[holder], held_from)
            for (layer, direction), backward in t["coefficients"].items():
                if direction == "bwd":
                    forward = h["coefficients"][layer, "fwd"].split(h["recv_splits"])[owner]
                    assert torch.equal(backward.split(t["send_splits"])[holder], forward)
                    assert forward.abs().sum() > 0
