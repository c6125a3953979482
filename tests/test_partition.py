"""Partitions, their cache, and the per-rank local graphs and send/receive plans."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
import torch

from gnntrain.data import partition
from gnntrain.storage.process_folders import ALIVE, make_process_folder, remove_process_folder
from gnntrain.job import api
from gnntrain.job.composition import typed_run
from gnntrain.data.partition import comm_volume, graph_fingerprint, load_or_partition, partition_stats
from gnntrain.data.registry import load_dataset
from gnntrain.data.synthetic import generate
from gnntrain.errors import ConfigError, GnntrainError
from gnntrain.job.validation import validate
from gnntrain.data.local_graph import build_local_graph
from gnntrain.strategies.graph_parallel.overlap import central_marginal

from conftest import make_run, needs_real_data


def _graph(seed: int = 0):
    return generate(num_nodes=3000, avg_degree=10, num_classes=4, num_features=8, homophily=0.8,
                    graph_seed=seed)


@needs_real_data
def test_volume_objective_moves_fewer_halo_rows_than_the_cut_objective(tmp_path) -> None:
    """partition.objective=vol on Cora in 4 parts: fewer halo rows per exchange than the
    edge-cut objective's (429 vs 476), each partition balanced. METIS's volume objective is a
    heuristic: on Squirrel in 4 parts the edge-cut objective's recursive bisection happens to
    move fewer rows (6040 vs 6198)."""
    run = make_run("dataset=cora")
    data = load_dataset(run.dataset, run.partition.cache_dir)
    stats = {}
    for method in ("metis", "metis-vol"):
        part, cached = load_or_partition(data, "cora", method, 4, 0, tmp_path)
        assert not cached  # each objective has its own cache entry
        assert torch.bincount(part, minlength=4).max() <= 1.05 * data.num_nodes / 4
        stats[method] = partition_stats(data, part, 4)
    assert comm_volume(stats["metis-vol"]) < comm_volume(stats["metis"])


@pytest.mark.parametrize("overrides", [("partition.method=random",), ("partition.assignment=parts.npy",)])
def test_volume_objective_needs_metis(overrides: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match="partition.objective=vol is invalid"):
        validate(typed_run(api.compose(["partition.objective=vol", *overrides])))


def test_metis_is_balanced_and_cuts_fewer_edges_than_random(tmp_path) -> None:
    data = _graph()
    metis, _ = load_or_partition(data, "g", "metis", 4, 0, tmp_path)
    rand, _ = load_or_partition(data, "g", "random", 4, 0, tmp_path)
    for part in (metis, rand):
        sizes = torch.bincount(part, minlength=4)
        assert sizes.min() > 0 and sizes.max() <= 1.05 * data.num_nodes / 4
    assert partition_stats(data, metis, 4)["edge_cut"] < 0.5 * partition_stats(data, rand, 4)["edge_cut"]


def test_cache_is_reused_keyed_and_rebuilt_when_corrupt_or_stale(tmp_path) -> None:
    data = _graph()
    part, cached = load_or_partition(data, "g", "metis", 3, 0, tmp_path)
    assert not cached
    again, cached = load_or_partition(data, "g", "metis", 3, 0, tmp_path)
    assert cached and torch.equal(part, again)
    assert not load_or_partition(data, "g", "metis", 3, 1, tmp_path)[1]  # seed is in the key
    assert not load_or_partition(data, "g", "random", 3, 0, tmp_path)[1]  # method too

    path = tmp_path / "partitions" / "g-metis-3-s0.pt"
    path.write_bytes(b"not a torch file")
    rebuilt, cached = load_or_partition(data, "g", "metis", 3, 0, tmp_path)
    assert not cached and torch.equal(rebuilt, part)

    torch.save({"part": torch.full((data.num_nodes,), 7), "fingerprint": graph_fingerprint(data)}, path)
    assert not load_or_partition(data, "g", "metis", 3, 0, tmp_path)[1]  # out-of-range ids

    other = _graph(seed=1)  # same key, different graph: stale
    stale, cached = load_or_partition(other, "g", "metis", 3, 0, tmp_path)
    assert not cached and stale.shape == (other.num_nodes,)


def test_a_rebuilt_cache_file_is_named(tmp_path, capsys) -> None:
    data = _graph()
    load_or_partition(data, "g", "metis", 3, 0, tmp_path)
    path = tmp_path / "partitions" / "g-metis-3-s0.pt"
    path.write_bytes(b"not a torch file")
    capsys.readouterr()
    load_or_partition(data, "g", "metis", 3, 0, tmp_path)
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("gnntrain: warning: cache file ") and str(path) in line and "could not be read" in line


@pytest.mark.parametrize("method,settings", [("metis", "partition.method=metis"),
                                             ("metis-vol", "partition.method=metis partition.objective=vol")])
def test_a_partition_with_empty_parts_is_refused_and_not_cached(method: str, settings: str, tmp_path,
                                                                 monkeypatch) -> None:
    data = _graph()
    lopsided = torch.zeros(data.num_nodes, dtype=torch.long)
    lopsided[:5] = 2
    monkeypatch.setattr(partition, "compute_partition", lambda *args: lopsided)
    with pytest.raises(ConfigError, match=rf"^{settings} left 1 of 3 parts .* empty \(parts 1\); valid: fewer parts "
                                          r".*partition.method=random partition.objective=cut"):
        load_or_partition(data, "g", method, 3, 0, tmp_path)
    assert not list(tmp_path.rglob("*.pt"))


def test_send_and_receive_plans_agree_between_peers() -> None:
    data = _graph()
    part = torch.randint(0, 4, (data.num_nodes,), generator=torch.Generator().manual_seed(0))
    graphs = [build_local_graph(data, part, r, 4) for r in range(4)]
    for r, g in enumerate(graphs):
        assert g.recv_splits[r] == 0 and g.send_splits[r] == 0
        halo = g.global_ids[g.num_inner:]
        assert torch.all(part[halo] != r)
        recv_start = 0
        for q, peer in enumerate(graphs):
            count = g.recv_splits[q]
            received = halo[recv_start: recv_start + count]
            recv_start += count
            send_start = sum(peer.send_splits[:r])
            sent = peer.global_ids[peer.send_index[send_start: send_start + peer.send_splits[r]]]
            assert torch.equal(sent, received), (r, q)


def test_partition_stats_count_boundary_and_marginal_nodes() -> None:
    data = _graph()
    part = torch.randint(0, 3, (data.num_nodes,), generator=torch.Generator().manual_seed(1))
    stats = partition_stats(data, part, 3)
    graphs = [build_local_graph(data, part, r, 3) for r in range(3)]
    assert stats["inner_nodes"] == [g.num_inner for g in graphs]
    assert stats["boundary_nodes"] == [g.num_halo for g in graphs]
    assert stats["sent_rows"] == [g.send_index.numel() for g in graphs]
    assert stats["marginal_nodes"] == [central_marginal(g)[1].num_targets for g in graphs]
    assert all(c.num_targets + m.num_targets == g.num_inner for g in graphs for c, m, _ in [central_marginal(g)])
    expected = (data.num_nodes + sum(g.num_halo for g in graphs)) / data.num_nodes
    assert stats["replication_factor"] == pytest.approx(expected)


@pytest.mark.parametrize("symmetric", [True, False])
def test_coalescing_drops_loops_and_duplicates_and_sorts_by_target(symmetric: bool) -> None:
    """:func:`coalesce_edges` (one key per edge, sorted in place) equals the set of (target,
    source) pairs without self-loops, with the reverse edges where ``symmetric``."""
    from gnntrain.data.graph_data import coalesce_edges

    gen = torch.Generator().manual_seed(0)
    for n in (1, 2, 7, 500):
        src, dst = torch.randint(0, n, (2, 3 * n + 5), generator=gen)
        pairs = {(int(t), int(s)) for s, t in zip(src, dst) if s != t}
        if symmetric:
            pairs |= {(s, t) for t, s in pairs}
        edges = coalesce_edges(src, dst, n, symmetric)
        assert [(int(t), int(s)) for s, t in edges.t()] == sorted(pairs)


def test_metis_on_its_input_alone_gives_the_same_partition_and_restores_the_graph(tmp_path) -> None:
    """With a spill dir METIS holds only its CSR (features in a file, targets rebuilt after):
    same partition, same graph afterwards; a graph not known to be coalesced and undirected is
    symmetrised first and partitioned alike."""
    data = _graph()
    edges, x = data.edge_index.clone(), data.x.clone()
    plain = partition.metis_partition(data, 4, 0)
    assert torch.equal(partition.metis_partition(data, 4, 0, spill_dir=tmp_path), plain)
    assert torch.equal(data.edge_index, edges) and torch.equal(data.x, x) and not list(tmp_path.iterdir())
    data.coalesced_undirected = False
    assert torch.equal(partition.metis_partition(data, 4, 0), plain)


def test_partition_stats_count_each_parts_in_edges() -> None:
    data = _graph()
    part = partition.metis_partition(data, 3, 0)
    stats = partition_stats(data, part, 3)
    assert stats["inner_edges"] == torch.bincount(part[data.edge_index[1]], minlength=3).tolist()
    assert sum(stats["inner_edges"]) == data.num_edges


def test_metis_stopped_by_its_own_signal_trap_is_one_line_not_pymetis_traceback(monkeypatch) -> None:
    """METIS catches SIGTERM itself and pymetis then raises an unknown error: the job ends in one
    line naming the causes (the launcher records it as failed)."""
    def trapped(*args, **kwargs):
        raise RuntimeError("Caught an unknown exception!")

    monkeypatch.setattr(partition.pymetis, "part_graph", trapped)
    with pytest.raises(GnntrainError, match=r"^METIS stopped without a partition \(Caught an unknown exception!\): "
                                            r"it does so when the job is stopped while it runs \(SIGTERM"):
        partition.metis_partition(generate(200, 6, 4, 8, homophily=0.8), 2, 0)


def test_spill_folders_of_processes_that_are_gone_are_removed(tmp_path) -> None:
    """A launcher killed while METIS ran leaves its spill folder (the graph's features); the next
    spill removes it (its lock is free), never one whose lock a living process holds (in any PID
    namespace), a folder of another shape, or a link's target."""
    def folder(name: str) -> Path:
        made = tmp_path / name
        made.mkdir()
        (made / ALIVE).write_text("")
        (made / "x.pt").write_bytes(b"features")
        return made

    dead, alive = folder(f"{partition.SPILL_PREFIX}7-abcdefgh"), folder(f"{partition.SPILL_PREFIX}8-ijklmnop")
    users = folder(f"{partition.SPILL_PREFIX}2024-runs")
    holder = os.open(alive / ALIVE, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    elsewhere = folder("elsewhere")
    (tmp_path / f"{partition.SPILL_PREFIX}9-qrstuvwx").symlink_to(elsewhere)
    try:
        fresh = make_process_folder(tmp_path, partition.SPILL_PREFIX)
    finally:
        os.close(holder)
    assert not dead.exists() and alive.exists() and users.exists() and (elsewhere / "x.pt").exists()
    assert fresh.name.startswith(f"{partition.SPILL_PREFIX}{os.getpid()}-") and fresh.stat().st_mode & 0o777 == 0o700
    remove_process_folder(fresh)
    assert not fresh.exists()
