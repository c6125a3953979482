"""``dataset.inductive``: the training graph is the subgraph the training nodes induce, and
rank 0 scores validation on the training and validation nodes' subgraph and test on the whole
graph (the authors' ``inductive_split``), whatever the number of workers."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.utils import subgraph

from conftest import make_run, train_records
from gnntrain.data.job import prepare_job_data
from gnntrain.data.graph_data import induced_subgraph
from gnntrain.data.registry import load_dataset
from gnntrain.errors import ConfigError
from gnntrain.models import build_model
from gnntrain.parallel.full_batch import EVAL_COUNTS
from gnntrain.parallel.inductive import WholeGraphScores

GRAPH = ["dataset.num_nodes=600", "dataset.avg_degree=6"]


def test_induced_subgraph_is_pygs() -> None:
    run = make_run(*GRAPH)
    data = load_dataset(run.dataset, run.partition.cache_dir)
    keep = data.train_mask | data.val_mask
    sub = induced_subgraph(data, keep)
    expected, _ = subgraph(keep, data.edge_index, relabel_nodes=True, num_nodes=data.num_nodes)
    assert torch.equal(sub.edge_index, expected)
    assert torch.equal(sub.x, data.x[keep]) and torch.equal(sub.y, data.y[keep])
    assert int(sub.val_mask.sum()) == int(data.val_mask.sum()) and not bool(sub.test_mask.any())


def test_scores_count_validation_on_seen_nodes_and_test_on_the_whole_graph() -> None:
    run = make_run(*GRAPH, "dataset.inductive=true")
    job = prepare_job_data(run, 2)
    whole = job.whole
    scores = WholeGraphScores(whole, torch.float32, torch.device("cpu"), multilabel=False)
    assert scores.graphs["val"].num_inner == int((whole.train_mask | whole.val_mask).sum())
    assert scores.graphs["test"].num_inner == whole.num_nodes
    counts = scores.counts(build_model(run.model, whole.num_features, whole.num_classes)).view(3, EVAL_COUNTS)
    assert counts[0].tolist() == [0, 0, 0, 0]
    assert counts[1, 1] == counts[1, 3] == int(whole.val_mask.sum())
    assert counts[2, 1] == counts[2, 3] == int(whole.test_mask.sum())


@pytest.mark.slow
def test_inductive_run_scores_the_same_on_one_and_two_workers(tmp_path) -> None:
    common = (*GRAPH, "dataset.inductive=true", "train.epochs=30", "train.dtype=float64", "model=sage")
    one = train_records(tmp_path / "one", *common, "cluster.world_size=1")
    two = train_records(tmp_path / "two", *common, "cluster.world_size=2")
    for key in ("loss", "train_acc", "val_acc", "test_acc"):
        assert [r[key] for r in two] == pytest.approx([r[key] for r in one], rel=1e-9), key
    assert [r["val_loss"] for r in two if r["val_loss"] is not None] == pytest.approx(
        [r["val_loss"] for r in one if r["val_loss"] is not None], rel=1e-9)
    assert two[-1]["test_acc"] > 0.7, "trained on the training nodes alone, it should score the rest well above chance (0.2)"


def test_inductive_refuses_part_files(tmp_path) -> None:
    run = make_run(*GRAPH, "dataset.inductive=true", f"partition.dir={tmp_path}")
    with pytest.raises(ConfigError, match="partition.dir"):
        prepare_job_data(run, 2, loads_parts=True)
