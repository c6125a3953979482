"""The dataset registry: synthetic generator, offline real graphs, unavailable remote graphs."""

from __future__ import annotations

import socket

import pytest
import torch

from torch_geometric.data import Data

from conftest import DATA_ROOT, make_run, needs_real_data
from gnntrain.data.job import dataset_key
from gnntrain.data.registry import load_dataset
from gnntrain.data.synthetic import generate
from gnntrain.errors import DatasetUnavailable


def test_synthetic_is_deterministic_and_has_the_asked_structure() -> None:
    a = generate(5000, 12, 5, 16, homophily=0.8, graph_seed=3)
    b = generate(5000, 12, 5, 16, homophily=0.8, graph_seed=3)
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert not torch.equal(a.edge_index, generate(5000, 12, 5, 16, homophily=0.8, graph_seed=4).edge_index)
    src, dst = a.edge_index
    assert (src != dst).all()
    reverse = torch.unique(dst * a.num_nodes + src)
    assert torch.equal(reverse, torch.unique(src * a.num_nodes + dst))  # undirected
    assert 9 < a.num_edges / a.num_nodes < 12.5
    homophily = (a.y[src] == a.y[dst]).float().mean()
    assert abs(homophily - (0.8 + 0.2 / 5)) < 0.03
    degree = torch.bincount(dst, minlength=a.num_nodes).float()
    assert degree.max() > 8 * degree.mean()  # heavy tail
    assert int(a.train_mask.sum() + a.val_mask.sum() + a.test_mask.sum()) == a.num_nodes
    assert not (a.train_mask & a.test_mask).any()


@needs_real_data
@pytest.mark.parametrize("name,nodes,features,classes", [
    ("cora", 2708, 1433, 7), ("citeseer", 3327, 3703, 6), ("squirrel", 5201, 2089, 5),
    ("amherst41", 2235, 1193, 2), ("reed98", 962, 745, 2),
])
def test_offline_real_graphs_load_without_writing_to_the_data_root(name, nodes, features, classes) -> None:
    before = sorted(p for p in DATA_ROOT.rglob("*"))
    run = make_run(f"dataset={name}")
    data = load_dataset(run.dataset, run.partition.cache_dir)
    assert (data.num_nodes, data.num_features, data.num_classes) == (nodes, features, classes)
    assert data.train_mask.any() and data.val_mask.any() and data.test_mask.any()
    assert not (data.train_mask & data.val_mask).any()
    labeled = data.y >= 0
    assert not ((data.train_mask | data.val_mask | data.test_mask) & ~labeled).any()
    assert sorted(p for p in DATA_ROOT.rglob("*")) == before
    if name == "squirrel":
        assert data.num_edges == 396706  # symmetrised, as GNNPipe counts it


@needs_real_data
@pytest.mark.parametrize("name", ["cora", "citeseer"])
def test_planetoid_features_are_row_normalised_by_default_as_pyg_normalize_features(name: str) -> None:
    """The Planetoid YAMLs set dataset.normalize_features: each non-zero row sums to 1, equal to
    PyG's NormalizeFeatures; it is part of the cache key, and false restores the raw features."""
    from torch_geometric.transforms import NormalizeFeatures

    run = make_run(f"dataset={name}")
    assert run.dataset.normalize_features
    data = load_dataset(run.dataset, run.partition.cache_dir)
    unnormalized = make_run(f"dataset={name}", "dataset.normalize_features=false")
    raw = load_dataset(unnormalized.dataset, unnormalized.partition.cache_dir)
    sums = data.x.sum(dim=1)
    nonzero = raw.x.sum(dim=1) != 0
    assert not nonzero.all() or name == "cora"  # CiteSeer has featureless nodes, left at 0
    torch.testing.assert_close(sums[nonzero], torch.ones(int(nonzero.sum())))
    assert (sums[~nonzero] == 0).all()
    reference = NormalizeFeatures()(Data(x=raw.x.clone())).x
    torch.testing.assert_close(data.x, reference)
    assert dataset_key(run.dataset) != dataset_key(unnormalized.dataset)


@pytest.mark.parametrize("name,missing", [
    ("reddit", "reddit_data.npz"), ("flickr", "adj_full.npz"), ("yelp", "role.json"),
    ("amazon-products", "class_map.json"), ("ogbn-arxiv", "ogbn_arxiv"),
    ("ogbn-products", "ogbn_products"), ("ogbn-papers100m", "ogbn_papers100M"),
])
def test_unavailable_graphs_say_what_is_missing_and_where(name, missing, tmp_path) -> None:
    run = make_run(f"dataset={name}", f"dataset.root={tmp_path}", "dataset.download=false")
    with pytest.raises(DatasetUnavailable) as err:
        load_dataset(run.dataset, tmp_path / "cache")
    message = str(err.value)
    assert "\n" not in message and missing in message and str(tmp_path) in message


def _offline() -> bool:
    from urllib.parse import urlparse

    from torch_geometric.datasets import Reddit

    try:
        socket.getaddrinfo(urlparse(Reddit.url).hostname, 443)
    except OSError:
        return True
    return False


@pytest.mark.skipif(not _offline(), reason="the network is reachable: the download would run")
def test_remote_graph_download_failure_is_reported_as_missing_files(tmp_path) -> None:
    run = make_run("dataset=reddit", f"dataset.root={tmp_path}")
    with pytest.raises(DatasetUnavailable, match="reddit_graph.npz"):
        load_dataset(run.dataset, tmp_path / "cache")


def _fake_ogb_arxiv(root) -> None:
    """A 30-node graph laid out as OGB ships ogbn-arxiv (CSV raw files, the time split), without
    OGB's release marker, as a dataset copied from another machine is."""
    import gzip

    import numpy as np

    raw, split = root / "ogbn_arxiv" / "raw", root / "ogbn_arxiv" / "split" / "time"
    raw.mkdir(parents=True)
    split.mkdir(parents=True)
    rng = np.random.default_rng(0)

    def put(path, rows) -> None:
        with gzip.open(path, "wt") as f:
            f.write("\n".join(",".join(map(str, row)) for row in rows) + "\n")

    edges = rng.integers(0, 30, (60, 2))
    put(raw / "edge.csv.gz", edges)
    put(raw / "num-node-list.csv.gz", [[30]])
    put(raw / "num-edge-list.csv.gz", [[len(edges)]])
    put(raw / "node-feat.csv.gz", rng.normal(size=(30, 4)).round(3))
    put(raw / "node-label.csv.gz", rng.integers(0, 40, (30, 1)))
    put(raw / "node_year.csv.gz", rng.integers(2000, 2020, (30, 1)))
    for name, ids in (("train", range(20)), ("valid", range(20, 25)), ("test", range(25, 30))):
        put(split / f"{name}.csv.gz", [[i] for i in ids])


def test_an_ogb_dataset_copied_without_its_release_marker_loads_without_asking(tmp_path, monkeypatch) -> None:
    """OGB asks on stdin whether to delete a dataset folder without its release marker; a batch
    job has no stdin. The loader answers for it (the marker in its mirror) and any question OGB
    would still put fails in one line."""
    pytest.importorskip("ogb")
    _fake_ogb_arxiv(tmp_path / "root")

    def no_stdin(prompt: str = "") -> str:
        raise AssertionError(f"asked on stdin: {prompt}")

    monkeypatch.setattr("builtins.input", no_stdin)
    run = make_run("dataset=ogbn-arxiv", f"dataset.root={tmp_path / 'root'}", "dataset.download=false")
    data = load_dataset(run.dataset, tmp_path / "cache")
    assert data.num_nodes == 30 and data.num_classes == 40
    assert [int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)] == [20, 5, 5]
    assert not list((tmp_path / "root").rglob("RELEASE_v*.txt"))  # the user's folder is left as it was


def test_ogb_raw_files_are_the_files_ogb_reads() -> None:
    """Each homogeneous OGB node dataset's raw list holds what OGB's own ``raw_file_names`` names
    (and the labels its ``process`` reads); ogbn-papers100M ships binary files."""
    pytest.importorskip("ogb")
    import pandas as pd
    from ogb import nodeproppred
    from ogb.nodeproppred import PygNodePropPredDataset

    from gnntrain.data.registry import ogb_meta, ogb_raw_files

    master = pd.read_csv(f"{nodeproppred.__path__[0]}/master.csv", index_col=0, keep_default_na=False)
    for name in master.columns:
        meta = ogb_meta(name)
        if meta["is hetero"] == "True":
            continue
        probe = PygNodePropPredDataset.__new__(PygNodePropPredDataset)
        probe.meta_info, probe.binary, probe.is_hetero = meta, meta["binary"] == "True", False
        assert set(probe.raw_file_names) <= set(ogb_raw_files(meta)), name
    assert ogb_raw_files(ogb_meta("ogbn-papers100M")) == ["data.npz", "node-label.npz"]
    assert "node_year.csv.gz" in ogb_raw_files(ogb_meta("ogbn-arxiv"))
