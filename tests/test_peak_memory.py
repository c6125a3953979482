"""The tensor-level peak on CPU (:mod:`gnntrain.engine.peak_memory`): what live tensors hold plus
the most allocated above them, measured in the last warm-up epoch, where the resident set hides
the methods' differences."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import train_records
from gnntrain.engine.peak_memory import TensorPeakWindow, live_tensor_bytes
from gnntrain.engine.summary import RunSummary

MiB = 2**20


def test_the_window_counts_live_tensors_and_the_highest_allocation_above_them() -> None:
    kept = torch.zeros(4 * MiB // 4)  # 4 MiB live before the window
    live = live_tensor_bytes()
    with TensorPeakWindow() as window:
        first = torch.ones(8 * MiB // 4)
        second = first * 2  # 16 MiB at the highest point
        del first, second
        after = torch.ones(2 * MiB // 4)  # 2 MiB, still live at the end
    assert kept.numel() and after.numel()
    assert window.peak_mb == pytest.approx((live + 16 * MiB) / MiB, abs=0.5)


def test_a_sparse_tensor_counts_its_index_and_value_arrays() -> None:
    before = live_tensor_bytes()
    matrix = torch.sparse_csr_tensor(torch.tensor([0, 2, 3]), torch.tensor([0, 1, 1]), torch.ones(3), (2, 2),
                                     check_invariants=True)
    assert live_tensor_bytes() - before == 3 * 8 + 3 * 8 + 3 * 4
    assert matrix.values().numel() == 3


def test_a_cpu_run_measures_the_last_warmup_epoch_and_tells_methods_apart(tmp_path: Path) -> None:
    """Resident sets of vanilla and PipeGCN are within a few percent; PipeGCN's tensors hold its
    in-flight halo buffers beyond vanilla's, and the tensor peak shows it."""
    common = ("dataset.num_nodes=6000", "model.hidden=64", "train.epochs=3", "train.warmup_epochs=2")
    peaks = {}
    for strategy in ("vanilla", "pipegcn"):
        records = train_records(tmp_path / strategy, f"strategy={strategy}", *common)
        assert [r["peak_tensor_mb"] is not None for r in records] == [False, True, False]
        summary = RunSummary.read(tmp_path / strategy)
        assert summary.peak_tensor_mb == records[1]["peak_tensor_mb"] < summary.peak_mem_mb
        peaks[strategy] = summary.peak_tensor_mb
    assert peaks["pipegcn"] > peaks["vanilla"]
