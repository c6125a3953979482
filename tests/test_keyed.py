"""Keyed random values (gnntrain.rng.keyed): SplitMix64's finaliser on tensors equals the reference on
Python integers (logical shifts, 64-bit wrap-around); 16-bit values are uniform in every lane and
look independent along rows and columns; uniform floats cover [0, 1)."""

from __future__ import annotations

import pytest
import torch

from gnntrain.rng import keyed

LEVELS = 1 << 16


def _reference_mix(value: int) -> int:
    """SplitMix64's finaliser on unsigned 64-bit integers."""
    mask = (1 << 64) - 1
    z = value & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


@pytest.mark.parametrize("value", [0, 1, 12345, (1 << 63) + 17, (1 << 64) - 1, 0x9E3779B97F4A7C15])
def test_the_tensor_finaliser_is_splitmix64s(value: int) -> None:
    z = keyed.mix(torch.tensor([keyed.signed(value)]))
    assert int(z[0]) == keyed.signed(_reference_mix(value)) == keyed.mix_int(value)


def test_sixteen_bit_values_are_uniform_in_every_lane_and_independent_looking() -> None:
    values = keyed.uniform16(keyed.key(1, 2, 3), torch.arange(1 << 14), 64).long() + LEVELS // 2
    for lane in range(4):
        counts = torch.bincount(values[:, lane::4].reshape(-1) >> 8, minlength=256).double()
        expected = counts.sum() / 256
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert abs(chi2 - 255) < 5 * (2 * 255) ** 0.5, f"lane {lane}"
    flat = values.double()
    n = flat.numel() ** 0.5
    for a, b in ((flat[:, :-1], flat[:, 1:]), (flat[:-1], flat[1:])):  # neighbouring columns, rows
        assert abs(float(torch.corrcoef(torch.stack([a.reshape(-1), b.reshape(-1)]))[0, 1])) < 5 / n


def test_uniform_floats_cover_the_unit_interval() -> None:
    u = keyed.uniform(7, torch.arange(1 << 18))
    assert float(u.min()) >= 0 and float(u.max()) < 1
    assert float(u.mean()) == pytest.approx(0.5, abs=5 * (1 / 12 / u.numel()) ** 0.5)
    assert float((u >= 0.5).double().mean()) == pytest.approx(0.5, abs=0.01)
