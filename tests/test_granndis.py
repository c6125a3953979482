"""GraNNDis (``strategy=granndis``): with every dependency preloaded it equals single-process
full-graph training (float64, dropout on); no halo byte crosses between servers, the bytes that do
are the gradient all-reduce's analytic count; the expansion-aware sample's rows scale with its
rate; the memory estimate and the measured peak grow with the replicated rows."""

from __future__ import annotations

import pytest
import torch

from conftest import make_run, train_records
from dist_helpers import assert_same_traces, trace_full_batch, trace_job
from gnntrain.data.graph_data import GraphData
from gnntrain.data.preloading import carve_preloaded, preloaded_stats
from gnntrain.data.synthetic import generate
from gnntrain.errors import ConfigError
from gnntrain.job.validation import job_layout, validate

EPOCHS = 3
MODEL = ("model=sage", "model.layers=3", "model.hidden=16", "model.dropout=0.5")
COMMON = (*MODEL, f"train.epochs={EPOCHS}", "seed=4")
SMALL = ("dataset.num_nodes=400",)
NODES = ("network=two_level", "cluster.world_size=4")


@pytest.mark.slow
def test_preloading_every_dependency_equals_single_process(tmp_path) -> None:
    single = trace_job(tmp_path, "single", *COMMON, *SMALL, "train.dtype=float64", "cluster.world_size=1",
                       worker=trace_full_batch)
    preloaded = trace_job(tmp_path, "granndis", *COMMON, *SMALL, *NODES, "train.dtype=float64", "strategy=granndis",
                          worker=trace_full_batch)
    assert_same_traces(preloaded, single, 1e-12)


@pytest.mark.slow
def test_no_halo_crosses_servers_and_the_all_reduce_is_what_does(tmp_path) -> None:
    """Two nodes of two ranks: vanilla's halos cross between them, GraNNDis's do not; what crosses
    is each node's last rank passing its gradients on around the ring: 2 x the parameters' bytes."""
    vanilla = train_records(tmp_path / "vanilla", *COMMON, *SMALL, *NODES)[-1]
    granndis = train_records(tmp_path / "granndis", *COMMON, *SMALL, *NODES, "strategy=granndis")[-1]
    assert vanilla["strategy_metrics"]["inter_node_bytes/halo_fwd"] > 0
    for kind in ("halo_fwd", "halo_bwd"):
        assert granndis["strategy_metrics"][f"inter_node_bytes/{kind}"] == 0, kind
        assert granndis["comm_bytes_by_kind"][kind] > 0, kind
    per_rank = granndis["comm_bytes_by_kind"]["allreduce"] // 4
    assert granndis["strategy_metrics"]["inter_node_bytes"] == 2 * per_rank
    assert granndis["strategy_metrics"]["replicated_rows"] > 0
    assert granndis["loss"] == pytest.approx(vanilla["loss"], rel=1e-5)


def _graph() -> GraphData:
    return generate(num_nodes=600, avg_degree=4.0, num_classes=4, num_features=8, homophily=0.8, graph_seed=3)


def test_each_server_holds_its_dependencies_and_reads_halos_only_from_itself() -> None:
    """Four ranks, two per server, two hops: a server's ranks compute together its owned vertices
    and their two-hop in-neighbourhood, each row on one rank, in parts METIS balances; every halo
    row comes from the same server, and replicated rows carry no training mask."""
    data = _graph()
    part = torch.arange(data.num_nodes) % 4
    src, dst = data.edge_index
    for server in (range(0, 2), range(2, 4)):
        owned = ((part >= server.start) & (part < server.stop)).nonzero().view(-1)
        needed = owned
        for _ in range(2):
            needed = torch.unique(torch.cat([needed, src[torch.isin(dst, needed)]]))
        computed = []
        for rank in server:
            fields = carve_preloaded(data, part, rank, 4, ranks_per_server=2, hops=2)
            assert all(n == 0 for q, n in enumerate(fields["recv_splits"]) if q not in server)
            assert all(n == 0 for q, n in enumerate(fields["send_splits"]) if q not in server)
            inner = fields["global_ids"][: fields["num_inner"]]
            replicated = ~torch.isin(inner, owned)
            assert fields["replicated"] == int(replicated.sum()) > 0
            assert not fields["train_mask"][replicated].any()
            computed.append(inner)
        together = torch.cat(computed)
        assert torch.equal(torch.sort(together).values, needed), "each needed row computed once in the server"
        assert max(map(len, computed)) <= 1.05 * len(together) / 2, "METIS balances the server's parts"


def test_the_sample_keeps_rows_in_proportion_to_its_rate() -> None:
    """One hop: every outside source of a kept edge is replicated, so the replicated rows fall with
    the rate (an outside vertex with k edges into the server is kept with 1 - (1 - rate)^k), and with
    them the rows every exchange moves within a server (the predictor's test checks that these
    counts are the meter's bytes)."""
    data = _graph()
    part = torch.arange(data.num_nodes) % 4
    stats = {rate: preloaded_stats(data, part, 4, 2, hops=1, rate=rate) for rate in (1.0, 0.5, 0.1)}
    replicated = {rate: sum(s["replicated_nodes"]) for rate, s in stats.items()}
    sent = {rate: sum(s["sent_rows"]) for rate, s in stats.items()}
    assert replicated[1.0] > replicated[0.5] > replicated[0.1] > 0
    assert sent[1.0] > sent[0.5] > sent[0.1], "the rows a layer's exchange moves fall with the rate"
    fields = carve_preloaded(data, part, 0, 4, 2, hops=1, rate=0.5)
    from_outside = ~torch.isin(fields["global_ids"][fields["edge_src"]], (part < 2).nonzero().view(-1))
    assert torch.equal(fields["edge_scale"], torch.where(from_outside, 2.0, 1.0).double())


@pytest.mark.slow
def test_the_estimate_and_the_peak_grow_with_the_replicated_rows(tmp_path) -> None:
    run = make_run("dataset=cora", *COMMON, *NODES, "strategy=granndis")
    from gnntrain.data.job import prepare_job_data
    from gnntrain.job.memory import estimate_job
    from gnntrain.strategies import strategy_class

    job = prepare_job_data(run, job_layout(run, 4).parts)
    stats = strategy_class("granndis").rank_stats(run, job)
    owned = [i - r for i, r in zip(stats["inner_nodes"], stats["replicated_nodes"])]
    assert [sum(owned[s:s + 2]) for s in (0, 2)] == [sum(job.stats["inner_nodes"][s:s + 2]) for s in (0, 2)]
    preloaded = estimate_job(run, job.facts, stats)
    plain = estimate_job(run, job.facts, job.stats)
    for grown, base in zip(preloaded, plain):
        assert grown.features_mb > base.features_mb and grown.activations_mb > base.activations_mb
    vanilla = train_records(tmp_path / "vanilla", "dataset=cora", *COMMON, *NODES)[-1]
    granndis = train_records(tmp_path / "granndis", "dataset=cora", *COMMON, *NODES, "strategy=granndis")[-1]
    assert (granndis["strategy_metrics"]["saved_for_backward_mb"]
            > vanilla["strategy_metrics"]["saved_for_backward_mb"])


def test_granndis_refuses_bad_keys_and_batch_norm() -> None:
    with pytest.raises(ConfigError, match=r"strategy.rate=0.*in \(0, 1\]"):
        validate(make_run("strategy=granndis", "strategy.rate=0"))
    with pytest.raises(ConfigError, match=r"strategy.hops=0.*>= 1 or null"):
        validate(make_run("strategy=granndis", "strategy.hops=0"))
    with pytest.raises(ConfigError, match=r"model.norm=batch with strategy=granndis"):
        job_layout(make_run("strategy=granndis", "model.norm=batch"), 2)


@pytest.mark.slow
def test_the_predictor_posts_the_bytes_the_meter_counts(tmp_path) -> None:
    from test_predict_traffic import measured_bytes, predicted_bytes

    overrides = (*COMMON, *SMALL, *NODES, "strategy=granndis", "strategy.rate=0.5", "train.warmup_epochs=1")
    measured = {k: v for k, v in measured_bytes(train_records(tmp_path, *overrides)).items() if v}
    assert predicted_bytes(overrides) == pytest.approx(measured, rel=1e-12)


@pytest.mark.slow
def test_the_predicted_peak_counts_the_replicated_rows() -> None:
    from gnntrain.cost.shape import partition_shape
    from gnntrain.predict.predictor import peak_mb, rank_stats

    runs = {name: make_run("dataset=cora", *COMMON, *NODES, f"strategy={name}") for name in ("vanilla", "granndis")}
    shapes = {name: partition_shape(run, 4) for name, run in runs.items()}
    vanilla, granndis = (rank_stats(runs[n], shapes[n]) for n in ("vanilla", "granndis"))
    assert all(g > v for g, v in zip(granndis["inner_nodes"], vanilla["inner_nodes"]))
    assert all(g > v for g, v in zip(peak_mb(runs["granndis"], shapes["granndis"]),
                                      peak_mb(runs["vanilla"], shapes["vanilla"])))


@pytest.mark.slow
def test_a_co_batch_of_every_neighbour_equals_single_process(tmp_path) -> None:
    """Cooperative batching with a fanout above every degree: the co-batch is every training vertex's
    whole dependency cone, so training equals single-process training (float64, dropout on), and
    evaluation on the ranks' parts scores exactly as it does."""
    single = trace_job(tmp_path, "single", *COMMON, *SMALL, "train.dtype=float64", "cluster.world_size=1",
                       worker=trace_full_batch)
    batch = trace_job(tmp_path, "cob", *COMMON, *SMALL, *NODES, "train.dtype=float64", "strategy=granndis",
                      "strategy.fanout=100000", worker=trace_full_batch)
    assert_same_traces(batch, single, 1e-12)


def test_a_co_batch_samples_its_seeds_dependencies_and_keeps_only_their_masks() -> None:
    data = _graph()
    part = torch.arange(data.num_nodes) % 4
    whole = preloaded_stats(data, part, 4, 2, hops=2)
    for fanout in (2, 1):
        batch = preloaded_stats(data, part, 4, 2, hops=2, fanout=fanout)
        assert sum(batch["inner_nodes"]) < sum(whole["inner_nodes"])
    fields = carve_preloaded(data, part, 0, 4, 2, hops=2, fanout=2)
    inner = fields["global_ids"][: fields["num_inner"]]
    assert torch.equal(fields["train_mask"], data.train_mask[inner] & (part[inner] < 2))
    assert not fields["val_mask"].any() and not fields["test_mask"].any()
    assert (fields["edge_scale"] >= 1).all()
