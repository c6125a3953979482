"""The kernel-shaped network (``network.mode=kernel``, :mod:`gnntrain.comm.namespaces`): ranks in
network namespaces over shaped virtual links, trained exactly as over the plain transport, and no
namespace left however the job ends. The tests that make namespaces need root and iproute2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import make_run, train_records
from gnntrain.comm import namespaces
from gnntrain.config.schema import NetworkConfig
from gnntrain.errors import ConfigError
from gnntrain.job.validation import validate
from test_cli import GNNTRAIN, SMALL, _live_processes_in_group, run, wait_for_epochs
from test_torchrun import _local, _losses, _two_nodes
from gnntrain.engine.summary import RunSummary

def _why_no_namespaces() -> str | None:
    """Why this machine cannot make a job's namespaces (a shaped, lossy link of one node is
    tried), or None where it can."""
    if os.geteuid() != 0 or not all(shutil.which(p) for p in namespaces.PROGRAMS):
        return f"needs root and util-linux/iproute2 ({', '.join(namespaces.PROGRAMS)})"
    try:
        with namespaces.KernelNetwork(NetworkConfig(mode="kernel", bandwidth_gbps=1.0, loss=0.01), 1):
            return None
    except ConfigError as exc:
        return str(exc)


WHY_NOT = _why_no_namespaces()
needs_namespaces = pytest.mark.skipif(WHY_NOT is not None, reason=f"network.mode=kernel: {WHY_NOT}")
EXACT = ("train.dtype=float64", "train.epochs=3", "model.dropout=0.5", *SMALL)


def network_namespaces() -> set[str]:
    """The network namespaces some process is in."""
    found = set()
    for ns in Path("/proc").glob("[0-9]*/ns/net"):
        try:
            found.add(os.readlink(ns))
        except OSError:
            pass
    return found


def _gone(before: set[str], wait_s: float = 10.0) -> set[str]:
    """The namespaces beyond ``before`` still there after up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while (left := network_namespaces() - before) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.mark.parametrize("overrides, message", [
    (["network.loss=0.01"], "network.loss=0.01 is invalid; it must be in [0, 1) with network.mode=kernel"),
    (["network.mode=kernel", "network.gpus_per_node=2", "network.intra_bandwidth_gbps=10"],
     "network.intra_bandwidth_gbps=10.0 is invalid; it must be null"),
    (["network.mode=kernel", "network.bandwidth_gbps=1", "network.calibrate_share=0.5"],
     "network.calibrate_share=0.5 is invalid; it must be null without a modelled link"),
])
def test_what_the_kernel_links_cannot_do_is_refused_in_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        make_run(*overrides).network.validate()


def test_only_a_kernel_link_can_go_down() -> None:
    with pytest.raises(ConfigError, match="fault.link_down=True is invalid; it must be false without network.mode=kernel"):
        validate(make_run("fault.rank=1", "fault.epoch=2", "fault.link_down=true"))


def test_a_missing_program_is_named(tmp_path: Path) -> None:
    res = run([sys.executable, GNNTRAIN, "network.mode=kernel", "train.epochs=1", *SMALL,
               f"hydra.run.dir={tmp_path / 'run'}"], tmp_path, env=dict(os.environ, PATH=str(tmp_path),
                                                                       WANDB_MODE="disabled"))
    assert res.returncode == 2
    assert ("network.mode=kernel needs unshare, nsenter, ip, tc (util-linux, iproute2), and unshare, nsenter, ip, tc "
            "not on PATH") in res.stderr


def test_the_loss_filter_matches_the_share_of_random_numbers() -> None:
    program = namespaces.loss_filter(0.25).split(",")
    assert program[0] == "4" and program[2] == f"53 1 0 {2**30}"


@needs_namespaces
@pytest.mark.slow
def test_ranks_on_lossy_kernel_links_train_exactly_as_on_the_plain_transport(tmp_path: Path) -> None:
    """Two nodes over 0.5 Gbit/s links that drop 1% of their packets: TCP resends them, and the
    losses, accuracies and bytes equal the plain transport's; the namespaces go with the job."""
    before = network_namespaces()
    plain = train_records(tmp_path / "plain", *EXACT)
    kernel = train_records(tmp_path / "kernel", *EXACT, "network.mode=kernel", "network.bandwidth_gbps=0.5",
                           "network.loss=0.01")
    for a, b in zip(plain, kernel, strict=True):
        assert (a["loss"], a["val_acc"], a["comm_bytes"]) == (b["loss"], b["val_acc"], b["comm_bytes"])
    summary = RunSummary.read(tmp_path / "kernel")
    assert summary.network == {"modelled": False, "kernel": True, "preset": "none", "bandwidth_gbps": 0.5,
                                  "latency_us": 0.0, "loss": 0.01, "gpus_per_node": None}
    assert not _gone(before)


@needs_namespaces
@pytest.mark.slow
def test_two_ranks_of_a_node_share_its_namespace(tmp_path: Path) -> None:
    before = network_namespaces()
    plain = train_records(tmp_path / "plain", *EXACT, "cluster.world_size=4")
    kernel = train_records(tmp_path / "kernel", *EXACT, "cluster.world_size=4", "network.mode=kernel",
                           "network.bandwidth_gbps=1", "network.gpus_per_node=2")
    assert [r["loss"] for r in plain] == [r["loss"] for r in kernel]
    assert not _gone(before)


@needs_namespaces
@pytest.mark.slow
def test_a_killed_launcher_leaves_no_namespace_and_no_process(tmp_path: Path) -> None:
    """SIGKILL to the launcher mid-epoch: its namespaces' holders die with it, the workers see the
    stop and leave (their links stay until the last of them does), and nothing is left."""
    before = network_namespaces()
    run_dir = tmp_path / "run"
    with (tmp_path / "stderr").open("w") as stderr:
        proc = subprocess.Popen([GNNTRAIN, "train.epochs=100000", "network.mode=kernel", "network.bandwidth_gbps=0.2",
                                 "network.loss=0.01", "dataset.num_nodes=5000", f"hydra.run.dir={run_dir}"],
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                                env=dict(os.environ, WANDB_MODE="disabled"))
    metrics = run_dir / "metrics.jsonl"
    wait_for_epochs(metrics, proc, tmp_path / "stderr")
    assert len(network_namespaces() - before) == 3  # the switch and two nodes
    proc.kill()
    proc.wait()
    left = _live_processes_in_group(proc.pid, wait_s=10)
    assert left == [] and not _gone(before)
    assert len(metrics.read_text().splitlines()) >= 3


@needs_namespaces
@pytest.mark.slow
def test_two_torchrun_nodes_with_their_own_network_stacks_train_as_the_local_spawn(tmp_path: Path) -> None:
    """Each torchrun node (two workers) in a namespace of its own, over a 1 Gbit/s virtual link:
    the rendezvous and gloo cross it (node 1 reaches node 0 only at 10.0.0.1), and the losses
    are the local 4-worker spawn's."""
    before = network_namespaces()
    overrides = ["train.epochs=5"]
    expected = _local(tmp_path, 4, *overrides)
    run_dir = tmp_path / "two_stacks"
    with namespaces.KernelNetwork(NetworkConfig(mode="kernel", bandwidth_gbps=1.0), 2) as network:
        _two_nodes(tmp_path, *overrides, f"hydra.run.dir={run_dir}", network=network)
    assert _losses(run_dir) == expected
    assert not _gone(before)


@needs_namespaces
@pytest.mark.slow
def test_a_link_that_goes_down_ends_the_job_in_time_and_resume_finishes_it(tmp_path: Path) -> None:
    """Rank 1's node loses its link at the start of epoch 4 (``fault.link_down``): every process
    is gone within ``cluster.timeout_s`` + 10 s, one line names the node and its rank, epochs 1-3
    and their checkpoints stay, and ``train.resume=true`` over a working link ends with the
    losses of an uninterrupted run."""
    common = ["train.dtype=float64", "model.dropout=0.5", *SMALL, "train.epochs=6", "train.checkpoint_every=1",
              "network.mode=kernel", "network.bandwidth_gbps=1", "cluster.timeout_s=5"]
    uninterrupted = train_records(tmp_path / "whole", *common)
    before = network_namespaces()
    run_dir = tmp_path / "run"
    with (tmp_path / "stderr").open("w") as stderr:
        proc = subprocess.Popen([GNNTRAIN, *common, "fault.rank=1", "fault.epoch=4", "fault.link_down=true",
                                 f"hydra.run.dir={run_dir}"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr,
                                start_new_session=True, env=dict(os.environ, WANDB_MODE="disabled"))
    wait_for_epochs(run_dir / "metrics.jsonl", proc, tmp_path / "stderr")
    down = time.monotonic()
    assert proc.wait(timeout=60) != 0
    assert time.monotonic() - down < 5 + 10
    assert _live_processes_in_group(proc.pid, wait_s=2) == [] and not _gone(before, wait_s=2)
    error = [line for line in (tmp_path / "stderr").read_text().splitlines() if line.startswith("gnntrain: error:")]
    assert error and error[0].startswith("gnntrain: error: node 1 (10.0.0.2, rank(s) 1) became unreachable"), error
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 3
    assert (run_dir / "checkpoints" / "epoch_000003").is_dir()
    resumed = train_records(run_dir, *common, "train.resume=true")
    assert [r["loss"] for r in resumed] == [r["loss"] for r in uninterrupted]
