"""The predictor's compute: kernel counts of a step (:mod:`gnntrain.cost.kernels`) and a
device's prices for them (:mod:`gnntrain.cost.profile`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import model_config
from gnntrain.errors import ConfigError
from gnntrain.cost import kernels, profile
from gnntrain.cost.kernels import WIDTHS, KernelCounts, count, step_counts, width_class
from gnntrain.data.sparse import SparseOperator, spmm


def test_each_kernel_class_counts_its_work() -> None:
    a, b = torch.randn(100, 32), torch.randn(32, 16)
    dense = count(lambda: a @ b)
    assert dense.ops == 1 and dense.dense_flops[width_class(16)] == 2 * 100 * 32 * 16 and sum(dense.dense_flops) == 2 * 100 * 32 * 16
    rows, cols = torch.tensor([0, 0, 1, 2]), torch.tensor([1, 2, 0, 2])
    matrix = SparseOperator(rows, cols, torch.ones(4), (3, 3)).matrix
    x = torch.randn(3, 64)
    sparse = count(lambda: spmm(matrix, x))
    assert sparse.sparse_products[width_class(64)] == 4 * 64 and sum(sparse.dense_flops) == 0
    moved = count(lambda: x + x)
    assert moved == KernelCounts(ops=1, bytes=3 * 3 * 64 * 4)
    picked = count(lambda: x.index_select(0, torch.tensor([2, 0])))
    assert picked.indexed_bytes == (3 * 64 * 4 + 2 * 8 + 2 * 64 * 4) and picked.bytes == 0


def test_width_classes_are_nearest_in_log_scale() -> None:
    assert [WIDTHS[width_class(w)] for w in (1, 4, 7, 9, 16, 40, 64, 128, 200, 10_000)] == \
        [4, 4, 4, 16, 16, 64, 64, 64, 256, 256]


@pytest.mark.parametrize("name", ["gcn", "sage"])
def test_a_large_rank_is_counted_from_two_probes_as_if_counted_whole(name: str) -> None:
    """The line through two probes of the rank's proportions reaches the count of the whole rank
    (the models' work is linear along it)."""
    model = model_config(name, hidden=32, layers=2)
    shape = (3 * kernels.PROBE_ROWS, 1.5 * kernels.PROBE_ROWS, 24 * kernels.PROBE_ROWS)  # halo / inner, edges / inner on rays
    scaled_step = step_counts(model, 24, 5, "float32", *shape)
    whole_step = kernels._step_on(model, 24, 5, torch.float32, *map(round, shape))
    scaled, whole = scaled_step.forward + scaled_step.backward, whole_step.forward + whole_step.backward
    for got, want in ((scaled.bytes, whole.bytes), (sum(scaled.dense_flops), sum(whole.dense_flops)),
                      (sum(scaled.sparse_products), sum(whole.sparse_products)),
                      (scaled.indexed_bytes, whole.indexed_bytes)):
        assert got == pytest.approx(want, rel=0.01)


@pytest.mark.slow
def test_a_profile_prices_counts() -> None:
    measured = profile.measure(torch.device("cpu"))
    assert measured.per_op > 0 and measured.per_byte > 0 and measured.per_indexed_byte > 0
    assert all(v > 0 for v in measured.per_flop + measured.per_product) and measured.memory_gib > 0
    work = KernelCounts(ops=10, dense_flops=(0.0, 1e6, 0.0, 0.0), bytes=1e6)
    assert measured.seconds(work) == pytest.approx(10 * measured.per_op + 1e6 * measured.per_flop[1]
                                                   + 1e6 * measured.per_byte)
    assert measured.seconds(work, cores=4) < measured.seconds(work)


def test_a_cpu_profile_is_measured_once_and_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    canned = profile.DeviceProfile("cpu", 1e-6, (1e-11,) * 4, (1e-10,) * 4, 1e-10, 2e-10, 8.0)
    calls = []
    monkeypatch.setattr(profile, "measure", lambda device: calls.append(device) or canned)
    assert profile.profile_for("cpu", str(tmp_path)) == canned
    assert profile.profile_for("cpu", str(tmp_path)) == canned and len(calls) == 1
    files = list((tmp_path / "device_profile").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["device"] == "cpu"


def test_a_device_without_a_profile_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="device 'tpu-v9' has no profile; valid: cpu") as refused:
        profile.profile_for("tpu-v9", str(tmp_path))
    assert "\n" not in str(refused.value)


def test_a_cached_profile_of_another_version_is_measured_again(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    canned = profile.DeviceProfile("cpu", 1e-6, (1e-11,) * 4, (1e-10,) * 4, 1e-10, 2e-10, 8.0)
    monkeypatch.setattr(profile, "measure", lambda device: canned)
    folder = tmp_path / "device_profile"
    folder.mkdir(mode=0o700)
    old = {k: v for k, v in json.loads(profile._dumped(canned)).items() if k != "version"}
    for host_file in ("x-cpu.json",):
        (folder / host_file).write_text(json.dumps({**old, "per_op": 5.0}))
    monkeypatch.setattr(profile.socket, "gethostname", lambda: "x")
    assert profile.profile_for("cpu", str(tmp_path)) == canned


@pytest.mark.parametrize("change, message", [
    ({"per_op": float("nan")}, "per_op=nan; valid: finite numbers >= 0"),
    ({"per_byte": -1e-10}, "per_byte=-1e-10; valid: finite numbers >= 0"),
    ({"per_flop": [1e-11, float("inf"), 1e-11, 1e-11]}, "per_flop=inf"),
    ({"per_flop": [1e-11]}, "per_flop and per_product need 4 width classes each"),
    ({"version": 7}, "version 7; valid: 2"),
])
def test_a_bad_profile_file_is_refused_in_one_line(tmp_path: Path, change: dict, message: str) -> None:
    canned = profile.DeviceProfile("NVIDIA X", 1e-6, (1e-11,) * 4, (1e-10,) * 4, 1e-10, 2e-10, 8.0)
    path = tmp_path / "x.json"
    path.write_text(json.dumps({**json.loads(profile._dumped(canned)), **change}))
    with pytest.raises(ConfigError) as refused:
        profile.load(path)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_spec_sheet_profiles_are_rooflines_stated_as_such() -> None:
    h100, v100 = profile.SPEC_SHEETS["h100"].profile(), profile.SPEC_SHEETS["v100"].profile()
    assert h100.source.startswith("spec sheet: NVIDIA H100 datasheet")
    assert h100.per_byte == pytest.approx(1 / (3350e9 * profile.STREAM_EFFICIENCY))
    assert h100.per_flop[-1] == pytest.approx(1 / (66.9e12 * profile.DENSE_EFFICIENCY))
    assert h100.per_flop[0] > h100.per_flop[-1]  # a narrow product is bound by memory
    work = KernelCounts(ops=10, dense_flops=(0.0, 0.0, 0.0, 1e12), bytes=1e9)
    assert v100.seconds(work) > h100.seconds(work)
