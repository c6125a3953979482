"""Our layers on a single-part local graph agree with PyG's reference layers given the same
weights; and a multi-part local graph reproduces the full-graph rows it owns."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.nn import FiLMConv, GATConv, GCN2Conv, GCNConv, GENConv, SAGEConv
from torch_geometric.utils import add_self_loops, remove_self_loops

from conftest import make_run, model_config, needs_real_data
from gnntrain.rng import keyed
from gnntrain.data.job import prepare_job_data
from gnntrain.data.local_graph import build_local_graph
from gnntrain.strategies.graph_parallel.overlap import central_marginal
from gnntrain.models import MODELS, build_model
from gnntrain.data.sparse import SparsePattern, weighted_sum
from gnntrain.models.deepgcn import GENLayer
from gnntrain.models.edge_ops import edge_softmax
from gnntrain.models.film import FiLMLayer
from gnntrain.models.gat import GATLayer
from gnntrain.models.gcn import GCNLayer
from gnntrain.models.gcnii import GCNIILayer
from gnntrain.models.norm import BatchNorm
from gnntrain.models.sage import SAGELayer
from gnntrain.rng.random16 import dropout_mask


def _graph(dataset: str, directed: bool = False):
    overrides = [f"dataset={dataset}"]
    if dataset == "synthetic":
        overrides += ["dataset.num_nodes=800"]
    if directed:
        overrides += ["dataset.to_undirected=false"]
    data = prepare_job_data(make_run(*overrides), 1).data
    return data, build_local_graph(data, torch.zeros(data.num_nodes, dtype=torch.long), 0, 1)


def _pyg_pair(kind: str, in_dim: int, out_dim: int):
    torch.manual_seed(0)
    if kind == "gcn":
        ours, ref = GCNLayer(in_dim, out_dim), GCNConv(in_dim, out_dim)
        with torch.no_grad():
            ref.lin.weight.copy_(ours.lin.weight)
            ref.bias.copy_(torch.randn(out_dim))
            ours.bias.copy_(ref.bias)
    else:
        ours, ref = SAGELayer(in_dim, out_dim), SAGEConv(in_dim, out_dim, aggr="mean")
        with torch.no_grad():
            ref.lin_l.weight.copy_(ours.lin_l.weight)
            ref.lin_l.bias.copy_(ours.lin_l.bias)
            ref.lin_r.weight.copy_(ours.lin_r.weight)
    return ours, ref


@pytest.mark.parametrize("kind", ["gcn", "sage"])
@pytest.mark.parametrize("dataset", ["synthetic", pytest.param("cora", marks=needs_real_data)])
@pytest.mark.parametrize("out_dim", [8, 2048])  # narrowing and widening evaluation orders
def test_layer_matches_pyg(kind: str, dataset: str, out_dim: int) -> None:
    data, graph = _graph(dataset)
    ours, ref = _pyg_pair(kind, data.num_features, out_dim)
    x = data.x.clone().requires_grad_(True)
    x_ref = data.x.clone().requires_grad_(True)
    out = ours(x, x.new_zeros(0, x.shape[1]), graph)
    out_ref = ref(x_ref, data.edge_index)
    torch.testing.assert_close(out, out_ref, rtol=1e-5, atol=1e-5)
    weight = torch.randn_like(out)
    (out * weight).sum().backward()
    (out_ref * weight).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-5)


@needs_real_data
@pytest.mark.parametrize("kind", ["gcn", "sage"])
def test_layer_matches_pyg_on_directed_graph(kind: str) -> None:
    """squirrel as shipped is directed: in-degree normalisation must match PyG's too."""
    data, graph = _graph("squirrel", directed=True)
    ours, ref = _pyg_pair(kind, data.num_features, 8)
    with torch.no_grad():
        torch.testing.assert_close(ours(data.x, data.x.new_zeros(0, data.num_features), graph),
                                   ref(data.x, data.edge_index), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["gcn", "sage"])
def test_local_graph_with_halo_rows_reproduces_full_graph(kind: str) -> None:
    data, full = _graph("synthetic")
    layer, _ = _pyg_pair(kind, data.num_features, 8)
    with torch.no_grad():
        expected = layer(data.x, data.x.new_zeros(0, data.num_features), full)
        part = torch.randint(0, 3, (data.num_nodes,), generator=torch.Generator().manual_seed(0))
        for rank in range(3):
            g = build_local_graph(data, part, rank, 3)
            out = layer(data.x[g.global_ids[: g.num_inner]], data.x[g.global_ids[g.num_inner:]], g)
            torch.testing.assert_close(out, expected[g.global_ids[: g.num_inner]], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("heads,concat", [(3, True), (1, False), (4, False)])
@pytest.mark.parametrize("dataset", ["synthetic", pytest.param("cora", marks=needs_real_data)])
def test_gat_layer_matches_pyg(heads: int, concat: bool, dataset: str) -> None:
    data, graph = _graph(dataset)
    torch.manual_seed(0)
    ours, ref = GATLayer(data.num_features, 6, heads, concat), GATConv(data.num_features, 6, heads, concat)
    ref.load_state_dict(ours.state_dict())
    with torch.no_grad():
        ours.bias.normal_()
        ref.bias.copy_(ours.bias)
    x = data.x.clone().requires_grad_(True)
    x_ref = data.x.clone().requires_grad_(True)
    out, out_ref = ours(x, x.new_zeros(0, x.shape[1]), graph), ref(x_ref, data.edge_index)
    torch.testing.assert_close(out, out_ref, rtol=1e-5, atol=1e-5)
    weight = torch.randn_like(out)
    (out * weight).sum().backward()
    (out_ref * weight).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("heads,out_dim,concat", [(8, 8, True), (1, 6, False)])
def test_gat_layer_draws_pyg_s_initial_parameters(heads: int, out_dim: int, concat: bool) -> None:
    """Under one seed our layer starts where PyG's ``GATConv`` does: same draws, same bounds
    (the attention vectors' included, which torch's Glorot bounds differently)."""
    torch.manual_seed(0)
    ours = GATLayer(50, out_dim, heads, concat)
    torch.manual_seed(0)
    ref = GATConv(50, out_dim, heads, concat)
    for name, value in ref.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=1e-6, atol=1e-7, msg=name)


@pytest.mark.parametrize("heads,concat", [(3, True), (2, False)])
def test_gat_attention_dropout_matches_pyg_given_the_same_mask(heads: int, concat: bool, monkeypatch) -> None:
    """In training, our attention dropout is PyG's ``GATConv(dropout=0.6)`` with its draw replaced
    by our keyed mask: each edge's (source, target) pair and head keep the same coefficient in
    both, scaled alike; outputs and input gradients agree."""
    data, graph = _graph("synthetic")
    torch.manual_seed(0)
    ours = GATLayer(data.num_features, 6, heads, concat, att_dropout=0.6)
    ref = GATConv(data.num_features, 6, heads, concat, dropout=0.6)
    ref.load_state_dict(ours.state_dict())
    ours.edge_key = 12345
    src, dst = add_self_loops(remove_self_loops(data.edge_index)[0], num_nodes=data.num_nodes)[0]
    keep, scale = dropout_mask(0.6, ours.edge_key, keyed.pair_ids(src, dst), heads)
    assert 0.35 < keep.float().mean() < 0.45
    pyg_dropout = torch.nn.functional.dropout

    def same_mask(alpha: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
        assert alpha.shape == keep.shape and p == 0.6 and training
        return alpha * keep * scale

    x = data.x.clone().requires_grad_(True)
    x_ref = data.x.clone().requires_grad_(True)
    out = ours(x, x.new_zeros(0, x.shape[1]), graph)
    monkeypatch.setattr(torch.nn.functional, "dropout", same_mask)
    out_ref = ref(x_ref, data.edge_index)
    monkeypatch.setattr(torch.nn.functional, "dropout", pyg_dropout)
    torch.testing.assert_close(out, out_ref, rtol=1e-5, atol=1e-5)
    weight = torch.randn_like(out)
    (out * weight).sum().backward()
    (out_ref * weight).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-5)
    ours.eval()
    ref.eval()
    with torch.no_grad():
        torch.testing.assert_close(ours(data.x, data.x[:0], graph), ref(data.x, data.edge_index), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layer", [1, 7, 32])
def test_gcnii_layer_matches_pyg(layer: int) -> None:
    data, graph = _graph("synthetic")
    torch.manual_seed(0)
    width = 24
    h = torch.randn(data.num_nodes, width)
    h0 = torch.randn(data.num_nodes, width)
    ours, ref = GCNIILayer(width, alpha=0.1, theta=0.5, layer=layer), GCN2Conv(width, alpha=0.1, theta=0.5, layer=layer)
    ref.load_state_dict(ours.state_dict())
    assert ours.beta == pytest.approx(ref.beta)
    torch.testing.assert_close(ours(h, h.new_zeros(0, width), graph, h0), ref(h, h0, data.edge_index),
                               rtol=1e-5, atol=1e-5)


def _compare_forward_backward(ours, ref, inputs: list[torch.Tensor], edge_index: torch.Tensor,
                               rtol: float = 1e-5) -> None:
    """Same outputs and same input gradients; ``ours(*inputs, graph)`` vs ``ref(*inputs, edge_index)``."""
    mine = [t.clone().requires_grad_(True) for t in inputs]
    theirs = [t.clone().requires_grad_(True) for t in inputs]
    out, out_ref = ours(*mine), ref(*theirs, edge_index)
    torch.testing.assert_close(out, out_ref, rtol=rtol, atol=1e-5)
    weight = torch.randn_like(out)
    (out * weight).sum().backward()
    (out_ref * weight).sum().backward()
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("norm", ["layer", "batch", "none"])
@pytest.mark.parametrize("learn_t", [True, False])
@pytest.mark.parametrize("dataset", ["synthetic", pytest.param("cora", marks=needs_real_data)])
def test_gen_layer_matches_pyg(norm: str, learn_t: bool, dataset: str) -> None:
    """GENConv with softmax aggregation (training mode, so batch norm uses batch statistics).
    PyG's MLP puts a zero-rate Dropout after the ReLU and no module for a missing norm, so its
    last linear map is ``mlp.4`` with a norm and ``mlp.3`` without; ours is always ``mlp.3``."""
    data, graph = _graph(dataset)
    torch.manual_seed(0)
    width = 12
    ours = GENLayer(width, t=0.7, learn_t=learn_t, norm=norm)
    ref = GENConv(width, width, aggr="softmax", t=0.7, learn_t=learn_t, norm=None if norm == "none" else norm)
    last = "mlp.3." if norm == "none" else "mlp.4."
    state = {k.replace("mlp.3.", last): v for k, v in ours.state_dict().items()}
    if learn_t:
        state["aggr_module.t"] = state.pop("t")
    ref.load_state_dict(state)
    h = torch.randn(data.num_nodes, width)
    _compare_forward_backward(lambda h: ours(h, h.new_zeros(0, width), graph), ref, [h], data.edge_index)
    if learn_t:
        torch.testing.assert_close(ours.t.grad, ref.aggr_module.t.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("act", [True, False])
@pytest.mark.parametrize("dataset", ["synthetic", pytest.param("cora", marks=needs_real_data)])
def test_film_layer_matches_pyg(act: bool, dataset: str) -> None:
    data, graph = _graph(dataset)
    torch.manual_seed(0)
    ours = FiLMLayer(data.num_features, 10, act=act)
    ref = FiLMConv(data.num_features, 10, act=torch.nn.ReLU() if act else None)
    ref.load_state_dict({k.replace("film.", "films.0.").replace("lin.", "lins.0.")
                         if not k.endswith("skip.weight") else k: v for k, v in ours.state_dict().items()})
    _compare_forward_backward(lambda x: ours(x, x.new_zeros(0, x.shape[1]), graph), ref, [data.x],
                              data.edge_index)


def test_batch_norm_matches_torch() -> None:
    """Training mode: batch statistics, gradients and the running estimates; then evaluation
    mode with those estimates."""
    torch.manual_seed(0)
    ours, ref = BatchNorm(6), torch.nn.BatchNorm1d(6)
    with torch.no_grad():
        ours.weight.normal_()
        ours.bias.normal_()
    ref.load_state_dict(ours.state_dict())
    for _ in range(3):
        h = torch.randn(50, 6) * 3 + 1
        _compare_forward_backward(lambda h: ours(h), lambda h, _: ref(h), [h], torch.empty(0))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(ours, name), getattr(ref, name))
    ours.eval(), ref.eval()
    h = torch.randn(20, 6)
    torch.testing.assert_close(ours(h), ref(h))


class _RecordedHalo:
    """Halo rows cut from recorded full-graph layer inputs."""

    def __init__(self, inputs: list[torch.Tensor], halo_ids: torch.Tensor) -> None:
        self.inputs, self.halo_ids = inputs, halo_ids

    def __call__(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        return self.inputs[layer][self.halo_ids]


class _RecordedSplitHalo(_RecordedHalo):
    """The same rows through the overlapping interface: central rows are computed first."""

    def start(self, h: torch.Tensor, layer: int):
        return lambda: self(h, layer)


@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.parametrize("halo_source", [_RecordedHalo, _RecordedSplitHalo])
def test_local_graph_with_halo_rows_reproduces_full_graph_rows(kind: str, halo_source: type) -> None:
    """A local graph with its halo rows gives the full-graph rows it owns (GAT: softmax over the
    whole in-neighbourhood; GCNII: initial residual from the rank's own rows; DeepGCN: softmax
    aggregation and res+ blocks; FiLM: target-side modulation of halo-sourced messages), also
    when the central and the marginal rows are computed apart."""
    data, full = _graph("synthetic")
    config = model_config(kind, hidden=16, layers=3, dropout=0.0, norm="layer", heads=4, out_heads=2, att_dropout=0.0,
                          alpha=0.1, theta=0.5, t=0.5, learn_t=True)
    torch.manual_seed(0)
    model = build_model(config, data.num_features, 5)
    with torch.no_grad():
        # reference: every layer input over the whole graph, recorded by a pass-through halo
        inputs = []
        expected = model(data.x, full, lambda h, i: inputs.append(h) or h.new_zeros(0, h.shape[1]))
        part = torch.randint(0, 3, (data.num_nodes,), generator=torch.Generator().manual_seed(0))
        for rank in range(3):
            g = build_local_graph(data, part, rank, 3)
            inner, halo_ids = g.global_ids[: g.num_inner], g.global_ids[g.num_inner:]
            central, marginal, _ = central_marginal(g)
            assert central.num_targets > 0 and marginal.num_targets > 0
            out = model(data.x[inner], g, halo_source(inputs, halo_ids))
            torch.testing.assert_close(out, expected[inner], rtol=1e-5, atol=1e-5)


def test_deepgcn_matches_pyg_res_plus_stack() -> None:
    """Our DeepGCN equals the same stack built from PyG's ``DeepGCNLayer(block="res+")`` around
    ``GENConv`` (the ogbn-proteins example's forward: first layer's conv alone, res+ blocks,
    then the first layer's norm and activation before the output map)."""
    from torch_geometric.nn import DeepGCNLayer

    data, graph = _graph("synthetic")
    torch.manual_seed(0)
    config = model_config("deepgcn", hidden=12, layers=4, dropout=0.0, norm="layer", t=0.5, learn_t=True)
    ours = build_model(config, data.num_features, 5)
    lin_in, lin_out = torch.nn.Linear(data.num_features, 12), torch.nn.Linear(12, 5)
    blocks = torch.nn.ModuleList(
        DeepGCNLayer(GENConv(12, 12, aggr="softmax", t=0.5, learn_t=True, norm="layer"), torch.nn.LayerNorm(12),
                     torch.nn.ReLU(), block="res+", dropout=0.0) for _ in range(4))
    state = {}
    for key, value in ours.state_dict().items():
        group, _, rest = key.partition(".")
        index, _, name = rest.partition(".")
        if group == "convs":
            name = "aggr_module.t" if name == "t" else name.replace("mlp.3.", "mlp.4.")
            key = f"blocks.{index}.conv.{name}"
        elif group == "norms":
            key = f"blocks.{index}.norm.{name}"
        state[key] = value
    reference = torch.nn.ModuleDict({"lin_in": lin_in, "lin_out": lin_out, "blocks": blocks})
    reference.load_state_dict(state)

    def pyg_forward(x):
        h = blocks[0].conv(lin_in(x), data.edge_index)
        for block in blocks[1:]:
            h = block(h, data.edge_index)
        return lin_out(blocks[0].act(blocks[0].norm(h)))

    no_halo = lambda h, i: h.new_zeros(0, h.shape[1])  # noqa: E731
    _compare_forward_backward(lambda x: ours(x, graph, no_halo), lambda x, _: pyg_forward(x), [data.x], data.edge_index)


def test_weighted_sum_matches_dense_and_passes_gradcheck() -> None:
    """The per-channel sparse product behind GAT: equal to the dense ``A_k @ X_k`` and its
    gradients (weights and inputs) equal to the numerical ones, with an empty row and column."""
    g = torch.Generator().manual_seed(0)
    row = torch.tensor([0, 0, 2, 2, 2, 3])
    col = torch.tensor([1, 4, 0, 1, 3, 3])
    pattern = SparsePattern(row, col, (5, 6))
    weights = torch.rand(6, 2, generator=g, dtype=torch.float64, requires_grad=True)
    x = torch.randn(6, 2, 3, generator=g, dtype=torch.float64, requires_grad=True)
    dense = torch.zeros(2, 5, 6, dtype=torch.float64)
    dense[:, row, col] = weights.detach().t()
    torch.testing.assert_close(weighted_sum(pattern, weights, x), torch.einsum("kij,jkc->ikc", dense, x.detach()))
    assert torch.autograd.gradcheck(lambda w, h: weighted_sum(pattern, w, h), (weights, x))


@pytest.mark.parametrize("negative_slope", [None, 0.2])
def test_edge_softmax_matches_grouped_softmax_and_passes_gradcheck(negative_slope: float | None) -> None:
    """The softmax over each target's edges (GAT's attention, with its LeakyReLU; DeepGCN's
    softmax aggregation) equals ``torch.softmax`` per group, and its hand-written backward,
    which keeps only the coefficients (and the scores' signs), equals the numerical gradient;
    target 2 has no edge."""
    g = torch.Generator().manual_seed(0)
    dst = torch.tensor([0, 3, 0, 1, 3, 3, 1])
    scores = torch.randn(7, 2, generator=g, dtype=torch.float64, requires_grad=True)
    alpha = edge_softmax(scores, dst, 4, negative_slope)
    s = scores.detach() if negative_slope is None else torch.nn.functional.leaky_relu(scores.detach(), negative_slope)
    for target in range(4):
        group = dst == target
        torch.testing.assert_close(alpha[group], torch.softmax(s[group], dim=0))
    assert torch.autograd.gradcheck(lambda t: edge_softmax(t, dst, 4, negative_slope), (scores,))
