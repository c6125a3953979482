"""The same command under torchrun: elastic restarts resume from the last checkpoint, and two
nodes (two torchrun invocations on loopback, or each in a network namespace of its own,
:mod:`test_kernel_network`) train exactly as the local spawn does."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gnntrain.comm import namespaces
from gnntrain.comm.namespaces import KernelNetwork
from test_cli import live_processes, wait_for_epochs
from gnntrain.engine.summary import RunSummary

BIN = Path(sys.executable).parent
GNNTRAIN = str(BIN / "gnntrain")
TORCHRUN = str(BIN / "torchrun")
COMMON = ["dataset.num_nodes=500", "dataset.avg_degree=6", "train.dtype=float64", "model.dropout=0.5",
          "model.hidden=16"]

pytestmark = pytest.mark.slow


def _losses(run_dir: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _local(tmp_path: Path, world_size: int, *overrides: str) -> list[float]:
    run_dir = tmp_path / f"local{world_size}"
    res = subprocess.run([GNNTRAIN, *COMMON, *overrides, f"cluster.world_size={world_size}",
                          f"hydra.run.dir={run_dir}"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return _losses(run_dir)


def test_torchrun_restarts_the_group_after_a_worker_is_killed_and_the_run_resumes(tmp_path) -> None:
    """SIGKILL to one worker mid-training: torchrun (``--max-restarts=1``) restarts both, they
    resume from the last checkpoint (``train.resume=true``) and finish with the losses of an
    uninterrupted run, each epoch once in metrics.jsonl. torchrun runs with
    ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``, as docs/clusters.md says: with the store shared, a
    restarted group may read the previous group's addresses and fail to connect."""
    overrides = ["train.epochs=300", "train.checkpoint_every=20"]
    expected = _local(tmp_path, 2, *overrides)
    run_dir = tmp_path / "elastic"
    log = open(tmp_path / "torchrun.log", "w")
    agent = subprocess.Popen([TORCHRUN, "--standalone", "--nproc-per-node=2", "--max-restarts=1", "--no-python",
                              GNNTRAIN, *COMMON, *overrides, "train.resume=true", f"hydra.run.dir={run_dir}"],
                             cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                             env=dict(os.environ, TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1"))
    wait_for_epochs(run_dir / "metrics.jsonl", agent, tmp_path / "torchrun.log", epochs=50, timeout_s=240)
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in (tmp_path / "torchrun.log").read_text()
    killed = max(live_processes(parent=agent.pid))
    os.kill(killed, signal.SIGKILL)
    assert agent.wait(timeout=240) == 0, (tmp_path / "torchrun.log").read_text()
    assert killed not in live_processes(parent=agent.pid)
    assert _losses(run_dir) == expected
    summary = RunSummary.read(run_dir)
    assert summary.status == "completed" and summary.epochs == 300


def test_two_nodes_on_loopback_train_as_the_local_spawn(tmp_path) -> None:
    """Two torchrun invocations (``--nnodes=2 --node-rank=0|1``, two workers each, one
    rendezvous endpoint) give the losses of the local 4-worker spawn."""
    overrides = ["train.epochs=5"]
    expected = _local(tmp_path, 4, *overrides)
    run_dir = tmp_path / "two_nodes"
    _two_nodes(tmp_path, *overrides, f"hydra.run.dir={run_dir}")
    assert _losses(run_dir) == expected
    assert RunSummary.read(run_dir).world_size == 4


def _two_nodes(tmp_path: Path, *overrides: str, caches: tuple[str, str] | None = None,
               network: KernelNetwork | None = None) -> list[str]:
    """Run two torchrun "nodes" (two workers each) on loopback, or each in its own network
    namespace of ``network`` (rendezvous at node 0's address over the virtual link); each node's
    output, after checking both exited 0. ``caches``: each node's own ``GNNTRAIN_CACHE``."""
    if network is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            endpoint, place, link = f"127.0.0.1:{s.getsockname()[1]}", lambda rank: [], {}
    else:
        endpoint, link = f"{namespaces.node_address(0)}:29500", {"GLOO_SOCKET_IFNAME": namespaces.NODE_INTERFACE}
        place = lambda rank: ["nsenter", f"--net={network.node(rank)}"]  # noqa: E731
    nodes = [subprocess.Popen([*place(rank), TORCHRUN, "--nnodes=2", f"--node-rank={rank}", "--nproc-per-node=2",
                               f"--rdzv-endpoint={endpoint}", "--no-python", GNNTRAIN, *COMMON, *overrides],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=dict(os.environ, **link, **({"GNNTRAIN_CACHE": caches[rank]} if caches else {})))
             for rank in (0, 1)]
    outputs = [node.communicate(timeout=300)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    return outputs


def _phase_lines(output: str, name: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("gnntrain (rank ") and f": {name}" in line]


def test_two_nodes_prepare_their_data_once_per_node(tmp_path) -> None:
    """Each node (its own cache, ``cluster.prepare_data=node``) loads the dataset once, partitions
    it once and writes the part files once, in its local rank 0 (global ranks 0 and 2); its
    other rank waits and loads its part. With one shared cache and ``cluster.prepare_data=job``
    rank 0 alone does it all."""
    caches = (str(tmp_path / "cache0"), str(tmp_path / "cache1"))
    outputs = _two_nodes(tmp_path, "train.epochs=2", f"hydra.run.dir={tmp_path / 'per_node'}", caches=caches)
    for node, output in enumerate(outputs):
        for name in ("generate dataset", "partition synthetic into 4 parts", "write 4 part files"):
            lines = _phase_lines(output, name)
            assert len(lines) == 1 and f"(rank {2 * node})" in lines[0], (name, output)
        assert len(list(Path(caches[node]).glob("parted/*/part*.pt"))) == 4
    outputs = _two_nodes(tmp_path, "train.epochs=2", "cluster.prepare_data=job", f"partition.cache_dir={tmp_path / 'shared'}",
                         f"hydra.run.dir={tmp_path / 'per_job'}")
    lines = [line for output in outputs for line in _phase_lines(output, "generate dataset")]
    assert len(lines) == 1 and "(rank 0)" in lines[0], outputs
