"""The installed ``gnntrain`` command: config discovery, one-line errors, the results
contract, multirun, worker failure, torchrun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import batch_for
from gnntrain.strategies import METHODS
from gnntrain.job.sweep import own_knobs_only
from gnntrain.engine.summary import RunSummary

BIN = Path(sys.executable).parent
GNNTRAIN = str(BIN / "gnntrain")
SMALL = ["dataset.num_nodes=600", "dataset.avg_degree=6"]
RECORD_KEYS = {"epoch", "loss", "train_acc", "val_acc", "test_acc", "epoch_time", "compute_time",
               "comm_time", "comm_total_time", "reduce_time", "comm_bytes", "comm_bytes_by_kind",
               "peak_mem_mb"}


def run(args: list[str], cwd: Path, timeout: float = 240, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, **kwargs)


def test_installed_command_finds_its_config_from_any_directory(tmp_path) -> None:
    assert Path(GNNTRAIN).is_file(), "gnntrain is not installed in this environment"
    res = run([GNNTRAIN, "--cfg", "job", "dataset=cora", "model=sage", "cluster.world_size=4"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "name: cora" in res.stdout and "name: sage" in res.stdout and "world_size: 4" in res.stdout
    help_text = run([GNNTRAIN, "--help"], tmp_path).stdout
    for group in ("dataset", "model", "strategy", "cluster"):
        assert f"{group}:" in help_text


@pytest.mark.parametrize("args,expected", [
    (["dataset=nope"], ["unknown dataset 'nope'", "cora", "synthetic"]),
    (["model=nope"], ["unknown model 'nope'", "gcn", "sage"]),
    (["strategy=nope"], ["unknown strategy 'nope'", "vanilla"]),
    (["cluster=nope"], ["unknown cluster 'nope'", "local", "gpu"]),
    (["train.epochz=3"], ["train.epochz", "epochs", "lr"]),
    (["model.hiden=3"], ["model.hiden", "hidden", "layers"]),
    (["train.epochs=abc"], ["train.epochs", "abc"]),
    (["partition.method=spectral"], ["partition.method", "metis", "random"]),
    (["wandb.mode=sometimes"], ["wandb.mode", "online", "offline", "disabled"]),
    (["model.layers=0"], ["model.layers=0", "in 1..1000"]),
    (["model=gat", "model.hidden=10"], ["model.heads=8", "model.hidden=10"]),
    (["model.norm=group"], ["model.norm", "none", "layer", "batch"]),
    (["model=gcnii", "model.norm=layer"], ["model.norm=layer", "none for gcnii"]),
    (["model=deepgcn", "model.heads=2"], ["model.heads", "learn_t"]),
    (["train.target=1.5"], ["train.target=1.5", "(0, 1]"]),
    (["train.dtype=float16"], ["train.dtype", "float32", "float64"]),
    (["train.dtype=bfloat16"], ["train.dtype=bfloat16", "cluster.device=cpu", "float32, float64"]),
    (["strategy.halo_dtype=bf16"], ["strategy.halo_dtype", "bfloat16", "float16"]),
    (["strategy=adaqp", "strategy.halo_dtype=bfloat16"], ["strategy.halo_dtype=bfloat16", "assign=fixed",
                                                          "bits=32"]),
    (["strategy=bns", "strategy.p=1.5"], ["strategy.p=1.5", "in [0, 1]"]),
    (["strategy=adaqp", "strategy.bits=3"], ["strategy.bits=3", "2, 4, 8, 32"]),
    (["strategy=adaqp", "strategy.assign=best"], ["strategy.assign", "adaptive", "uniform", "fixed"]),
    (["dataset.source=nope"], ["dataset.source", "pyg", "ogb", "file", "synthetic"]),
    (["dataset=cora", "dataset.pyg_class=Nope"], ["dataset.pyg_class=Nope", "Planetoid", "WikipediaNetwork"]),
    (["dataset=cora", "+dataset.args.nme=Cora"], ["dataset.args", "Planetoid", "nme"]),
    (["partition.parts=3"], ["partition.parts=3", "workers (2)"]),
    (["partition.method=random", "partition.objective=vol"], ["partition.objective=vol", "partition.method=metis"]),
    (["partition.objective=edges"], ["partition.objective", "cut", "vol"]),
    (["model.precompute_first=true", "strategy=minibatch"], ["model.precompute_first=true", "strategy=minibatch",
                                                             "vanilla"]),
    (["model.precompute_first=true", "model=gat"], ["model.precompute_first=true", "model=gat", "gcn or sage"]),
    (["dataset.inductive=true", "strategy=gnnpipe"], ["dataset.inductive=true", "strategy=gnnpipe", "vanilla"]),
    (["strategy=pipegcn", "strategy.smooth_start=one"], ["strategy.smooth_start", "zero", "first"]),
    (["cluster.device=tpu"], ["cluster.device", "cpu", "cuda"]),
    (["run_dir=/tmp/mine"], ["run_dir=/tmp/mine", "hydra.run.dir"]),
    (["cluster.backend=nccl"], ["cluster.backend=nccl", "cluster.device=cuda", "gloo"]),
    pytest.param(["cluster=gpu"], ["cluster.device=cuda", "no CUDA GPU", "cluster.device=cpu"],
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")),
    pytest.param(["cluster.device=cuda"], ["cluster.device=cuda", "no CUDA GPU", "cluster.device=cpu"],
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")),
    (["dataset=reddit", "dataset.download=false"], ["reddit_data.npz", "Reddit"]),
])
def test_bad_input_gives_one_line_error_and_nonzero_exit(args, expected, tmp_path, monkeypatch, capsys) -> None:
    """The command's own entry point, called in this process (no interpreter start-up per case)."""
    from gnntrain.commands.train import main

    monkeypatch.setattr(sys, "argv", [GNNTRAIN, *args, f"hydra.run.dir={tmp_path}/run"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gnntrain: error: "), lines
    for text in expected:
        assert text in lines[0]


def test_the_installed_command_exits_with_the_same_one_line_error(tmp_path) -> None:
    res = run([GNNTRAIN, "strategy=bns", "strategy.p=1.5", f"hydra.run.dir={tmp_path}/run"], tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == ["gnntrain: error: strategy.p=1.5 is invalid; it must be in [0, 1]"]


def _analytic_bytes(summary: RunSummary, in_dims: list[int], num_params: int, world: int) -> dict:
    """Halo rows x layer input width x 4 bytes, forward every layer, backward every layer but
    the first (input features need no gradient); plus the all-reduce payload of every rank."""
    halo_rows = sum(summary.partition["boundary_nodes"])
    return {
        "halo_fwd": sum(halo_rows * d * 4 for d in in_dims),
        "halo_bwd": sum(halo_rows * d * 4 for d in in_dims[1:]),
        "allreduce": world * num_params * 4,
    }


@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_main_job_writes_the_results_contract(model, tmp_path) -> None:
    run_dir = tmp_path / "run"
    res = run([GNNTRAIN, f"model={model}", "model.layers=3", "model.hidden=12", "train.epochs=5",
               "train.eval_every=2", *SMALL, f"hydra.run.dir={run_dir}"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "epoch 5/5" in res.stdout and "MiB/epoch" in res.stdout
    assert res.stdout.strip().splitlines()[-1].endswith(f"results in {run_dir}")
    assert not (run_dir / "cli.log").exists(), "no empty log is left"

    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3, 4, 5]
    for r in records:
        assert RECORD_KEYS <= r.keys()
        evaluated = r["epoch"] in (2, 4, 5)
        assert (r["val_acc"] is not None) == evaluated and (r["test_acc"] is not None) == evaluated
        assert r["epoch_time"] > 0 and r["peak_mem_mb"] > 0
        assert r["comm_time"] <= r["epoch_time"]

    summary = RunSummary.read(run_dir)
    for key in ("dataset", "model", "strategy", "world_size", "partition", "best_val", "test_at_best_val",
                "mean_epoch_time", "warmup_epochs_excluded", "mean_comm_bytes_per_epoch", "total_wall_time"):
        assert getattr(summary, key) is not None, key
    assert summary.warmup_epochs_excluded == 2 and summary.world_size == 2

    features, hidden, classes = 32, 12, 5  # the synthetic default's widths
    dims = [features, hidden, hidden]
    per_layer = (lambda i, o: i * o + o) if model == "gcn" else (lambda i, o: 2 * i * o + o)
    params = sum(per_layer(i, o) for i, o in zip(dims, dims[1:] + [classes]))
    expected = _analytic_bytes(summary, dims, params, 2)
    for r in records:
        assert r["comm_bytes_by_kind"] == expected
        assert r["comm_bytes"] == sum(expected.values())


@pytest.mark.slow
@pytest.mark.parametrize("name", list(METHODS))
def test_every_strategy_runs_through_the_command(name: str, tmp_path) -> None:
    """``gnntrain strategy=<name>`` for every registered strategy, on a small graph for 2 epochs:
    exit 0, both epochs' records with the contract's keys, a completed summary naming it."""
    run_dir = tmp_path / "run"
    res = run([GNNTRAIN, f"strategy={name}", "train.epochs=2", *SMALL, *batch_for(name, 360),
               f"hydra.run.dir={run_dir}"], tmp_path)
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2] and all(RECORD_KEYS <= r.keys() for r in records)
    summary = RunSummary.read(run_dir)
    assert (summary.status, summary.strategy, summary.epochs) == ("completed", name, 2)


@pytest.mark.slow
def test_patience_stops_every_worker_after_the_same_epoch_and_says_so(tmp_path) -> None:
    """With lr 0 the validation score never beats epoch 1's: patience 3 stops both workers after
    epoch 4; the metrics keep 4 epochs and summary.json the stop, its epoch and training time."""
    run_dir = tmp_path / "run"
    res = run([GNNTRAIN, "train.lr=0", "train.epochs=50", "train.patience=3", *SMALL, f"hydra.run.dir={run_dir}"],
              tmp_path)
    assert res.returncode == 0, res.stderr
    assert "early stop after epoch 4: no better validation score for 3 epochs (best at epoch 1)" in res.stdout
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3, 4]
    summary = RunSummary.read(run_dir)
    assert summary.status == "completed" and summary.epochs == 4 and summary.best_epoch == 1
    stop = summary.early_stop
    assert (stop["rule"], stop["epoch"], stop["best_epoch"]) == ("patience", 4, 1)
    assert stop["train_time"] == pytest.approx(sum(r["epoch_time"] for r in records))


def test_target_stops_at_the_first_epoch_reaching_it(tmp_path) -> None:
    """train.target 0.5: the run stops after the first epoch whose validation score is >= 0.5
    (every earlier one below it), and summary.json records the rule, epoch and training time."""
    run_dir = tmp_path / "run"
    res = run([GNNTRAIN, "train.epochs=100", "train.target=0.5", *SMALL, f"hydra.run.dir={run_dir}"], tmp_path)
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["val_acc"] >= 0.5 and all(r["val_acc"] < 0.5 for r in records[:-1])
    stop = RunSummary.read(run_dir).early_stop
    assert (stop["rule"], stop["threshold"], stop["epoch"]) == ("target", 0.5, len(records))
    assert stop["train_time"] == pytest.approx(sum(r["epoch_time"] for r in records))
    assert f"stop after epoch {len(records)}: validation score reached the target 0.5" in res.stdout


def test_the_users_pipeline_example_runs_out_of_the_box(tmp_path) -> None:
    """``gnntrain strategy=gnnpipe model=gcnii`` on the default graph and cluster (2 stages of
    GCNII's 64 layers, 8 chunks), shortened to 2 epochs."""
    run_dir = tmp_path / "run"
    res = run([GNNTRAIN, "strategy=gnnpipe", "model=gcnii", "train.epochs=2", f"hydra.run.dir={run_dir}"], tmp_path)
    assert res.returncode == 0, res.stderr
    assert "mesh pp=2 x gp=1" in res.stdout
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    nodes, hidden, floats = 2000, 64, 4
    per_direction = 2 * nodes * hidden * floats  # one stage cut; h and GCNII's h0
    assert all(r["comm_bytes_by_kind"]["pipe_fwd"] == r["comm_bytes_by_kind"]["pipe_bwd"] == per_direction
               for r in records)
    assert all(0 <= r["strategy_metrics"]["bubble_share"] < 1 for r in records)


@pytest.mark.slow
def test_hopgnn_runs_out_of_the_box_and_refuses_a_bad_fanout(tmp_path) -> None:
    """``gnntrain strategy=hopgnn`` on the default graph and cluster, shortened to 2 epochs: the
    models migrate every iteration, the features fetched are reported by kind; epoch 1 runs one
    time step per worker, epoch 2 examines the merge counts."""
    run_dir = tmp_path / "run"
    res = run([GNNTRAIN, "strategy=hopgnn", "train.epochs=2", f"hydra.run.dir={run_dir}"], tmp_path)
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(r["comm_bytes_by_kind"]["model_migrate"] > 0 and r["comm_bytes_by_kind"]["feat_fetch"] > 0
               for r in records)
    assert records[0]["strategy_metrics"]["time_steps"] == 2
    assert [r["strategy_metrics"]["examination"] for r in records] == [0, 1]
    bad = run([GNNTRAIN, "strategy=hopgnn", "strategy.fanout=[10,10,10]"], tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].endswith(
        "strategy.fanout=[10, 10, 10] has 3 entries for model.layers=2; valid: one int, or a list of 2 ints "
        "(input layer first)")


@pytest.mark.slow
def test_multirun_runs_each_job_to_completion(tmp_path) -> None:
    sweep = tmp_path / "sweep"
    res = run([GNNTRAIN, "-m", "dataset.num_nodes=300,400", "model=gcn,sage", "train.epochs=2",
               f"hydra.sweep.dir={sweep}"], tmp_path, timeout=400)
    assert res.returncode == 0, res.stderr
    summaries = [RunSummary.read(sweep / str(i)) for i in range(4)]
    assert sorted((s.num_nodes, s.model) for s in summaries) == [
        (300, "gcn"), (300, "sage"), (400, "gcn"), (400, "sage")]


def test_a_sweep_keeps_each_strategy_and_model_to_its_own_knobs() -> None:
    """``strategy=vanilla,bns strategy.p=0.1,0.5 model=gcn,gat model.heads=2``: bns's ``p`` and
    GAT's ``heads`` reach only their jobs; jobs left alike run once, in the order of the product."""
    keys = {"vanilla": {"name", "halo_dtype"}, "bns": {"name", "halo_dtype", "p"}, "gcn": {"name", "hidden"},
            "gat": {"name", "hidden", "heads"}}

    def section_keys(job: list[str], section: str) -> set[str]:
        return keys[dict(o.split("=") for o in job)[section]]

    product = [[f"strategy={s}", f"strategy.p={p}", f"model={m}", "model.heads=2", "seed=0"]
               for s in ("vanilla", "bns") for p in ("0.1", "0.5") for m in ("gcn", "gat")]
    assert own_knobs_only(product, section_keys) == [
        ["strategy=vanilla", "model=gcn", "seed=0"],
        ["strategy=vanilla", "model=gat", "model.heads=2", "seed=0"],
        ["strategy=bns", "strategy.p=0.1", "model=gcn", "seed=0"],
        ["strategy=bns", "strategy.p=0.1", "model=gat", "model.heads=2", "seed=0"],
        ["strategy=bns", "strategy.p=0.5", "model=gcn", "seed=0"],
        ["strategy=bns", "strategy.p=0.5", "model=gat", "model.heads=2", "seed=0"]]
    misspelt = [["strategy=vanilla", "strategy.pp=0.1", "model=gcn"], ["strategy=bns", "strategy.pp=0.1", "model=gcn"]]
    assert own_knobs_only(misspelt, section_keys) == misspelt, "left for the checks to refuse"


def test_dead_worker_ends_the_job_promptly_and_keeps_completed_epochs(tmp_path) -> None:
    run_dir = tmp_path / "run"
    start = time.monotonic()
    proc = subprocess.Popen([GNNTRAIN, "fault.rank=1", "fault.epoch=3", "train.epochs=50", *SMALL,
                             f"hydra.run.dir={run_dir}"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert time.monotonic() - start < 120
    assert proc.returncode == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "worker rank 1" in lines[0], stderr
    epochs = [json.loads(line)["epoch"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert epochs == [1, 2]
    assert _live_processes_in_group(proc.pid, wait_s=10) == []


def live_processes(*, parent: int | None = None, group: int | None = None, ancestor: int | None = None) -> list[int]:
    """Non-zombie processes with this parent pid, in this process group, or descending from
    ``ancestor`` (a launcher's workers are the children of its fork server) (from /proc)."""
    table: dict[int, tuple[str, int, int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, ppid, pgrp = stat.read_text().rsplit(")", 1)[1].split()[:3]
        except OSError:
            continue
        table[int(stat.parent.name)] = (state, int(ppid), int(pgrp))

    def descends(pid: int) -> bool:
        while pid in table and pid != ancestor:
            pid = table[pid][1]
        return ancestor is not None and pid == ancestor

    return [pid for pid, (state, ppid, pgrp) in table.items()
            if state != "Z" and (ppid == parent or pgrp == group or (pid != ancestor and descends(pid)))]


def wait_for_epochs(metrics: Path, proc: subprocess.Popen, log: Path, epochs: int = 3, timeout_s: float = 120) -> None:
    """Wait until the run's ``metrics`` holds ``epochs`` records; fail with the text of ``log``
    where ``proc`` ends first or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not (metrics.exists() and len(metrics.read_text().splitlines()) >= epochs):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.05)


def _live_processes_in_group(pgid: int, wait_s: float) -> list[int]:
    """Non-zombie processes of a process group, polled until none are left or time is up."""
    deadline = time.monotonic() + wait_s
    while True:
        live = live_processes(group=pgid)
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.2)


@pytest.mark.slow
def test_joins_a_torchrun_world_for_each_job_of_a_sweep(tmp_path) -> None:
    """Under torchrun the process group is created and destroyed per job, in the same processes."""
    sweep = tmp_path / "sweep"
    res = run([str(BIN / "torchrun"), "--standalone", "--nproc-per-node=2", "--no-python", GNNTRAIN, "-m",
               "train.epochs=3", "dataset.num_nodes=300,400", f"hydra.sweep.dir={sweep}"], tmp_path)
    assert res.returncode == 0, res.stderr
    summaries = [RunSummary.read(sweep / str(i)) for i in range(2)]
    assert [(s.num_nodes, s.world_size, s.epochs) for s in summaries] == [(300, 2, 3), (400, 2, 3)]


@pytest.mark.slow
def test_offline_wandb_run_is_written_under_the_run_dir(tmp_path) -> None:
    run_dir = tmp_path / "run"
    env = dict(os.environ, WANDB_MODE="offline")
    res = run([GNNTRAIN, "train.epochs=2", *SMALL, f"hydra.run.dir={run_dir}"], tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert "wandb sync" in res.stdout + res.stderr
