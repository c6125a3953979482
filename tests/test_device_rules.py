"""The rules that make device runs right, checked where CI runs (a CPU): degrees and weights at
least float32, one clock for timers, host tensors crossing through a pinned buffer, samples
drawn where the topology is, point-to-point over gloo one transfer at a time. ``tests/test_cuda.py`` runs the
same code on a GPU."""

from __future__ import annotations

import time

import pytest
import torch

from conftest import assert_same_training, train_records
from gnntrain.data.aggregation import MEAN, SYMMETRIC
from gnntrain.timing.clock import Stopwatch, clock_of
from gnntrain.data.graph_data import GraphData
from gnntrain.data.sampling import Topology, sample_groups, sampling_key
from gnntrain.data.local_graph import build_local_graph, weight_dtype
from gnntrain.parallel.pinned import PinnedStaging


def _star(leaves: int) -> GraphData:
    """Node 0 with an in-edge from each of ``leaves`` other nodes."""
    src = torch.arange(1, leaves + 1)
    edge_index = torch.stack([src, torch.zeros_like(src)])
    n = leaves + 1
    masks = [torch.ones(n, dtype=torch.bool) for _ in range(3)]
    return GraphData("star", torch.ones(n, 4), torch.zeros(n, dtype=torch.long), edge_index, *masks, 2)


@pytest.mark.parametrize("dtype, expected", [(torch.bfloat16, torch.float32), (torch.float16, torch.float32),
                                             (torch.float32, torch.float32), (torch.float64, torch.float64)])
def test_degrees_and_weights_are_at_least_float32(dtype: torch.dtype, expected: torch.dtype) -> None:
    assert weight_dtype(dtype) == expected
    graph = build_local_graph(_star(257), torch.zeros(258, dtype=torch.long), 0, 1, dtype)
    assert graph.in_degree.dtype == expected and graph.in_degree[0] == 257


def test_a_16_bit_run_rounds_each_weight_once_not_the_degree() -> None:
    """A degree of 257 is 256 in bfloat16; the mean's weight is 1/257 rounded to bfloat16."""
    graph = build_local_graph(_star(257), torch.zeros(258, dtype=torch.long), 0, 1, torch.bfloat16)
    _, _, precise = graph.operator_entries(MEAN)
    assert precise.dtype == torch.float32
    weights = graph.operator(MEAN).matrix.values()
    assert weights.dtype == torch.bfloat16
    assert torch.equal(weights, torch.full_like(weights, 1 / 257))
    assert not torch.equal(weights, torch.full_like(weights, 1 / 256))
    gcn = graph.operator(SYMMETRIC).matrix.values()  # row 0: its self-loop, then the 257 leaves
    assert gcn.dtype == torch.bfloat16 and gcn[0] == torch.tensor(1 / 258).to(torch.bfloat16)
    assert torch.equal(gcn[1:258], torch.full((257,), 258 ** -0.5).to(torch.bfloat16))


def test_sampled_blocks_weigh_in_float32_and_carry_the_training_dtype() -> None:
    data = _star(300)
    blocks = sample_groups(Topology.of(data), [torch.tensor([0])], [10], [sampling_key(1, 1, 0, 0)],
                           torch.bfloat16)[0].blocks[0]
    assert blocks.dtype == torch.bfloat16 and blocks.in_degree.dtype == torch.float32
    assert torch.equal(blocks.edge_scale, torch.full((10,), 30.0))


def test_the_sampler_draws_on_the_topologys_device_from_keys_alone() -> None:
    """Every tensor of a sample is made where the topology and roots are, and no generator is
    read: the samples are the same whatever torch's random state (so the same on any device;
    ``tests/test_cuda.py`` compares a GPU's samples with the CPU's)."""
    data = _star(40)
    topology = Topology.of(data).to("cpu")
    keys = [sampling_key(1, 1, 0, layer) for layer in range(2)]
    draws = []
    for state in (0, 1):
        torch.manual_seed(state)
        draws.append(sample_groups(topology, [torch.tensor([0]), torch.tensor([3, 0])], [5, 5], keys))
    for first, second in zip(*draws):
        assert torch.equal(first.nodes, second.nodes) and first.hop_sizes == second.hop_sizes
        for a, b in zip(first.blocks, second.blocks):
            assert torch.equal(a.edge_src, b.edge_src) and torch.equal(a.edge_dst, b.edge_dst)
            tensors = [a.global_ids, a.in_degree, a.edge_src, a.edge_dst, a.edge_scale, a.x]
            assert {t.device for t in tensors} == {topology.indptr.device}


def test_pinned_staging_on_a_cpu_hands_back_the_tensors() -> None:
    tensors = [torch.arange(3), torch.ones(2, 2, dtype=torch.bool)]
    assert PinnedStaging(torch.device("cpu")).to_device(tensors) == tensors


def test_the_cpu_clock_is_the_host_clock() -> None:
    clock = clock_of("cpu")
    start = clock.mark()
    time.sleep(0.01)
    end = clock.mark()
    assert isinstance(start, float) and clock.seconds(start, end) == end - start >= 0.01
    assert clock.host_time(start) == start
    watch = Stopwatch("cpu")
    for pause in (0.01, 0.02):
        with watch:
            time.sleep(pause)
    laps = watch.laps()
    assert len(laps) == 2 and laps[0] >= 0.01 and laps[1] >= 0.02 and watch.seconds == pytest.approx(sum(laps))
    watch.reset()
    assert watch.seconds == 0.0


def test_deterministic_kernels_change_no_cpu_result(tmp_path) -> None:
    """``cluster.deterministic`` turns torch's deterministic algorithms on in every worker; on a
    CPU, whose kernels are deterministic already, the run is the same bit for bit."""
    overrides = ("dataset.num_nodes=400", "dataset.avg_degree=6", "model=gat", "train.epochs=3", "seed=4")
    plain = train_records(tmp_path / "plain", *overrides)
    assert_same_training(train_records(tmp_path / "deterministic", *overrides, "cluster.deterministic=true"), plain, 3)
