"""The GPU path: training on CUDA equals the same run on the CPU.

Every strategy keeps its local graph, sparse matrices, halo exchanges, sampling masks and
quantized messages on the training device. Skipped where no CUDA GPU is visible (CI has
none); on a GPU machine, ``pytest tests/test_cuda.py`` runs them.

* Two workers over gloo share one GPU (gloo moves CUDA tensors through host memory), so every
  exchange runs on device tensors on any GPU machine; with two or more GPUs the same run goes
  over NCCL as well, and one worker on NCCL runs everywhere.
* float64: the GPU's different summation order stays far below 1e-9 relative.
* BNS draws its samples from a CPU generator, so a seed samples the same graph on both devices.
  AdaQP's stochastic rounding draws from the device's generator, so a quantized run is compared
  with the CPU run by its bytes (fixed widths: exact) and not by its values.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from dist_helpers import assert_gradients_close, trace_job

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible")

COMMON = ("model.layers=2", "model.hidden=16", "model.dropout=0", "train.dtype=float64", "train.epochs=3",
          "dataset.num_nodes=1200", "seed=2")
GLOO_SHARED_GPU = ("cluster.device=cuda", "cluster.backend=gloo", "cluster.world_size=2")

MODELS = [("model=gcn",), ("model=sage",), ("model=gat", "model.heads=2"), ("model=gcnii", "model.layers=4"),
          ("model=deepgcn", "model.layers=3", "model.norm=layer"), ("model=film", "model.norm=layer"),
          ("model=sage", "model.norm=batch")]
STRATEGIES = [("strategy=pipegcn", "strategy.smooth=gf", "strategy.track_staleness_error=true"),
              ("strategy=bns", "strategy.p=0.5"), ("strategy=bes", "strategy.p=0.5"),
              ("strategy=dropedge", "strategy.p=0.5"),
              ("strategy=adaqp", "strategy.assign=fixed", "strategy.bits=32", "strategy.overlap=true")]


def _assert_same_training(gpu: list[dict], cpu: list[dict]) -> None:
    torch.testing.assert_close(torch.tensor(gpu[0]["loss"]), torch.tensor(cpu[0]["loss"]), rtol=1e-9, atol=0)
    for g, c in zip(gpu, cpu):
        assert g["bytes"] == c["bytes"]
        for epoch, grads in enumerate(c["grads"]):
            assert_gradients_close(g["grads"][epoch], grads, 1e-9, f"epoch {epoch + 1}")


def _both_devices(tmp_path, *overrides: str) -> tuple[list[dict], list[dict]]:
    gpu = trace_job(tmp_path, "gpu", *COMMON, *overrides)
    cpu = trace_job(tmp_path, "cpu", *COMMON, *overrides, "cluster.device=cpu", "cluster.backend=gloo")
    return gpu, cpu


@pytest.mark.parametrize("model", MODELS, ids=lambda m: "-".join(o.split("=")[1] for o in m))
def test_models_on_gpu_equal_cpu(model: tuple[str, ...], tmp_path) -> None:
    _assert_same_training(*_both_devices(tmp_path, *model, "strategy=vanilla", *GLOO_SHARED_GPU))


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s[0].split("=")[1])
def test_strategies_on_gpu_equal_cpu(strategy: tuple[str, ...], tmp_path) -> None:
    _assert_same_training(*_both_devices(tmp_path, "model=sage", *strategy, *GLOO_SHARED_GPU))


def test_nccl_on_gpu_equals_cpu(tmp_path) -> None:
    world = min(torch.cuda.device_count(), 2)
    _assert_same_training(*_both_devices(tmp_path, "model=gcn", "strategy=bns", "strategy.p=0.5", "cluster=gpu",
                                         f"cluster.world_size={world}"))


@pytest.mark.parametrize("assign", [("strategy.assign=fixed", "strategy.bits=4"),
                                    ("strategy.assign=adaptive", "strategy.period=2", "strategy.group_size=20")],
                         ids=["fixed4", "adaptive"])
def test_quantized_exchange_on_gpu(assign: tuple[str, ...], tmp_path) -> None:
    overrides = ("model=gcn", "strategy=adaqp", *assign, "train.dtype=float32", *GLOO_SHARED_GPU)
    gpu, cpu = _both_devices(tmp_path, *overrides)
    assert all(torch.isfinite(torch.tensor(t["loss"])).all() for t in gpu)
    if "strategy.assign=fixed" in assign:
        assert [t["bytes"] for t in gpu] == [t["bytes"] for t in cpu]
    else:
        assert all(2 <= m["mean_bits"] <= 8 for m in gpu[0]["epoch_metrics"])


def test_cli_runs_on_gpu(tmp_path) -> None:
    """The command a user types: metrics on disk, GPU memory measured."""
    res = subprocess.run([sys.executable, "-m", "gnntrain.cli", "cluster=gpu", "dataset=synthetic", "train.epochs=3",
                          f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["world_size"] == torch.cuda.device_count()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(r["peak_mem_mb"] > 0 for r in records)


def test_communication_on_cuda_is_timed_on_the_device() -> None:
    """An exchange in flight while the stream computes: its lifetime (total time) spans the
    device's work, which the host never waited for, and none of it is exposed."""
    from gnntrain.comm.communicator import Communicator, stream_mark
    from gnntrain.comm.meter import CommMeter

    meter = CommMeter()
    comm = Communicator(0, 1, torch.device("cuda"), meter=meter)
    rows = torch.ones(1000, 8, device="cuda")
    flight = comm.all_to_all_start(rows, [1000], [1000], "halo_fwd")
    before = stream_mark(rows.device)
    torch.cuda._sleep(100_000_000)  # device cycles: tens of milliseconds of "compute"
    after = stream_mark(rows.device)
    flight.wait()
    torch.cuda.synchronize()
    meter.settle()
    compute_s = before.elapsed_time(after) / 1e3
    assert meter.total_s["halo_fwd"] >= compute_s > 0.005
    assert meter.wait_s["halo_fwd"] < 0.1 * compute_s


def test_a_gpu_run_reports_device_communication_times(tmp_path) -> None:
    """Two workers sharing the GPU over gloo: exposed communication is positive, within its
    lifetime, and within the epoch."""
    res = subprocess.run([sys.executable, "-m", "gnntrain.cli", "dataset=synthetic", "train.epochs=3",
                          *GLOO_SHARED_GPU, f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    for r in records:
        assert 0 < r["comm_time"] <= r["comm_total_time"] <= r["epoch_time"]
        assert 0 < r["reduce_time"] <= r["epoch_time"]
