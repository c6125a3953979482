"""BNS-GCN and its edge-sampling baselines: p = 1 is vanilla, p = 0 sends no halo rows, halo
bytes scale with p, and edge sampling at matched edge drops moves more bytes than
boundary-node sampling (BNS-GCN, Table 9); and a sampled run is exact: each epoch it equals
single-process training on the graph its ranks sampled together. Unbiasedness:
tests/test_unbiased_halos.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from conftest import make_run
from dist_helpers import assert_gradients_close, job_bytes, record_training, trace_job
from gnntrain.data.aggregation import MEAN, SYMMETRIC, Aggregation
from gnntrain.data.job import prepare_job_data
from gnntrain.data.local_graph import LocalGraph, build_local_graph
from gnntrain.parallel.activation_memory import SavedActivations
from gnntrain.parallel.mesh import WorkerContext
from gnntrain.strategies.graph_parallel.strategy import GraphParallel
from gnntrain.strategies.graph_parallel.sampled import sampled_graph

HALO = ("halo_fwd", "halo_bwd")


SMALL = ("model=sage", "model.layers=2", "model.hidden=16", "cluster.world_size=2", "train.epochs=4",
         "dataset.num_nodes=1200", "seed=5")


def test_p1_is_vanilla(tmp_path) -> None:
    """Same seed: the same losses, gradients and bytes (dropout on, so the global RNG must be
    untouched by the sampler)."""
    vanilla = trace_job(tmp_path, "vanilla", *SMALL, "strategy=vanilla", "model.dropout=0.5")
    bns = trace_job(tmp_path, "bns", *SMALL, "strategy=bns", "strategy.p=1", "model.dropout=0.5")
    assert bns[0]["loss"] == vanilla[0]["loss"]
    for b, v in zip(bns, vanilla):
        assert b["bytes"] == v["bytes"]
        for epoch in range(len(v["grads"])):
            for name, grad in v["grads"][epoch].items():
                assert torch.equal(b["grads"][epoch][name], grad)


def test_p0_sends_no_halo_bytes(tmp_path) -> None:
    traces = trace_job(tmp_path, "bns0", *SMALL, "strategy=bns", "strategy.p=0")
    assert all(job_bytes(traces, kind) == 0 for kind in (*HALO, "sample_index"))
    assert all(torch.isfinite(torch.tensor(t["loss"])).all() for t in traces)


@pytest.mark.slow
def test_memory_kept_for_backward_shrinks_with_p(tmp_path) -> None:
    """BNS-GCN Fig. 6's memory (Eq. 4): the boundary rows a layer keeps for its backward go with
    the sampled halo, so p = 0 keeps less than p = 1 (max over ranks, every epoch)."""
    saved = {p: [m["saved_for_backward_mb"] for m in trace_job(tmp_path, f"mem{p}", *SMALL, "strategy=bns",
                                                                f"strategy.p={p}")[0]["epoch_metrics"]]
             for p in (1, 0)}
    assert all(0 < low < high for low, high in zip(saved[0], saved[1]))


def test_saved_activations_count_dense_storages_once_without_parameters() -> None:
    weight = torch.nn.Parameter(torch.randn(8, 4))
    x = torch.randn(10, 8, requires_grad=True)
    with SavedActivations([weight]) as saved:
        h = x @ weight  # saves x and the weight
        total = h[:, :2].sum(1, keepdim=True)  # a view of h, saves nothing
        (h * h).sum() + (h * total).sum()  # save h (three times) and total
    assert saved.nbytes == x.nbytes + h.nbytes + total.nbytes


@pytest.mark.parametrize("aggregation", [SYMMETRIC, MEAN], ids=lambda a: a.name)
def test_sampled_graph_matrices_equal_matrices_sorted_from_scratch(aggregation: Aggregation) -> None:
    """A sampled graph's aggregation matrices (A and A^T) take their entries' order from the
    whole local graph's; they equal the matrices of the same graph built from scratch."""
    job = prepare_job_data(make_run("dataset.num_nodes=800", "cluster.world_size=3"), 3)
    graph = build_local_graph(job.data, job.part, 1, 3, torch.float64)
    halo_keep = torch.rand(graph.num_halo, generator=torch.Generator().manual_seed(0)) < 0.3
    is_cut = graph.edge_src >= graph.num_inner
    edge_keep = ~is_cut
    edge_keep[is_cut] = halo_keep[graph.edge_src[is_cut] - graph.num_inner]
    scale = torch.where(is_cut, 1 / 0.3, 1.0).double()
    sampled = sampled_graph(graph, edge_keep, scale, halo_keep, graph.send_index, graph.send_splits)
    fresh = replace(sampled, sampled_from=None, _operators={})
    for mine, reference in [(sampled.operator(aggregation).matrix, fresh.operator(aggregation).matrix),
                            (sampled.operator(aggregation).transpose, fresh.operator(aggregation).transpose)]:
        assert torch.equal(mine.crow_indices(), reference.crow_indices())
        torch.testing.assert_close(mine.to_dense(), reference.to_dense(), rtol=1e-12, atol=0)


BIG = ("model=gcn", "model.layers=2", "model.hidden=8", "model.dropout=0", "cluster.world_size=4",
       "dataset.num_nodes=20000", "dataset.num_features=8", "train.epochs=8", "seed=1")


@pytest.mark.slow
def test_halo_bytes_scale_with_p_and_edge_sampling_moves_more(tmp_path) -> None:
    """Thousands of boundary nodes: at p = 0.1 and 0.01 the halo bytes over 8 epochs are within
    10% of p times vanilla's; the keep masks go under ``sample_index``. BES and DropEdge drop
    as many edges as BNS at p = 0.1 yet move more halo bytes (how much more grows with the
    number of cut edges per boundary node; this graph has few)."""
    vanilla = trace_job(tmp_path, "vanilla", *BIG, "strategy=vanilla")
    assert sum(t["boundary"] for t in vanilla) > 5000
    base = sum(job_bytes(vanilla, k) for k in HALO)
    halo = {}
    for name, p in (("bns", 0.1), ("bns", 0.01), ("bes", 0.1), ("dropedge", 0.1)):
        traces = trace_job(tmp_path, f"{name}{p}", *BIG, f"strategy={name}", f"strategy.p={p}")
        halo[name, p] = sum(job_bytes(traces, k) for k in HALO)
        assert job_bytes(traces, "sample_index") > 0
        dropped = [t["epoch_metrics"][-1]["dropped_edges"] for t in traces]
        assert dropped[0] == dropped[-1]
        halo[name, p, "dropped"] = dropped[0]
    for p in (0.1, 0.01):
        assert halo["bns", p] == pytest.approx(p * base, rel=0.10)
    expected_drop = halo["bns", 0.1, "dropped"]
    for name in ("bes", "dropedge"):
        assert halo[name, 0.1, "dropped"] == pytest.approx(expected_drop, rel=0.05)
        assert halo[name, 0.1] > 1.2 * halo["bns", 0.1], (name, halo)


@pytest.mark.slow
@pytest.mark.parametrize("model,strategy", [
    ("gcn", "bns"), ("sage", "bns"), ("gat", "bns"), ("film", "bns"), ("sage", "bes"), ("gcn", "dropedge")])
def test_sampled_run_equals_single_process_on_the_sampled_graph(model: str, strategy: str, tmp_path) -> None:
    """Exactness for p < 1: given the epoch's samples, the distributed run is full-graph
    training on one graph, the whole graph's nodes with every rank's kept edges at their 1/p
    weights and the full graph's degrees. Its loss and gradients (float64, 3 workers, Adam
    steps between epochs) equal a single process trained on that graph, which checks the
    backward exchange of the kept rows as well as the forward."""
    overrides = (f"model={model}", "model.layers=2", "model.hidden=16", "model.dropout=0", "train.dtype=float64",
                 "train.epochs=3", "dataset.num_nodes=800", "seed=3")
    sampled = trace_job(tmp_path, "sampled", *overrides, f"strategy={strategy}", "strategy.p=0.3",
                        "cluster.world_size=3")
    edges = [tuple(torch.cat(parts) for parts in zip(*(t["edges"][epoch] for t in sampled)))
             for epoch in range(3)]
    assert all(m["dropped_edges"] > 0 for m in sampled[0]["epoch_metrics"])

    run = make_run(*overrides, "cluster.world_size=1")
    ctx = WorkerContext(0, 1, torch.device("cpu"))
    job = prepare_job_data(run, 1)
    strategy = GraphParallel(run, ctx, job)
    full, full_view = strategy.graph, strategy.policy.training_view
    strategy.policy.training_view = lambda epoch: (_graph_with_edges(full, *edges[epoch - 1]), full_view(epoch)[1])
    reference = record_training(strategy, run, ctx)

    torch.testing.assert_close(torch.tensor(sampled[0]["loss"]), torch.tensor(reference["loss"]), rtol=1e-9, atol=0)
    for epoch in range(3):
        assert_gradients_close(sampled[0]["grads"][epoch], reference["grads"][epoch], 1e-9, f"epoch {epoch + 1}")


def _graph_with_edges(full: LocalGraph, src: torch.Tensor, dst: torch.Tensor, weight: torch.Tensor) -> LocalGraph:
    """The single-process graph ``full`` (local ids = global ids) restricted to the edges
    ``src -> dst`` with weights ``weight``."""
    n = full.num_inner
    key, order = torch.sort(src * n + dst)
    full_key = full.global_ids[full.edge_src] * n + full.global_ids[full.edge_dst]
    position = torch.searchsorted(key, full_key).clamp(max=key.numel() - 1)
    keep = key[position] == full_key
    assert int(keep.sum()) == key.numel(), "every sampled edge is an edge of the graph"
    scale = torch.where(keep, weight[order][position], 1.0).to(full.in_degree.dtype)
    return sampled_graph(full, keep, scale, torch.zeros(0, dtype=torch.bool), full.send_index, full.send_splits)


def test_a_rank_that_keeps_no_halo_row_still_runs_its_part_of_the_backward_exchange(tmp_path) -> None:
    """At p = 0.01 on 4 parts of a small graph, rank 1's second layer keeps no halo row (every
    peer sends it none) while its peers still await the gradients of the rows they send it: its
    empty halo must stay in the autograd graph, or it skips the backward exchange and the job
    hangs until the collective timeout."""
    from conftest import train_records

    records = train_records(tmp_path, "experiment=bns_table4", "strategy.p=0.01", "dataset.num_nodes=1500",
                            "model.hidden=32", "train.epochs=2", "network.calibrate_share=null",
                            "network.bandwidth_gbps=10", "cluster.timeout_s=30")
    assert [r["epoch"] for r in records] == [1, 2]


def test_an_empty_exchanged_halo_stays_in_the_autograd_graph() -> None:
    from gnntrain.models.gnn import source_rows

    inner = torch.randn(3, 2, requires_grad=True)
    halo = torch.zeros(0, 2, requires_grad=True)
    source_rows(inner, halo).sum().backward()
    assert halo.grad is not None and halo.grad.shape == (0, 2)
    assert source_rows(inner, torch.zeros(0, 2)) is inner, "no copy where no halo could be"
