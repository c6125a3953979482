"""The mini-batch family: the keyed sampler and its blocks, models on projected inputs, the
exactness of HopGNN, P3 and Naive against the model-centric baseline, the bytes each strategy
moves, and the settings it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import make_run, needs_real_data
from dist_helpers import assert_gradients_close, trace_job, trace_minibatch
from gnntrain.rng import keyed
from gnntrain.job import api
from gnntrain.data.graph_data import GraphData
from gnntrain.data.job import prepare_job_data
from gnntrain.data.sampling import Topology, pack, sample_blocks, sample_groups, sampling_key
from gnntrain.errors import ConfigError
from gnntrain.data.local_graph import build_local_graph
from gnntrain.job.launch.prepare import prepare
from gnntrain.job.validation import job_layout
from gnntrain.models import MODELS as registered_models
from gnntrain.models import build_model
from gnntrain.models.gnn import no_halo
from gnntrain.models.projection import projection_width, split, stacked_weight
from gnntrain.strategies import METHODS, minibatch
from gnntrain.strategies.minibatch.data_centric import local_batches
from gnntrain.strategies.minibatch.hopgnn import chosen_merges, plan

MODELS = list(registered_models)
STRATEGIES = [name for name, method in METHODS.items() if method.family is minibatch.FAMILY]
SMALL = ("train.dtype=float64", "model.dropout=0.5", "dataset.num_nodes=600", "strategy.batch_size=300",
         "strategy.fanout=[3,5]", "model.layers=2")


def _model_and_graph(model: str, layers: int = 3):
    run = make_run(f"model={model}", f"model.layers={layers}", "model.dropout=0", "train.dtype=float64",
                   "dataset.num_nodes=300")
    job = prepare_job_data(run, 1)
    torch.manual_seed(0)
    net = build_model(run.model, job.data.num_features, job.data.num_classes).double().eval()
    return net, job.data


@pytest.mark.parametrize("model", MODELS)
def test_blocks_with_every_neighbour_compute_the_full_graph_model(model: str) -> None:
    net, data = _model_and_graph(model)
    graph = build_local_graph(data, torch.zeros(data.num_nodes, dtype=torch.long), 0, 1, torch.float64)
    roots = torch.tensor([5, 17, 100, 3])
    keys = [sampling_key(0, 1, 0, layer) for layer in range(3)]
    sampled = sample_blocks(Topology.of(data), roots, [10**6] * 3, keys, torch.float64)
    with torch.no_grad():
        full = net(graph.x, graph, no_halo)[roots]
        out = net.forward_blocks(data.x[sampled.nodes].double(), sampled.blocks)
    torch.testing.assert_close(out, full, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("model", MODELS)
def test_a_set_of_roots_computes_what_its_micrographs_compute(model: str) -> None:
    net, data = _model_and_graph(model)
    topology, roots = Topology.of(data), torch.tensor([5, 17, 100, 3, 250])
    keys = [sampling_key(7, 2, 4, layer) for layer in range(3)]
    together = sample_blocks(topology, roots, [3, 2, 4], keys, torch.float64)
    alone = [sample_blocks(topology, roots[i: i + 1], [3, 2, 4], keys, torch.float64) for i in range(roots.numel())]
    with torch.no_grad():
        out = net.forward_blocks(data.x[together.nodes].double(), together.blocks)
        separately = torch.cat([net.forward_blocks(data.x[s.nodes].double(), s.blocks) for s in alone])
    torch.testing.assert_close(out, separately, rtol=1e-12, atol=1e-12)
    assert set(torch.cat([s.nodes for s in alone]).tolist()) == set(together.nodes.tolist())


def test_groups_sampled_together_get_the_blocks_each_gets_alone() -> None:
    _, data = _model_and_graph("gcn")
    topology = Topology.of(data)
    groups = [torch.tensor([5, 17, 100]), torch.tensor([3, 250]), torch.tensor([], dtype=torch.long),
              torch.tensor([6, 18, 101, 4])]
    keys = [sampling_key(7, 2, 4, layer) for layer in range(3)]
    for group, grouped in zip(groups, sample_groups(topology, groups, [3, 2, 4], keys, torch.float64)):
        alone = sample_blocks(topology, group, [3, 2, 4], keys, torch.float64)
        assert torch.equal(grouped.nodes, alone.nodes) and grouped.hop_sizes == alone.hop_sizes
        for a, b in zip(grouped.blocks, alone.blocks):
            assert torch.equal(a.edge_src, b.edge_src) and torch.equal(a.edge_dst, b.edge_dst)
            assert torch.equal(a.edge_scale, b.edge_scale)


@pytest.mark.parametrize("model", MODELS)
def test_a_model_computes_the_same_from_the_projections_of_its_input(model: str) -> None:
    net, data = _model_and_graph(model)
    sampled = sample_blocks(Topology.of(data), torch.tensor([5, 17, 100, 3]), [3, 2, 4],
                            [sampling_key(0, 1, 0, layer) for layer in range(3)], torch.float64)
    x, maps = data.x[sampled.nodes].double(), net.input_maps
    with torch.no_grad():
        out = net.forward_blocks(x, sampled.blocks)
        projected = net.forward_blocks(split(maps, x @ stacked_weight(maps).t()), sampled.blocks)
    torch.testing.assert_close(projected, out, rtol=1e-12, atol=1e-12)


def test_sampling_is_keyed_by_iteration_and_layer_and_respects_the_fanout() -> None:
    _, data = _model_and_graph("gcn")
    topology = Topology.of(data)
    targets = torch.arange(data.num_nodes)
    src, dst = topology.sample(targets, 2, sampling_key(0, 1, 0, 0))
    again, _ = topology.sample(targets, 2, sampling_key(0, 1, 0, 0))
    other, _ = topology.sample(targets, 2, sampling_key(0, 1, 1, 0))
    assert torch.equal(src, again) and not torch.equal(src, other)
    kept = torch.bincount(dst, minlength=data.num_nodes)
    assert torch.equal(kept, topology.in_degree.clamp(max=2))
    graph_edges = set(zip(data.edge_index[0].tolist(), data.edge_index[1].tolist()))
    assert all((s, t) in graph_edges for s, t in zip(src.tolist(), targets[dst].tolist()))


def test_the_sampler_keeps_each_targets_fanout_edges_of_smallest_keyed_priority() -> None:
    """The sampler against its definition written plainly, target by target: the ``min(k, deg)``
    in-edges of smallest priority ``uniform(key, edge)``, in that order."""
    _, data = _model_and_graph("gcn")
    topology, key = Topology.of(data), sampling_key(3, 2, 1, 0)
    targets = torch.randperm(data.num_nodes, generator=torch.Generator().manual_seed(1))[:80]
    src, dst = topology.sample(targets, 3, key)
    for i, v in enumerate(targets.tolist()):
        edges = torch.arange(int(topology.indptr[v]), int(topology.indptr[v + 1]))
        kept = edges[torch.argsort(keyed.uniform(key, edges), stable=True)[:3]]
        assert torch.equal(src[dst == i], topology.indices[kept])


def test_a_targets_sample_is_a_uniform_subset_of_its_in_edges() -> None:
    """Fan-out 2 of 5 in-edges, 5000 targets: the 10 pairs of sources are equally likely
    (chi-square, 9 degrees of freedom, under its 0.1% quantile 27.88), as sampling without
    replacement draws them."""
    targets, degree, fanout = 5000, 5, 2
    dst = torch.arange(targets).repeat_interleave(degree)
    src = targets + torch.arange(degree).repeat(targets)
    n = targets + degree
    masks = [torch.ones(n, dtype=torch.bool) for _ in range(3)]
    data = GraphData("fans", torch.ones(n, 1), torch.zeros(n, dtype=torch.long), torch.stack([src, dst]), *masks, 2)
    picked, at = Topology.of(data).sample(torch.arange(targets), fanout, sampling_key(0, 1, 0, 0))
    assert torch.equal(torch.bincount(at), torch.full((targets,), fanout))
    pair = picked.view(targets, fanout).sort(1).values - targets
    counts = torch.bincount(pair[:, 0] * degree + pair[:, 1], minlength=degree * degree).double()
    counts = counts.view(degree, degree)[torch.triu(torch.ones(degree, degree, dtype=torch.bool), 1)]
    expected = targets / counts.numel()
    assert counts.numel() == 10 and float(((counts - expected) ** 2 / expected).sum()) < 27.88


@pytest.mark.parametrize("world", [2, 3, 4])
def test_merging_moves_roots_between_steps_of_the_same_model_only(world: int) -> None:
    generator = torch.Generator().manual_seed(world)
    owner = torch.randint(0, world, (500,), generator=generator)
    batch = list(torch.tensor_split(torch.randperm(500, generator=generator)[:200], world))
    for merges in range(world + 1):
        steps = plan(batch, owner, merges)
        assert len(steps) == max(world - merges, 1)
        assert len({s.offset for s in steps}) == len(steps)
        for d in range(world):
            trained = torch.cat([s.roots[d] for s in steps])
            assert sorted(trained.tolist()) == sorted(batch[d].tolist())
        if merges == 0:
            assert all(bool((owner[s.roots[d]] == (d + s.offset) % world).all()) for s in steps for d in range(world))


VARIANTS = {
    "minibatch": ("strategy=minibatch",),
    "hopgnn": ("strategy=hopgnn", "strategy.merge=false"),
    "hopgnn_no_pregather": ("strategy=hopgnn", "strategy.merge=false", "strategy.pregather=false"),
    "hopgnn_2_steps": ("strategy=hopgnn", "strategy.time_steps=2"),
    "hopgnn_2_steps_no_pregather": ("strategy=hopgnn", "strategy.time_steps=2", "strategy.pregather=false"),
    "hopgnn_1_step": ("strategy=hopgnn", "strategy.time_steps=1"),
    "lo": ("strategy=lo",),
    "p3": ("strategy=p3",),
    "naive": ("strategy=naive",),
}
"""The runs the equality tests compare with minibatch's; ``make test`` runs minibatch, hopgnn and
p3, ``make test-slow`` the others."""
FAST_VARIANTS = ("minibatch", "hopgnn", "p3")


class _Runs(dict):
    """Each variant's traces, run the first time a test asks for them."""

    def __init__(self, tmp: Path) -> None:
        super().__init__()
        self.tmp = tmp

    def __missing__(self, name: str) -> list[dict]:
        self[name] = trace_job(self.tmp, name, *VARIANTS[name], *SMALL, "cluster.world_size=3", "train.epochs=2",
                               worker=trace_minibatch)
        return self[name]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, list[dict]]:
    """Two epochs of a variant on 3 workers (float64, dropout 0.5: masks are keyed by the node and
    the iteration, so every way of spreading an iteration draws the same masks)."""
    return _Runs(tmp_path_factory.mktemp("minibatch"))


def _variants(*names: str) -> list:
    return [pytest.param(n, marks=[] if n in FAST_VARIANTS else pytest.mark.slow) for n in names]


HOPGNN_VARIANTS = ["hopgnn", "hopgnn_no_pregather", "hopgnn_2_steps", "hopgnn_2_steps_no_pregather", "hopgnn_1_step"]


@pytest.mark.parametrize("variant", _variants(*HOPGNN_VARIANTS))
def test_hopgnn_iterations_equal_the_model_centric_ones(runs, variant: str) -> None:
    reference, traces = runs["minibatch"], runs[variant]
    assert len(traces[0]["grads"]) == len(reference[0]["grads"]) == 4
    for step, (got, want) in enumerate(zip(traces[0]["grads"], reference[0]["grads"])):
        assert_gradients_close(got, want, 1e-9, f"{variant}, step {step}")
    assert traces[0]["loss"] == pytest.approx(reference[0]["loss"], rel=1e-12)
    for got, want in zip(traces[0]["counts"], reference[0]["counts"]):
        assert torch.equal(got, want)


def _split_weights(model: str = "gcn") -> set[str]:
    """The names of a model's input-map weights (P3 splits them by columns)."""
    net = build_model(make_run("strategy=minibatch", f"model={model}", *SMALL).model, 8, 2)
    return {n for n, p in net.named_parameters() if any(p is m.weight for m in net.input_maps)}


@pytest.mark.parametrize("variant", _variants("p3", "naive"))
def test_p3_and_naive_iterations_equal_the_model_centric_ones(runs, variant: str) -> None:
    """Every step's all-reduced gradients equal ``minibatch``'s; P3's input-map weight gradient
    is split by columns over the ranks, so its ranks' gradients add up to it."""
    reference, traces = runs["minibatch"], runs[variant]
    for step, want in enumerate(reference[0]["grads"]):
        got = dict(traces[0]["grads"][step])
        if variant == "p3":
            for name in _split_weights():
                got[name] = sum(t["grads"][step][name] for t in traces)
        assert_gradients_close(got, want, 1e-9, f"{variant}, step {step}")
    assert traces[0]["loss"] == pytest.approx(reference[0]["loss"], rel=1e-12)
    for got, want in zip(traces[0]["counts"], reference[0]["counts"]):
        assert torch.equal(got, want)


@pytest.mark.slow
def test_the_locality_optimised_baseline_trains_on_other_batches(runs) -> None:
    assert runs["lo"][0]["loss"][0] != pytest.approx(runs["minibatch"][0]["loss"][0], rel=1e-6)


def test_locality_optimised_batches_draw_equal_shares_from_own_nodes_only() -> None:
    """Rank 0 owns 10 training nodes, rank 1 owns 30: with batches of 8 over 5 iterations,
    each rank trains on 4 own roots per iteration, so rank 0's nodes come twice and a third of
    rank 1's never: the bias of the locality-optimised systems."""
    owner = torch.tensor([0] * 10 + [1] * 30)
    train = torch.arange(40)
    iterations = local_batches(train, owner, 2, 8, 5, seed=3)
    assert len(iterations) == 5
    for batch in iterations:
        for rank, roots in enumerate(batch):
            assert roots.numel() == 4 and bool((owner[roots] == rank).all())
    seen = torch.bincount(torch.cat([batch[0] for batch in iterations]), minlength=40)
    assert bool((seen[:10] == 2).all())
    seen = torch.bincount(torch.cat([batch[1] for batch in iterations]), minlength=40)
    assert int((seen[10:] == 1).sum()) == 20 and int((seen[10:] == 0).sum()) == 10


def _epoch_bytes(traces: list[dict], kind: str, epoch: int = 0) -> int:
    return sum(t["bytes"][epoch].get(kind, 0) for t in traces)


def _first_epoch():
    """Re-derive epoch 1 of the ``runs`` jobs: the job data and, per iteration, each mini-batch's
    roots and the input nodes of its blocks."""
    job = prepare_job_data(make_run("strategy=minibatch", *SMALL, "cluster.world_size=3"), 3)
    topology, train = Topology.of(job.data), job.data.train_mask.nonzero().view(-1)
    order = train[torch.randperm(train.numel(), generator=torch.Generator().manual_seed(1))]
    iterations = []
    for i, start in enumerate(range(0, order.numel(), 300)):
        keys = [sampling_key(0, 1, i, layer) for layer in range(2)]
        batch = torch.tensor_split(order[start: start + 300], 3)
        iterations.append([(roots, sample_blocks(topology, roots, [3, 5], keys)) for roots in batch])
    return job, iterations


def test_fetched_bytes_are_the_remote_inputs_of_each_mini_batch(runs) -> None:
    """Recount what ``minibatch`` must fetch in epoch 1: per iteration and rank, the distinct
    input nodes of its blocks that another rank owns."""
    job, iterations = _first_epoch()
    remote_inputs = remote_roots = 0
    for batch in iterations:
        for rank, (roots, sample) in enumerate(batch):
            remote_inputs += int((job.part[sample.nodes] != rank).sum())
            remote_roots += int((job.part[roots] != rank).sum())
    assert _epoch_bytes(runs["minibatch"], "feat_fetch") == remote_inputs * job.data.num_features * 8
    assert _epoch_bytes(runs["minibatch"], "label_fetch") == remote_roots * 8


def test_p3_moves_partial_activations_of_the_first_layer_targets(runs) -> None:
    """GCN's first layer sums over its input rows, so P3 reduces the partial activations of the
    layer-1 targets: ``p3_partial = 2 (W - 1) sum |T_d| hidden x 8`` per iteration, and each
    mini-batch's first-layer graph is pushed to the W - 1 other ranks; no feature row travels,
    and the column-split input weights are not all-reduced."""
    job, iterations = _first_epoch()
    hidden = make_run("strategy=minibatch", *SMALL).model.hidden
    targets = sum(sample.hop_sizes[1] for batch in iterations for _, sample in batch)
    graphs = sum(pack(sample, layers=1).numel() for batch in iterations for _, sample in batch)
    assert _epoch_bytes(runs["p3"], "p3_partial") == 2 * 2 * targets * hidden * 8
    assert _epoch_bytes(runs["p3"], "topology") == 2 * graphs * 8
    assert _epoch_bytes(runs["p3"], "feat_fetch") == 0
    split_weight = job.data.num_features * hidden
    assert (_epoch_bytes(runs["minibatch"], "allreduce") - _epoch_bytes(runs["p3"], "allreduce")
            == 3 * len(iterations) * split_weight * 8)


@pytest.mark.slow
def test_naive_carries_partial_aggregations_and_topology_with_the_model(runs) -> None:
    """Model d's hops carry the partial aggregation of its layer-1 targets (input-wide, for
    GCN) and its subgraph's topology; the model migrates W - 1 times per iteration and the
    backward pass runs where the aggregation completes; no feature row travels."""
    job, iterations = _first_epoch()
    world = 3
    targets = sum(sample.hop_sizes[1] for batch in iterations for _, sample in batch)
    topology = sum(pack(sample).numel() for batch in iterations for _, sample in batch)
    assert _epoch_bytes(runs["naive"], "naive_partial") == (world - 1) * targets * job.data.num_features * 8
    assert _epoch_bytes(runs["naive"], "topology") == (world - 1) * topology * 8
    params = sum(g.numel() for g in runs["naive"][0]["grads"][0].values())
    assert _epoch_bytes(runs["naive"], "model_migrate") == world * (world - 1) * 2 * params * 8 * len(iterations)
    assert _epoch_bytes(runs["naive"], "feat_fetch") == 0
    assert _epoch_bytes(runs["naive"], "allreduce") == _epoch_bytes(runs["minibatch"], "allreduce")


@pytest.mark.slow
def test_naive_with_attention_carries_projections_out_and_gradients_back(tmp_path) -> None:
    """GAT's first layer cannot aggregate before its weights: model d's forward hop t carries
    the projections of the inputs owned by ranks d..d+t-1, its backward hop k the gradients of
    those not owned by ranks d-1..d-k; 2 (W - 1) migrations per iteration."""
    traces = trace_job(tmp_path, "gat", "strategy=naive", "model=gat", *SMALL, "cluster.world_size=3",
                       "train.epochs=1", worker=trace_minibatch)
    job, iterations = _first_epoch()
    world, rows = 3, 0
    for batch in iterations:
        for d, (_, sample) in enumerate(batch):
            owner = job.part[sample.nodes]
            for hop in range(1, world):
                rows += int(torch.isin(owner, torch.tensor([(d + k) % world for k in range(hop)])).sum())
                rows += int((~torch.isin(owner, torch.tensor([(d - 1 - k) % world for k in range(hop)]))).sum())
    torch.manual_seed(0)
    gat = make_run("strategy=naive", "model=gat", *SMALL).model
    width = projection_width(build_model(gat, job.data.num_features, job.data.num_classes).input_maps)
    assert _epoch_bytes(traces, "naive_partial") == rows * width * 8
    params = sum(g.numel() for g in traces[0]["grads"][0].values())
    assert _epoch_bytes(traces, "model_migrate") == world * 2 * (world - 1) * 2 * params * 8 * len(iterations)


@pytest.mark.slow
def test_pregathering_never_moves_more_and_micrographs_move_less(runs) -> None:
    for with_pg, without in (("hopgnn", "hopgnn_no_pregather"), ("hopgnn_2_steps", "hopgnn_2_steps_no_pregather")):
        for epoch in range(2):
            assert (_epoch_bytes(runs[with_pg], "feat_fetch", epoch)
                    <= _epoch_bytes(runs[without], "feat_fetch", epoch))
    assert _epoch_bytes(runs["hopgnn"], "feat_fetch") < _epoch_bytes(runs["minibatch"], "feat_fetch")
    assert _epoch_bytes(runs["hopgnn"], "label_fetch") == 0


@pytest.mark.parametrize("variant, steps", [
    pytest.param(variant, steps, marks=[] if variant in FAST_VARIANTS else pytest.mark.slow)
    for variant, steps in (("hopgnn", 3), ("hopgnn_2_steps", 2), ("hopgnn_1_step", 1))])
def test_models_migrate_between_time_steps(runs, variant: str, steps: int) -> None:
    traces = runs[variant]
    params = sum(g.numel() for g in traces[0]["grads"][0].values())
    iterations = 2
    assert _epoch_bytes(traces, "model_migrate") == 3 * (steps - 1) * 2 * params * 8 * iterations
    assert _epoch_bytes(traces, "allreduce") == _epoch_bytes(runs["minibatch"], "allreduce")
    assert traces[0]["metrics"][0]["time_steps"] == steps


@pytest.mark.slow
def test_a_worker_without_roots_still_takes_part(tmp_path) -> None:
    """A global batch of 2 roots on 3 workers leaves one mini-batch empty every iteration; every
    strategy still computes minibatch's iterations."""
    small = ("train.dtype=float64", "model.dropout=0", "dataset.num_nodes=40", "strategy.batch_size=2",
             "strategy.fanout=[3,5]", "cluster.world_size=3", "train.epochs=1")
    losses = {name: trace_job(tmp_path, name, f"strategy={name}", *small, worker=trace_minibatch)[0]["loss"]
              for name in ("minibatch", "p3", "hopgnn", "naive")}
    for name, loss in losses.items():
        assert loss == pytest.approx(losses["minibatch"], rel=1e-12), name


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("model", MODELS)
def test_every_model_trains_under_every_strategy(model: str, strategy: str, tmp_path) -> None:
    """The paper's set: GCN, SAGE and GAT at 3 layers, DeepGCN at 7, FiLM at 10 (and GCNII)."""
    depth = ("model.layers=3",) if model in ("gcn", "sage", "gat") else ()
    traces = trace_job(tmp_path, "run", f"strategy={strategy}", f"model={model}", *depth, "dataset.num_nodes=300",
                       "strategy.batch_size=64", "cluster.world_size=1", "train.epochs=1", worker=trace_minibatch)
    assert torch.isfinite(torch.tensor(traces[0]["loss"])).all()
    assert len(traces[0]["grads"]) == 3


@pytest.mark.parametrize("overrides, message", [
    (("strategy.batch_size=0",), r"strategy.batch_size=0 is invalid; it must be >= 1"),
])
def test_bad_values_are_refused(overrides: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        api.check(api.compose(["strategy=hopgnn", *overrides]))


@pytest.mark.parametrize("overrides, message", [
    (("strategy.fanout=[10]",), r"strategy.fanout=\[10\] has 1 entries for model.layers=2; valid: one int, or a list"),
    (("strategy.fanout=0",), r"strategy.fanout=0 is invalid"),
    (("partition.parts=3",), r"partition.parts=3 does not fit strategy=hopgnn .*; valid: 2"),
    (("strategy.time_steps=3",), r"strategy.time_steps=3 exceeds .*; valid: 1..2"),
    (("model.norm=batch",), r"model.norm=batch with strategy=hopgnn"),
])
def test_bad_layouts_are_refused_before_workers_start(overrides: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        job_layout(make_run("strategy=hopgnn", *overrides), 2)


@pytest.mark.parametrize("strategy", ["minibatch", "hopgnn"])
def test_a_batch_larger_than_the_training_set_is_refused_once_the_graph_is_loaded(strategy: str, tmp_path) -> None:
    """300 nodes with the default 60% training split: 180 training roots. A global batch of 1024
    would be one iteration of all 180 per epoch, not the batch asked for: refused in one line by
    the launcher, before any rank starts; a batch of all 180 is accepted."""
    run = make_run(f"strategy={strategy}", "dataset.num_nodes=300", "strategy.batch_size=1024",
                   f"partition.cache_dir={tmp_path}")
    with pytest.raises(ConfigError, match=r"^strategy.batch_size=1024 exceeds the 180 training nodes of "
                                          r"synthetic\S*; valid: 1..180$"):
        prepare(run).data(range(2), under_torchrun=False)
    fitting = make_run(f"strategy={strategy}", "dataset.num_nodes=300", "strategy.batch_size=180",
                       f"partition.cache_dir={tmp_path}")
    assert prepare(fitting).data(range(2), under_torchrun=False).facts.num_train == 180


@pytest.mark.slow
@needs_real_data
def test_hopgnn_reaches_the_same_accuracy_as_minibatch_on_cora(tmp_path) -> None:
    common = ("dataset=cora", "train.dtype=float64", "model.dropout=0", "strategy.batch_size=64",
              "cluster.world_size=2", "train.epochs=5")
    reference = trace_job(tmp_path, "minibatch", "strategy=minibatch", *common, worker=trace_minibatch)
    hopgnn = trace_job(tmp_path, "hopgnn", "strategy=hopgnn", *common, worker=trace_minibatch)
    assert hopgnn[0]["loss"] == pytest.approx(reference[0]["loss"], rel=1e-9)
    for got, want in zip(hopgnn[0]["counts"], reference[0]["counts"]):
        assert torch.equal(got, want)


def test_the_examination_keeps_merging_while_the_next_count_is_faster() -> None:
    assert chosen_merges([1.0, 0.8, 0.7, 0.9]) == 2
    assert chosen_merges([1.0, 1.1, 0.5, 0.4]) == 0
    assert chosen_merges([1.0, 0.9, 0.8, 0.7]) == 3


FOUR_WORKERS = ("train.dtype=float64", "model.dropout=0.5", "dataset.num_nodes=800", "strategy.batch_size=40",
                "strategy.fanout=[3,5]", "model.layers=2", "cluster.world_size=4")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gcn", "sage", "gat"])
def test_four_workers_equal_minibatch_and_hopgnn_examines_and_merges(model: str, tmp_path) -> None:
    """HopGNN (with its examination in epoch 2, then the merge count it chose), P3 and Naive
    compute minibatch's gradients and losses on 4 workers (float64, dropout 0.5)."""
    run = lambda name, *o: trace_job(tmp_path, name, *o, f"model={model}", *FOUR_WORKERS,  # noqa: E731
                                     "train.epochs=3", worker=trace_minibatch)
    reference = run("minibatch", "strategy=minibatch")
    runs = {"hopgnn": run("hopgnn", "strategy=hopgnn"), "p3": run("p3", "strategy=p3"),
            "naive": run("naive", "strategy=naive")}
    split = _split_weights(model)
    for name, traces in runs.items():
        for step, want in enumerate(reference[0]["grads"]):
            got = dict(traces[0]["grads"][step])
            if name == "p3":
                for weight in split:
                    got[weight] = sum(t["grads"][step][weight] for t in traces)
            assert_gradients_close(got, want, 1e-9, f"{name}, {model}, step {step}")
        assert traces[0]["loss"] == pytest.approx(reference[0]["loss"], rel=1e-12)
    metrics = runs["hopgnn"][0]["metrics"]
    iterations = len(reference[0]["grads"]) // 3
    assert iterations >= 12
    assert [m["examination"] for m in metrics] == [0.0, 1.0, 0.0]
    assert metrics[0]["merges"] == 0 and 0 < metrics[1]["merges"] < 3
    assert metrics[2]["merges"] in (0.0, 1.0, 2.0, 3.0)
    assert runs["hopgnn"][0]["bytes"][1]["merge_time"] > 0
