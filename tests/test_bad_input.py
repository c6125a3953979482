"""Bad input is one line before any worker starts: a dataset's arrays that are not a graph, and
config values outside their ranges."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import torch

from conftest import make_cfg
from gnntrain.config.schema import DatasetConfig
from gnntrain.data.graph_checks import BadDataset
from gnntrain.data.registry import load_file
from gnntrain.data.synthetic import generate
from gnntrain.errors import ConfigError, GnntrainError

GNNTRAIN = str(Path(sys.executable).with_name("gnntrain"))
N = 200


def graph() -> dict[str, torch.Tensor]:
    g = generate(N, 6, 4, 8, homophily=0.8, graph_seed=3)
    return {"edge_index": g.edge_index.clone(), "x": g.x.clone(), "y": g.y.clone(), "train_mask": g.train_mask.clone(),
            "val_mask": g.val_mask.clone(), "test_mask": g.test_mask.clone()}


def with_(key: str, change: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[dict], None]:
    def apply(arrays: dict) -> None:
        arrays[key] = change(arrays[key])
    return apply


def set_at(key: str, index: tuple, value: float) -> Callable[[dict], None]:
    def apply(arrays: dict) -> None:
        arrays[key][index] = value
    return apply


MALFORMED = {
    "edge id out of range": (set_at("edge_index", (0, 0), N), f"edge_index holds node ids 0..{N}; valid: 0..{N - 1}"),
    "negative edge id": (set_at("edge_index", (1, 3), -2), f"edge_index holds node ids -2..{N - 1}; valid: 0..{N - 1}"),
    "3-row edge_index": (with_("edge_index", lambda e: torch.cat([e, e[:1]])), "edge_index has shape [3, "),
    "float edge ids": (with_("edge_index", lambda e: e.double()), "edge_index is torch.float64; valid: integer node ids"),
    "1-D x": (with_("x", lambda x: x[:, 0].contiguous()), f"x has shape [{N}]; valid: [N, F] node features"),
    "short y": (with_("y", lambda y: y[:-5]), f"y has shape [{N - 5}]; valid: [{N}] class ids"),
    "mask of the wrong length": (with_("val_mask", lambda m: m[:-1]), f"val_mask has shape [{N - 1}]; valid: [{N}]"),
    "NaN feature": (set_at("x", (4, 2), float("nan")), "x holds 1 values that are NaN or infinite"),
    "no training node": (with_("train_mask", torch.zeros_like), "no labeled node is in the training split"),
    "label 99": (set_at("y", (7,), 99), "y holds class ids 0..99 but no node has class 4, 5, 6, 7, 8 ..."),
    "label -7": (set_at("y", (7,), -7), "y holds class ids -7..3; valid: 0..3, or -1 for an unlabeled node"),
    "float labels": (with_("y", lambda y: y.float()), "y is torch.float32; valid: integer class ids"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_dataset_file_is_one_line_naming_what_is_wrong(case: str, tmp_path) -> None:
    change, expected = MALFORMED[case]
    arrays = graph()
    change(arrays)
    torch.save(arrays, tmp_path / "g.pt")
    with pytest.raises(BadDataset) as refused:
        load_file(DatasetConfig(name="mine", source="file", file=str(tmp_path / "g.pt"),
                                root=str(tmp_path)), tmp_path)
    line = str(refused.value)
    assert line.startswith("dataset 'mine': ") and expected in line and "\n" not in line, line


@pytest.mark.parametrize("key", ["x", "edge_index"])
def test_a_dataset_file_of_sparse_tensors_is_one_line(key: str, tmp_path) -> None:
    arrays = graph()
    arrays[key] = arrays[key].to_sparse()
    torch.save(arrays, tmp_path / "g.pt")
    with pytest.raises(GnntrainError, match=rf"^dataset 'mine': \S+g.pt holds {key} \(torch.sparse_coo\); valid: dense "
                                            r"arrays \(tensor.to_dense\(\)\)$"):
        load_file(DatasetConfig(name="mine", source="file", file=str(tmp_path / "g.pt"), root=str(tmp_path)), tmp_path)


def test_the_cli_refuses_a_malformed_dataset_before_any_worker_starts(tmp_path) -> None:
    arrays = {key: value.numpy() for key, value in graph().items()}
    arrays["edge_index"][0, 0] = N + 3
    np.savez(tmp_path / "g.npz", **arrays)
    (tmp_path / "conf" / "dataset").mkdir(parents=True)
    (tmp_path / "conf" / "dataset" / "mine.yaml").write_text(
        f"defaults:\n  - /schema/dataset/dataset@_here_\n  - _self_\nname: mine\nsource: file\nfile: {tmp_path / 'g.npz'}\n")
    res = subprocess.run([GNNTRAIN, "--config-dir", str(tmp_path / "conf"), "dataset=mine",
                          f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "WANDB_MODE": "disabled"})
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"gnntrain: error: dataset 'mine': edge_index holds node ids 0..{N + 3}; valid: 0..{N - 1} (x has {N} rows)"]
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


@pytest.mark.parametrize("overrides, line", [
    (["dataset.homophily=2"], "dataset.homophily=2.0 is invalid; it must be in [0, 1]"),
    (["dataset.train_frac=0.9", "dataset.val_frac=0.5"],
     "dataset.val_frac=0.5 is invalid; it must be in [0, 1 - dataset.train_frac = 0.1]"),
    (["dataset.num_classes=1"], "dataset.num_classes=1 is invalid; it must be >= 2"),
    (["dataset.num_features=0"], "dataset.num_features=0 is invalid; it must be >= 1"),
    (["dataset.avg_degree=100000"], "dataset.avg_degree=100000.0 is invalid; it must be in (0, dataset.num_nodes - 1 "
                                    "= 1999]"),
    (["cluster.threads_per_worker=-1"],
     "cluster.threads_per_worker=-1 is invalid; it must be >= 0 (0: cores / local workers; one per rank under the "
     "virtual clock on a CPU)"),
    (["train.lr=inf"], "train.lr=inf is invalid; it must be finite and >= 0"),
    (["cluster.timeout_s=0"], "cluster.timeout_s=0 is invalid; it must be in 1..2147483 seconds (torch's timeouts "
                              "are 32-bit milliseconds)"),
    (["cluster.master_port=70000"], "cluster.master_port=70000 is invalid; it must be in 1..65535, or 0 for any free port"),
    (["fault.rank=7", "fault.epoch=1"], "fault.rank=7 is invalid; it must be a rank in 0..1, or null"),
    (["dataset.name=../../x"], "dataset.name='../../x' is invalid; it must be a plain name of letters, digits and "
                               ". _ + - (at most 128, starting with a letter or digit; no path)"),
    (["dataset.name=.hidden"], "dataset.name='.hidden' is invalid; it must be a plain name of letters, digits and "
                               ". _ + - (at most 128, starting with a letter or digit; no path)"),
    (["dataset.folder=/tmp"], "dataset.folder='/tmp' is invalid; it must be a relative folder under dataset.root, on "
                              "one line (empty: the root)"),
    (["dataset.folder=a/../../b"], "dataset.folder='a/../../b' is invalid; it must be a relative folder under "
                                   "dataset.root, on one line (empty: the root)"),
    (["dataset.root="], "dataset.root='' is invalid; it must be a non-empty path on one line"),
    (["partition.cache_dir="], "partition.cache_dir='' is invalid; it must be a non-empty path on one line"),
    (["seed=9223372036854775808"], "seed=9223372036854775808 is invalid; it must be in 0..2^63 - 1"),
    (["dataset.graph_seed=-1"], "dataset.graph_seed=-1 is invalid; it must be in 0..2^63 - 1"),
    (["cluster.timeout_s=100000000000"], "cluster.timeout_s=100000000000 is invalid; it must be in 1..2147483 "
                                         "seconds (torch's timeouts are 32-bit milliseconds)"),
    (["cluster.master_addr="], "cluster.master_addr='' is invalid; it must be an address of this machine "
                               "(127.0.0.1: this machine alone)"),
    (["network=eth10g", "network.latency_us=inf"], "network.latency_us=inf is invalid; it must be finite and >= 0"),
    (["network=eth10g", "network.bandwidth_gbps=nan"],
     "network.bandwidth_gbps=nan is invalid; it must be finite and > 0"),
    (["dataset.degree_exponent=1"], "dataset.degree_exponent=1.0 is invalid; it must be finite and > 1 (a Pareto "
                                    "tail exponent: real graphs' degrees have 2-3)"),
    (["dataset.degree_exponent=-inf"], "dataset.degree_exponent=-inf is invalid; it must be finite and > 1 (a "
                                       "Pareto tail exponent: real graphs' degrees have 2-3)"),
    (["dataset.feature_noise=inf"], "dataset.feature_noise=inf is invalid; it must be finite and >= 0"),
    (["train.weight_decay=-1"], "train.weight_decay=-1.0 is invalid; it must be finite and >= 0"),
    (["train.weight_decay=nan"], "train.weight_decay=nan is invalid; it must be finite and >= 0"),
    (["model=gcnii", "model.theta=-1"], "model.theta=-1.0 is invalid; it must be finite and >= 0 (beta_l = "
                                        "log(theta / l + 1))"),
    (["model=gcnii", "model.alpha=nan"], "model.alpha=nan is invalid; it must be finite and in [0, 1] (the initial "
                                         "residual's weight)"),
    (["model=deepgcn", "model.t=inf"], "model.t=inf is invalid; it must be finite"),
    (["model=gcnii", "model.decay_groups=[{params:[convs.*],weight_decay:-0.5}]"],
     "model.decay_groups[0].weight_decay=-0.5 is invalid; it must be finite and >= 0"),
    (["fault.rank=0", "fault.epoch=0"], "fault.epoch=0 is invalid; it must be an epoch >= 1, or null"),
    (["model.layers=100000"], "model.layers=100000 is invalid; it must be in 1..1000 (the deepest of the papers: "
                              "DeeperGCN's 112, GCNII's 64)"),
    (["+foo=1"], "foo is not a gnntrain key (added with +foo=...?); valid: dataset, model, strategy, cluster, "
                 "network, partition, train, wandb, fault, seed, run_dir, each with the keys of its section"),
])
def test_a_value_out_of_its_range_is_one_line(overrides: list[str], line: str) -> None:
    with pytest.raises(ConfigError, match="^" + re.escape(line) + "$"):
        make_cfg(*overrides)


def test_an_empty_run_dir_is_refused_before_anything_is_written(tmp_path) -> None:
    """An empty ``hydra.run.dir`` would be wherever the job starts."""
    done = subprocess.run([GNNTRAIN, "hydra.run.dir=", "dataset.num_nodes=300", "train.epochs=1"], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "WANDB_MODE": "disabled"}, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == "gnntrain: error: hydra.run.dir='' is invalid; it must be a non-empty path on one line"
    assert list(tmp_path.iterdir()) == []


def test_a_refused_job_leaves_no_run_dir_behind(tmp_path) -> None:
    """Refused before it trained, a job removes the run dir Hydra made for it (and Hydra's empty
    ``outputs/<date>`` above it); another run's folder beside it stays."""
    (tmp_path / "outputs" / "earlier").mkdir(parents=True)
    done = subprocess.run([GNNTRAIN, "dataset.source=file"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "WANDB_MODE": "disabled"}, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert [p.relative_to(tmp_path).as_posix() for p in sorted(tmp_path.rglob("*"))] == ["outputs", "outputs/earlier"]


def test_cluster_slurm_without_a_sweep_is_refused_not_run_here(tmp_path) -> None:
    done = subprocess.run([GNNTRAIN, "cluster=slurm", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "WANDB_MODE": "disabled"}, timeout=120)
    run_dir = tmp_path / "run"  # Hydra makes the dir before gnntrain runs; nothing is written there
    assert done.returncode == 2 and (not run_dir.exists() or list(run_dir.iterdir()) == [])
    assert done.stderr.strip() == ("gnntrain: error: cluster=slurm submits through Hydra's submitit launcher, which "
                                   "only a sweep uses: without -m the job would run here, on this machine; valid: "
                                   "gnntrain -m cluster=slurm ... (docs/clusters.md)")
