"""Uniform random integers at 16-bit resolution, four per 64-bit word, for stochastic rounding
and dropout masks.

On a CPU, torch's generator costs about 3.5 ns per float32 of ``torch.rand`` and 14-18 ns per
element of ``bernoulli_`` (which ``F.dropout`` uses), but about 4 ns per full-range int64, which
holds four independent uniform 16-bit integers: the noise of one quantized value or one dropout
decision costs about 1 ns instead. 16 bits bound what this resolution changes:

* stochastic rounding with ``u = (k + 1/2) / 2^16`` (``k`` uniform in ``[0, 2^16)``) rounds up
  with a probability within ``2^-17`` of the exact fraction, a bias below ``8e-6`` of one
  quantization step (``torch.rand``'s float32 has ``2^-24``);
* a dropout probability ``p`` is applied as ``round(p 2^16) / 2^16`` (e.g. 0.5 exactly, 0.1 as
  0.1000061), and kept values are scaled by the inverse of the keep probability actually used,
  so the layer stays unbiased.

Rounding noise is drawn from ``generator`` (default: the device's global generator), so seeds
reproduce it. Dropout masks are keyed (:mod:`gnntrain.rng.keyed`): the mask of a row is a function
of the dropout's key and the row's global node id, so every rank that holds a row, and every
pipeline chunk or mini-batch that reads it, applies the same mask (one mask per row, dropout
site and step, as in single-process training).
"""

from __future__ import annotations

import math

import torch

from gnntrain.rng import keyed

LEVELS = 1 << 16


def uniform16(shape: tuple[int, ...], generator: torch.Generator | None = None,
              device: torch.device | str | None = None) -> torch.Tensor:
    """int16 tensor of ``shape``, each value uniform over ``[-2^15, 2^15)``, independent."""
    count = math.prod(shape)
    words = torch.empty(-(-count // 4), dtype=torch.int64, device=device)
    words.random_(-(1 << 63), None, generator=generator)
    return words.view(torch.int16)[:count].view(shape)


def noise_steps(shape: tuple[int, ...], generator: torch.Generator | None = None,
                device: torch.device | str | None = None) -> torch.Tensor:
    """float32 ``k + 1/2`` with ``k`` uniform in ``[0, 2^16)`` (exact in float32): ``2^16``
    times :func:`unit_noise`, for callers that fold the scaling into their next operation."""
    return uniform16(shape, generator, device).to(torch.float32).add_(LEVELS / 2 + 0.5)


def unit_noise(shape: tuple[int, ...], generator: torch.Generator | None = None,
               device: torch.device | str | None = None) -> torch.Tensor:
    """float32 ``u = (k + 1/2) / 2^16`` with ``k`` uniform in ``[0, 2^16)``: in ``(0, 1)``,
    mean 1/2."""
    return noise_steps(shape, generator, device).mul_(1.0 / LEVELS)


def dropout(h: torch.Tensor, p: float, training: bool, key: int, ids: torch.Tensor,
            first_column: int = 0) -> torch.Tensor:
    """Inverted dropout with a keyed mask: value ``(i, j)`` is zeroed with probability
    ``round(p 2^16) / 2^16``, decided by :func:`gnntrain.rng.keyed.uniform16` of ``(key, ids[i],
    first_column + j)``, the others scaled by the inverse of their keep probability. ``ids``:
    the rows' global node ids; ``first_column``: the position of ``h``'s first column in the
    full rows (a column slice gets the columns' masks)."""
    if not training or p == 0.0 or not h.numel():
        return h
    mask = dropout_mask(p, key, ids, h.shape[1], first_column)
    return h if mask is None else _Dropout.apply(h, *mask)


def dropout_mask(p: float, key: int, ids: torch.Tensor, width: int,
                 first_column: int = 0) -> tuple[torch.Tensor, float] | None:
    """The keep mask ``[len(ids), width]`` (bool) and the scale of kept values that
    :func:`dropout` applies with probability ``p``; None where ``p`` rounds to 0."""
    dropped = min(round(p * LEVELS), LEVELS - 1)
    if dropped == 0:
        return None
    keep = keyed.uniform16(key, ids, width, first_column) >= dropped - LEVELS // 2
    return keep, LEVELS / (LEVELS - dropped)


def _masked(h: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
    """``scale * h`` where ``keep``, else 0, in one pass: ``addcmul`` reads the boolean mask
    inside its kernel, with no float mask materialised (the same values as ``h * (keep * scale)``)."""
    return torch.addcmul(h.new_zeros(()), h, keep, value=scale)


class _Dropout(torch.autograd.Function):
    """``y = s m h`` with a boolean mask ``m``; ``dL/dh = s m dL/dy``. The mask is kept as bools
    (one byte per value) for the backward pass."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return _masked(h, keep, scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        (keep,) = ctx.saved_tensors
        return _masked(grad, keep, ctx.scale), None, None
