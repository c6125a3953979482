"""The GPU path: every registered strategy trained on CUDA equals its CPU run.

Skipped where no CUDA GPU is visible (CI has none); ``make gpu-check`` runs them on a GPU
machine (docs/testing.md). Every case is a real job, launched as ``gnntrain`` launches it:

* every strategy on one NCCL rank, and on two gloo ranks sharing the GPU (gloo moves CUDA
  tensors through host memory, so a one-GPU machine runs every device path of a multi-rank
  job), a few on four; each against the same job on the CPU, in float64 with dropout 0.5:
  the same losses (to 1e-9 relative: the GPU sums in another order), accuracies, bytes and
  final weights. Two exceptions, both by design: AdaQP's stochastic rounding draws from the
  device's generator, so a quantized run is compared by its bytes and counts (fixed widths);
  HopGNN chooses its merge count from timed iterations, so its bytes follow the machine and
  are not compared (merging never changes what a model trains on);
* under the virtual clock (``cluster.clock=virtual``) a GPU run trains as under the wall clock,
  its compute timed by CUDA events, its parts adding up to each rank's epoch;
* a resumed GPU run equals the uninterrupted one, and ranks loading part files train as ranks
  that carve their parts (GPU against GPU, bit for bit: with ``cluster.deterministic``, since
  CUDA's index_add and cuSPARSE's products otherwise sum in a varying order); a bfloat16 model
  trains near its float32 run on a graph whose degrees exceed 256 (the degrees' own precision
  is checked exactly in ``tests/test_device_rules.py``); the device sampler draws the CPU's
  blocks; a described link on CUDA; ``cluster.deterministic`` repeats
  a run bit for bit, and the sparse products it replaces repeat on their own; AdaQP's cost
  model on the GPU is a transfer time.

What one GPU cannot show: NCCL between ranks (NCCL refuses two ranks on one GPU, so its
point-to-point, all-to-all and completion marks run only where two GPUs are visible: the
command test takes every visible GPU).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import assert_same_training, make_run, train_records
from gnntrain.data.job import write_partitioned_dataset
from gnntrain.data.sampling import Topology, sample_groups, sampling_key
from gnntrain.data.synthetic import generate
from gnntrain.strategies import METHODS
from gnntrain.engine.summary import RunSummary

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible")

COMMON = ("dataset.num_nodes=1200", "dataset.avg_degree=8", "model.layers=2", "model.hidden=16",
          "model.dropout=0.5", "train.dtype=float64", "train.epochs=3", "train.checkpoint_every=3", "seed=2",
          "cluster.threads_per_worker=1")
"""Every case's job; one torch thread per rank, since the tests run in parallel workers (each rank
would otherwise take the machine's cores over its local ranks, oversubscribing them many times)."""
SETTINGS = {
    "pipegcn": ("strategy.smooth=gf", "strategy.track_staleness_error=true"),
    "bns": ("strategy.p=0.5",),
    "bes": ("strategy.p=0.5",),
    "dropedge": ("strategy.p=0.5",),
    "adaqp": ("strategy.assign=fixed", "strategy.bits=4", "strategy.overlap=true"),
    "minibatch": ("strategy.batch_size=256",),
    "lo": ("strategy.batch_size=256",),
    "p3": ("strategy.batch_size=256",),
    "naive": ("strategy.batch_size=256",),
    "hopgnn": ("strategy.batch_size=256",),
}
"""Settings that make a strategy use the mechanisms it has (the others run as they come)."""
NOISY = {"adaqp"}
"""Strategies whose values follow the device's random numbers (compared by bytes and counts)."""
TIMED = {"hopgnn"}
"""Strategies whose traffic follows measured times (bytes not compared)."""
GPU_GLOO = ("cluster.device=cuda", "cluster.backend=gloo")
GPU_NCCL = ("cluster=gpu",)
CPU = ("cluster.device=cpu", "cluster.backend=gloo")
RTOL = 1e-9


def _train(run_dir: Path, *overrides: str) -> tuple[list[dict], list[dict[str, torch.Tensor]]]:
    """A job's records and each rank's model weights at its last checkpoint."""
    records = train_records(run_dir, *overrides)
    last = sorted((run_dir / "checkpoints").glob("epoch_*"))[-1]
    weights = [torch.load(f, map_location="cpu", weights_only=False)["strategy"]["model"]
               for f in sorted(last.glob("rank*.pt"))]
    return records, weights


def _assert_same_run(name: str, gpu: tuple[list[dict], list[dict]], cpu: tuple[list[dict], list[dict]]) -> None:
    (gpu_records, gpu_weights), (cpu_records, cpu_weights) = gpu, cpu
    assert [r["epoch"] for r in gpu_records] == [r["epoch"] for r in cpu_records]
    if name not in TIMED:
        assert [r["comm_bytes_by_kind"] for r in gpu_records] == [r["comm_bytes_by_kind"] for r in cpu_records]
    if name in NOISY:
        assert all(torch.isfinite(torch.tensor(r["loss"])) for r in gpu_records)
        return
    torch.testing.assert_close(torch.tensor([r["loss"] for r in gpu_records], dtype=torch.float64),
                               torch.tensor([r["loss"] for r in cpu_records], dtype=torch.float64), rtol=RTOL, atol=0)
    for key in ("train_acc", "val_acc", "test_acc"):
        assert [r[key] for r in gpu_records] == [r[key] for r in cpu_records], key
    assert len(gpu_weights) == len(cpu_weights)
    for rank, (mine, theirs) in enumerate(zip(gpu_weights, cpu_weights)):
        for key, value in theirs.items():
            scale = float(value.abs().max()) if value.numel() else 0.0
            torch.testing.assert_close(mine[key], value, rtol=RTOL, atol=RTOL * scale,
                                       msg=lambda m: f"rank {rank}, {key}: {m}")


def _both(tmp_path: Path, name: str, world: int, gpu: tuple[str, ...], *extra: str) -> None:
    overrides = (*COMMON, "model=sage", f"strategy={name}", *SETTINGS.get(name, ()), f"cluster.world_size={world}",
                 *extra)
    _assert_same_run(name, _train(tmp_path / "gpu", *overrides, *gpu), _train(tmp_path / "cpu", *overrides, *CPU))


@pytest.mark.parametrize("name", list(METHODS))
def test_every_strategy_on_gloo_ranks_sharing_the_gpu_equals_its_cpu_run(name: str, tmp_path) -> None:
    _both(tmp_path, name, 2, GPU_GLOO)


@pytest.mark.parametrize("name", list(METHODS))
def test_every_strategy_on_one_nccl_rank_equals_its_cpu_run(name: str, tmp_path) -> None:
    _both(tmp_path, name, 1, GPU_NCCL)


@pytest.mark.parametrize("name, extra", [("vanilla", ()), ("hopgnn", ()), ("p3", ()),
                                         ("gnnpipe", ("strategy.graph_parallel=2", "strategy.chunks=4")),
                                         ("data_parallel", ("strategy.graph_parallel=2",))],
                         ids=["vanilla", "hopgnn", "p3", "gnnpipe-hybrid", "data_parallel-2x2"])
def test_four_gloo_ranks_sharing_the_gpu_equal_their_cpu_run(name: str, extra: tuple[str, ...], tmp_path) -> None:
    _both(tmp_path, name, 4, GPU_GLOO, *extra)


@pytest.mark.parametrize("name", ["pipegcn", "gnnpipe", "hopgnn"])
def test_a_resumed_gpu_run_equals_the_uninterrupted_one(name: str, tmp_path) -> None:
    overrides = (*COMMON, "model=sage", f"strategy={name}", *SETTINGS.get(name, ()), *GPU_GLOO,
                 "train.checkpoint_every=2", "cluster.deterministic=true")
    whole = train_records(tmp_path / "whole", *overrides, "train.epochs=4")
    train_records(tmp_path / "cut", *overrides, "train.epochs=2")
    resumed = train_records(tmp_path / "cut", *overrides, "train.epochs=4", "train.resume=true")
    if name in TIMED:
        # each run times its own merge count, which groups the same roots into other sums
        torch.testing.assert_close(torch.tensor([r["loss"] for r in resumed], dtype=torch.float64),
                                   torch.tensor([r["loss"] for r in whole], dtype=torch.float64), rtol=RTOL, atol=0)
    else:
        assert_same_training(resumed, whole, 4)


def test_ranks_loading_part_files_on_the_gpu_train_as_ranks_carving_their_parts(tmp_path) -> None:
    overrides = (*COMMON, "model=sage", "strategy=pipegcn", "strategy.smooth=gf", *GPU_GLOO,
                 "cluster.deterministic=true")
    folder = tmp_path / "parted"
    write_partitioned_dataset(make_run(*overrides, f"partition.dir={folder}"), 2)
    parts = train_records(tmp_path / "parts", *overrides, f"partition.dir={folder}")
    assert_same_training(parts, train_records(tmp_path / "whole", *overrides), 3)


def test_a_bfloat16_model_on_the_gpu_trains_as_float32_does(tmp_path) -> None:
    """Mean degree 300 (degrees above 256: their weights come from float32 degrees); the runs
    differ by bfloat16's rounding of activations, messages and the reported loss."""
    graph = ("dataset.num_nodes=3000", "dataset.avg_degree=300", "model=sage", "model.hidden=32", "train.epochs=5",
             "model.dropout=0.5", "seed=3", *GPU_GLOO)
    low = train_records(tmp_path / "bf16", *graph, "train.dtype=bfloat16")
    full = train_records(tmp_path / "fp32", *graph, "train.dtype=float32")
    torch.testing.assert_close(torch.tensor([r["loss"] for r in low]), torch.tensor([r["loss"] for r in full]),
                               rtol=5e-2, atol=0)
    assert low[-1]["loss"] < low[0]["loss"]


@pytest.mark.parametrize("name", ["vanilla", "pipegcn", "gnnpipe"])
def test_a_described_link_on_the_gpu_times_transfers_from_when_their_data_is_ready(name: str, tmp_path) -> None:
    """At 0.2 Gbit/s the link dominates; a synchronous exchange exposes all of it (the virtual
    clock posts a transfer where the stream reaches it), a stale one hides it."""
    records = train_records(tmp_path, *COMMON, "model=sage", f"strategy={name}", *GPU_GLOO, "network=eth10g",
                            "network.bandwidth_gbps=0.2", "train.epochs=4")
    for r in records[1:]:
        assert r["link_busy_time"] > 0 and max(r["comm_time"], r["reduce_time"]) <= r["epoch_time"]
        if name == "vanilla":
            assert r["comm_time"] + r["reduce_time"] >= 0.8 * r["link_busy_time"], r


@pytest.mark.parametrize("name", ["vanilla", "pipegcn", "gnnpipe"])
def test_the_virtual_clock_on_the_gpu_times_device_spans_and_trains_as_the_wall_clock(name: str, tmp_path) -> None:
    """Two gloo ranks sharing the GPU under ``cluster.clock=virtual``: compute spans are CUDA
    event times, the training is the wall-clock run's bit for bit, and every rank's compute and
    exposed time make its epoch."""
    overrides = (*COMMON, "model=sage", f"strategy={name}", *SETTINGS.get(name, ()), *GPU_GLOO,
                 "cluster.world_size=2")
    wall = train_records(tmp_path / "wall", *overrides)
    virtual = train_records(tmp_path / "virtual", *overrides, "cluster.clock=virtual", "network=eth10g")
    assert_same_training(virtual, wall, 3)
    for record in virtual:
        ranks = record["per_rank"]
        for epoch, compute, exposed in zip(ranks["epoch_time"], ranks["compute_time"], ranks["exposed_time"]):
            assert compute > 0 and compute + exposed == pytest.approx(epoch, rel=1e-9)


@pytest.mark.parametrize("name, model", [("vanilla", "gat"), ("gnnpipe", "gcnii"), ("minibatch", "sage")])
def test_deterministic_gpu_runs_repeat_bit_for_bit(name: str, model: str, tmp_path) -> None:
    overrides = (*COMMON, f"strategy={name}", f"model={model}", *GPU_GLOO, "train.dtype=float32",
                 "cluster.deterministic=true")
    first, second = _train(tmp_path / "first", *overrides), _train(tmp_path / "second", *overrides)
    assert [r["loss"] for r in first[0]] == [r["loss"] for r in second[0]]
    for mine, theirs in zip(first[1], second[1]):
        assert all(torch.equal(mine[key], value) for key, value in theirs.items())


def test_sparse_products_under_deterministic_kernels_repeat_bit_for_bit() -> None:
    """The aggregation and the attention-weighted sum (forward and backward) on a graph with hub
    rows, five times each under deterministic kernels: the same bits each time (cuSPARSE's
    products, which torch's deterministic mode leaves alone, are replaced there)."""
    from gnntrain.data.sparse import SparseOperator, SparsePattern, weighted_sum

    generator = torch.Generator().manual_seed(0)
    n, entries = 4000, 200_000
    row, col = torch.randint(0, n, (entries,), generator=generator), torch.randint(0, n, (entries,), generator=generator)
    row[: entries // 2] = torch.randint(0, 8, (entries // 2,), generator=generator)
    x = torch.randn(n, 64, generator=generator)
    weights, channels = torch.rand(entries, 4, generator=generator), torch.randn(n, 4, 16, generator=generator)

    def products() -> list[torch.Tensor]:
        op = SparseOperator(row.cuda(), col.cuda(), torch.rand(entries, generator=torch.Generator().manual_seed(1)).cuda(),
                            (n, n))
        inputs = [t.cuda().requires_grad_() for t in (x, weights, channels)]
        out = (op @ inputs[0]).square().sum() + weighted_sum(SparsePattern(row.cuda(), col.cuda(), (n, n)),
                                                              inputs[1], inputs[2]).square().sum()
        return [out.detach(), *torch.autograd.grad(out, inputs)]

    torch.use_deterministic_algorithms(True)
    try:
        runs = [products() for _ in range(5)]
    finally:
        torch.use_deterministic_algorithms(False)
    for run in runs[1:]:
        assert all(torch.equal(mine, first) for mine, first in zip(run, runs[0]))


def test_the_gpu_sampler_draws_the_cpu_samplers_blocks() -> None:
    """Keyed sampling on the device: the blocks a GPU draws are the CPU's, node for node and
    edge for edge, on a graph whose hubs exceed the fan-out."""
    data = generate(3000, 12.0, 4, 8, 0.5)
    host = Topology.of(data)
    device = host.to("cuda")
    groups = [torch.arange(0, 3000, 7), torch.arange(5, 400, 3), torch.tensor([], dtype=torch.long)]
    keys = [sampling_key(4, 2, 3, layer) for layer in range(3)]
    on_cpu = sample_groups(host, groups, [4, 6, 2], keys)
    on_gpu = sample_groups(device, [g.cuda() for g in groups], [4, 6, 2], keys)
    assert any(int(host.in_degree.max()) > fanout for fanout in (4, 6, 2))
    for cpu, gpu in zip(on_cpu, on_gpu):
        assert gpu.nodes.is_cuda and torch.equal(cpu.nodes, gpu.nodes.cpu()) and cpu.hop_sizes == gpu.hop_sizes
        for a, b in zip(cpu.blocks, gpu.blocks):
            for name in ("edge_src", "edge_dst", "edge_scale", "in_degree"):
                assert torch.equal(getattr(a, name), getattr(b, name).cpu()), name


def test_adaqp_times_its_cost_model_on_the_device(tmp_path) -> None:
    """The profiled per-bit time of every sender-receiver pair is a transfer time, not the floor
    of a clock that saw only a launch (1e-15 s/bit), and the assignment runs on it. (Over gloo
    the host waits for each transfer, so this holds with a host clock too; the NCCL case, where
    it does not, needs two GPUs.)"""
    run_dir = tmp_path / "run"
    records = train_records(run_dir, *COMMON, "model=sage", "strategy=adaqp", "strategy.assign=adaptive",
                            "strategy.period=2", "strategy.group_size=20", "train.dtype=float32", *GPU_GLOO)
    rank0 = torch.load(sorted((run_dir / "checkpoints").glob("epoch_*"))[-1] / "rank0.pt", map_location="cpu",
                       weights_only=False)
    cost = rank0["strategy"]["policy"]["plan"]["cost"]
    theta = cost[..., 0][~torch.eye(2, dtype=torch.bool)]
    assert (theta > 1e-13).all(), cost
    assert 2 <= records[-1]["strategy_metrics"]["mean_bits"] <= 8


def test_the_command_on_the_gpu_measures_device_time_and_memory(tmp_path) -> None:
    """The command a user types, on every visible GPU over NCCL: metrics on disk, peak memory
    allocated and reserved, times that fit in their epoch."""
    res = subprocess.run([sys.executable, "-m", "gnntrain.commands.train", "cluster=gpu", "train.epochs=3",
                          f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    summary = RunSummary.read(tmp_path)
    assert summary.world_size == torch.cuda.device_count()
    for r in (json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()):
        assert 0 < r["peak_mem_mb"] <= r["peak_mem_reserved_mb"]
        assert 0 < r["epoch_time"] and max(r["comm_time"], r["reduce_time"]) <= r["epoch_time"]


def test_communication_on_cuda_is_timed_on_the_device() -> None:
    """An exchange queued behind device work: its start is where the stream reaches it (after
    the work), so its time in flight leaves out the work queued before it, however early the
    host queued both."""
    from gnntrain.timing.clock import clock_of
    from gnntrain.comm.communicator import Communicator
    from gnntrain.comm.meter import CommMeter

    meter, clock = CommMeter(), clock_of("cuda")
    comm = Communicator(0, 1, torch.device("cuda"), meter=meter)
    clock.anchor()
    before = clock.mark()
    torch.cuda._sleep(1_000_000_000)  # device cycles: hundreds of milliseconds of "compute"
    flight = comm.all_to_all_start(torch.ones(1000, 8, device="cuda"), [1000], [1000], "halo_fwd")
    flight.wait()
    end = clock.mark()
    compute_s = clock.seconds(before, end)
    meter.settle()
    assert compute_s > 0.05
    assert meter.account(meter.close((clock.host_time(before), clock.host_time(end))))["data"].in_flight < 0.1 * compute_s
