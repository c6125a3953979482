"""Stochastic integer quantization of message rows (AdaQP, Theorem 1): unbiased, variance
D S^2 / 6, fixed-size records per row, constant and empty rows handled."""

from __future__ import annotations

import pytest
import torch

from gnntrain.comm.quantize import dequantize, quantize, record_bytes

DRAWS = 4000


def _draws(x: torch.Tensor, bits: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(bits)
    rows, dim = x.shape
    return torch.stack([dequantize(quantize(x, bits, g), bits, dim) for _ in range(DRAWS)])


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_unbiased_with_theorem_1_variance(bits: int) -> None:
    x = torch.randn(6, 256, generator=torch.Generator().manual_seed(0)) * torch.logspace(-6, 2, 6).unsqueeze(1)
    draws = _draws(x, bits)
    scale = (x.amax(1) - x.amin(1)) / (2 ** bits - 1)
    per_element_sd = scale / 2  # stochastic rounding moves a value by less than one step
    # the mean of DRAWS draws is within 5 standard errors of x, element by element
    assert ((draws.mean(0) - x).abs() <= 5 * per_element_sd.unsqueeze(1) / DRAWS ** 0.5).all()
    row_variance = draws.var(0).sum(1)
    theorem = x.shape[1] * scale ** 2 / 6
    torch.testing.assert_close(row_variance, theorem, rtol=0.15, atol=0)


def test_one_bit_is_unbiased_with_the_exact_variance() -> None:
    """At one bit a value is its row's minimum or maximum, the maximum with probability ``f``, its
    fraction of the way between them: unbiased, with variance ``sum_j f_j (1 - f_j) S^2`` (at two
    levels the fractions of Gaussian rows crowd the middle, so Theorem 1's average ``D S^2 / 6``
    over uniform fractions does not apply)."""
    x = torch.randn(6, 256, generator=torch.Generator().manual_seed(0)) * torch.logspace(-6, 2, 6).unsqueeze(1)
    draws = _draws(x, 1)
    low, scale = x.amin(1, keepdim=True), x.amax(1, keepdim=True) - x.amin(1, keepdim=True)
    assert ((draws.mean(0) - x).abs() <= 5 * (scale / 2) / DRAWS ** 0.5).all()
    fraction = (x - low) / scale
    torch.testing.assert_close(draws.var(0).sum(1), (fraction * (1 - fraction)).sum(1) * scale.view(-1) ** 2,
                               rtol=0.15, atol=0)


@pytest.mark.parametrize("bits", [1, 2, 4, 8, 32])
@pytest.mark.parametrize("rows,dim", [(0, 16), (1, 1), (3, 5), (17, 64)])
def test_wire_size_and_shape(bits: int, rows: int, dim: int) -> None:
    x = torch.randn(rows, dim)
    records = quantize(x, bits)
    expected = -(-dim * bits // 8) + 4 if bits < 32 else 4 * dim
    assert records.dtype == torch.uint8 and records.shape == (rows, expected) and record_bytes(dim, bits) == expected
    assert dequantize(records, bits, dim).shape == (rows, dim)
    if rows > 1:  # any subset of records decodes to the same rows
        torch.testing.assert_close(dequantize(records[1:], bits, dim), dequantize(records, bits, dim)[1:],
                                   rtol=0, atol=0)


def test_full_width_is_exact_and_codes_stay_in_range() -> None:
    x = torch.randn(4, 33)
    assert torch.equal(dequantize(quantize(x, 32), 32, 33), x)
    for bits in (2, 4, 8):
        out = dequantize(quantize(x, bits), bits, 33)
        step = (x.amax(1) - x.amin(1)) / (2 ** bits - 1)
        assert (out >= x.amin(1, keepdim=True) - step.unsqueeze(1)).all()
        assert (out <= x.amax(1, keepdim=True) + step.unsqueeze(1)).all()


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
def test_constant_rows(bits: int) -> None:
    exact = torch.tensor([[0.5] * 8, [0.0] * 8, [-3.0] * 8])
    assert torch.equal(dequantize(quantize(exact, bits), bits, 8), exact)
    inexact = torch.full((2, 8), 0.1)  # not a bfloat16 value: still unbiased
    draws = _draws(inexact, bits)
    torch.testing.assert_close(draws.mean(0), inexact, rtol=0, atol=1e-4)


def test_bad_width() -> None:
    with pytest.raises(ValueError, match="bits=3 is invalid; valid: 1, 2, 4, 8, 32"):
        quantize(torch.zeros(1, 1), 3)
