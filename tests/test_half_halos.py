"""16-bit halos (``strategy.halo_dtype``): rows rounded once and widened back, counted at 2
bytes per value, for every graph-parallel strategy; training follows float32's closely."""

from __future__ import annotations

import pytest
import torch

from dist_helpers import job_bytes, trace_job
from gnntrain.comm.communicator import Communicator
from gnntrain.comm.half_precision import start_half
from gnntrain.strategies.graph_parallel.config import HaloDtype

COMMON = ("model=gcn", "model.layers=2", "model.hidden=16", "model.dropout=0", "cluster.world_size=2",
          "train.epochs=5", "dataset.num_nodes=1200", "dataset.num_features=32", "seed=4")
HALO_KINDS = ("halo_fwd", "halo_bwd")


@pytest.mark.parametrize("name", [dtype.value for dtype in HaloDtype])
def test_rows_arrive_rounded_once_and_cost_two_bytes_per_value(name: str) -> None:
    comm = Communicator(0, 1, torch.device("cpu"))
    rows = torch.randn(7, 5, dtype=torch.float64) * 1e3
    arrived = start_half(comm, rows, getattr(torch, name), [7], [7], "halo_fwd").wait()
    assert arrived.dtype == torch.float64
    assert torch.equal(arrived, rows.to(getattr(torch, name)).to(torch.float64))
    assert comm.meter.bytes["halo_fwd"] == 2 * rows.numel()


def _halved(tmp_path, strategy: tuple[str, ...]) -> tuple[list[dict], list[dict]]:
    full = trace_job(tmp_path, "full", *COMMON, *strategy)
    half = trace_job(tmp_path, "half", *COMMON, *strategy, "strategy.halo_dtype=bfloat16")
    for kind in HALO_KINDS:
        assert job_bytes(half, kind) * 2 == job_bytes(full, kind) > 0, kind
    torch.testing.assert_close(torch.tensor(half[0]["loss"]), torch.tensor(full[0]["loss"]), rtol=1e-2, atol=0)
    return full, half


@pytest.mark.slow
def test_vanilla_bfloat16_halos_halve_the_bytes_and_keep_the_losses(tmp_path) -> None:
    full, half = _halved(tmp_path, ("strategy=vanilla",))
    assert half[0]["loss"] != full[0]["loss"]  # the rows really were rounded
    assert all(g.dtype == torch.float32 for g in half[0]["grads"][0].values())


@pytest.mark.slow
@pytest.mark.parametrize("strategy", [("strategy=pipegcn",), ("strategy=bns", "strategy.p=0.5"),
                                      ("strategy=adaqp", "strategy.assign=fixed", "strategy.bits=32")])
def test_every_graph_parallel_strategy_sends_16_bit_halos(strategy: tuple[str, ...], tmp_path) -> None:
    _halved(tmp_path, strategy)
