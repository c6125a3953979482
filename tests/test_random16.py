"""16-bit uniform draws (gnntrain.rng.random16): uniform and independent-looking, the rounding noise
centred in (0, 1), reproducible from a seed; dropout unbiased at the keep rate it states, its
mask a function of the key, the row's id and the column."""

from __future__ import annotations

import pytest
import torch

from gnntrain.rng.random16 import LEVELS, dropout, uniform16, unit_noise


def test_draws_cover_all_16_bit_values_uniformly() -> None:
    draws = uniform16((1 << 22,), torch.Generator().manual_seed(0)).long() + LEVELS // 2
    counts = torch.bincount(draws, minlength=LEVELS).double()
    assert counts.numel() == LEVELS and (counts > 0).all()
    expected = draws.numel() / LEVELS
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert abs(chi2 - (LEVELS - 1)) < 5 * (2 * (LEVELS - 1)) ** 0.5  # within 5 sd of the chi-square mean
    neighbours = torch.corrcoef(torch.stack([draws[:-1].double(), draws[1:].double()]))[0, 1]
    assert abs(float(neighbours)) < 5 / draws.numel() ** 0.5


def test_a_generator_reproduces_its_draws() -> None:
    a = unit_noise((7, 13), torch.Generator().manual_seed(3))
    b = unit_noise((7, 13), torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.shape == (7, 13) and a.dtype == torch.float32


def test_rounding_noise_lies_strictly_inside_the_unit_interval_with_mean_one_half() -> None:
    u = unit_noise((1 << 20,), torch.Generator().manual_seed(1))
    assert float(u.min()) > 0.0 and float(u.max()) < 1.0
    assert float(u.min()) == pytest.approx(0.5 / LEVELS, abs=2 / LEVELS)
    assert float(u.mean()) == pytest.approx(0.5, abs=5 * (1 / 12 / u.numel()) ** 0.5)


IDS = torch.arange(4096) * 7 + 11


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout_keeps_at_its_rate_and_is_unbiased(p: float) -> None:
    x = torch.ones(IDS.numel(), 256, dtype=torch.float64)
    y = dropout(x, p, True, 5, IDS)
    kept = (y != 0).double().mean()
    applied = round(p * LEVELS) / LEVELS
    assert abs(applied - p) <= 0.5 / LEVELS
    sd = (applied * (1 - applied) / x.numel()) ** 0.5
    assert float(kept) == pytest.approx(1 - applied, abs=5 * sd)
    for lane in range(4):  # each 16-bit lane of the 64-bit words keeps at the rate
        lane_kept = (y[:, lane::4] != 0).double().mean()
        assert float(lane_kept) == pytest.approx(1 - applied, abs=5 * 2 * sd)
    assert torch.unique(y[y != 0]).tolist() == [pytest.approx(1 / (1 - applied), rel=1e-12)]
    assert y.dtype == x.dtype


def test_dropout_off_or_in_evaluation_returns_the_input() -> None:
    x = torch.randn(5, 3)
    assert dropout(x, 0.0, True, 1, IDS[:5]) is x and dropout(x, 0.5, False, 1, IDS[:5]) is x


def test_dropout_gradient_follows_its_mask() -> None:
    x = torch.randn(64, 32, requires_grad=True)
    y = dropout(x, 0.5, True, 9, IDS[:64])
    y.sum().backward()
    torch.testing.assert_close(x.grad, (y.detach() != 0).float() * 2.0)


def test_a_rows_mask_depends_on_its_key_id_and_columns_only() -> None:
    """Whoever holds a row, in whatever order or company, drops the same values of it; a
    column slice gets its columns' masks; another key draws another mask."""
    x = torch.ones(IDS.numel(), 40)
    full = dropout(x, 0.5, True, 3, IDS)
    order = torch.randperm(IDS.numel(), generator=torch.Generator().manual_seed(0))[:100]
    torch.testing.assert_close(dropout(x[order], 0.5, True, 3, IDS[order]), full[order], rtol=0, atol=0)
    torch.testing.assert_close(dropout(x[:, 13:31], 0.5, True, 3, IDS, first_column=13), full[:, 13:31],
                               rtol=0, atol=0)
    assert not torch.equal(dropout(x, 0.5, True, 4, IDS), full)
