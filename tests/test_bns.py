"""BNS-GCN and its edge-sampling baselines: p = 1 is vanilla, p = 0 sends no halo rows, halo
bytes scale with p, and edge sampling at matched edge drops moves more bytes than
boundary-node sampling (BNS-GCN, Table 9). Unbiasedness: tests/test_unbiased_halos.py."""

from __future__ import annotations

import pytest
import torch

from dist_helpers import job_bytes, trace_job

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


BIG = ("model=gcn", "model.layers=2", "model.hidden=8", "model.dropout=0", "cluster.world_size=4",
       "dataset.num_nodes=20000", "dataset.num_features=8", "train.epochs=8", "seed=1")


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
