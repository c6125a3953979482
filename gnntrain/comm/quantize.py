"""Per-row stochastic integer quantization of messages (AdaQP, Sec. 2.3, Eq. 4-5; Sylvie's 1-bit
messages are its ``b = 1`` case).

A row ``h`` (``D`` values) is sent at ``b`` bits as ``q = round_st((h - Z) / S)`` with zero-point
``Z = min(h)`` and scale ``S = (max(h) - min(h)) / (2^b - 1)``; the receiver computes
``h_hat = q S + Z``. Stochastic rounding (``floor(v + u)``, ``u ~ U[0, 1)``) makes ``h_hat``
unbiased, with variance ``sum_j f_j (1 - f_j) S^2`` (``f_j`` the fractional part of element
``j``), i.e. ``D S^2 / 6`` on average over fractional parts (Theorem 1). The noise ``u`` has
16-bit resolution (:mod:`gnntrain.rng.random16`: a third of ``torch.rand``'s cost on a CPU), which
leaves a bias below ``8e-6`` of a step.

Wire format: one fixed-size *record* per row, so any subset of rows is a subset of records:
the row's codes bit-packed (:mod:`gnntrain.comm.bitpack`, ``8 / b`` per byte, the row's last
byte zero-padded), then ``Z`` and ``S`` as bfloat16 (2 bytes each; the range of float32, so
tiny gradients do not underflow). ``Z`` is rounded *down* and ``S`` *up* to bfloat16 before
quantizing, so every ``(h - Z) / S`` lies in ``[0, 2^b - 1]`` and the receiver dequantizes with
exactly the sender's ``Z`` and ``S`` (the compact format adds no bias). A constant row whose
value bfloat16 represents gets ``S = 0`` and arrives exactly. ``bits = 32`` sends the row
unquantized (its float32 bytes).
"""

from __future__ import annotations

import torch

from gnntrain.comm.bitpack import pack, packed_size, unpack
from gnntrain.rng.random16 import LEVELS, noise_steps

WIDTHS = (1, 2, 4, 8)
"""The widths the codec sends below full precision."""
FULL = 32
META = torch.bfloat16


def record_bytes(dim: int, bits: int) -> int:
    """Bytes of one row of ``dim`` values sent at ``bits`` (codes plus its Z and S)."""
    if bits == FULL:
        return dim * 4
    return packed_size(dim, bits) + 2 * META.itemsize


def quantize(h: torch.Tensor, bits: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``[rows, dim]`` floats -> ``[rows, record_bytes(dim, bits)]`` uint8 records."""
    rows, dim = h.shape
    if bits == FULL:
        return h.detach().to(torch.float32).contiguous().view(torch.uint8).view(rows, dim * 4)
    if bits not in WIDTHS:
        raise ValueError(f"bits={bits} is invalid; valid: {', '.join(map(str, (*WIDTHS, FULL)))}")
    h = h.detach().to(torch.float32)
    levels = 2 ** bits - 1
    low, high = h.amin(dim=1, keepdim=True), h.amax(dim=1, keepdim=True)
    zero = _to_meta(low, float("-inf"))
    scale = _to_meta((high - zero.float()) / levels, float("inf"))
    z, s = zero.float(), scale.float()
    # h - z is 0 on a row with S = 0, so dividing it by 1 there gives its ratio 0. Adding
    # 2^-16 (k + 1/2) adds u exactly (a power-of-two scaling of an exact value).
    codes = (h - z).div_(torch.where(s > 0, s, 1.0))
    codes.add_(noise_steps(tuple(h.shape), generator, h.device), alpha=1.0 / LEVELS)
    # codes >= 0, so truncating after the clamp is floor(ratio + u) clamped; float -> int8 is
    # a vector instruction where float -> uint8 is not, and 1-, 2- and 4-bit codes fit in int8.
    codes = codes.clamp_(0, levels).to(torch.int8 if levels < 128 else torch.uint8)
    meta = torch.cat([zero, scale], dim=1).view(torch.uint8)
    return torch.cat([pack(codes, bits), meta], dim=1)


def dequantize(records: torch.Tensor, bits: int, dim: int) -> torch.Tensor:
    """``[rows, record_bytes(dim, bits)]`` uint8 records -> ``[rows, dim]`` float32."""
    rows = records.shape[0]
    if bits == FULL:
        return _view(records, torch.float32).view(rows, dim)
    code_bytes = packed_size(dim, bits)
    meta = _view(records[:, code_bytes:], META).float()
    return unpack(records[:, :code_bytes], bits, dim).float().mul_(meta[:, 1:2]).add_(meta[:, 0:1])


def _view(records: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Byte rows reinterpreted as ``dtype`` (copied first unless contiguous and aligned)."""
    dense = records.is_contiguous() and (records.dim() < 2 or records.stride(0) == records.shape[1])
    if not dense or records.storage_offset() % dtype.itemsize:
        records = records.clone(memory_format=torch.contiguous_format)
    return records.view(dtype)


def _to_meta(value: torch.Tensor, toward: float) -> torch.Tensor:
    """``value`` in bfloat16, rounded toward ``-inf`` or ``+inf``."""
    rounded = value.to(META)
    crossed = rounded.float() > value if toward < 0 else rounded.float() < value
    return torch.where(crossed, torch.nextafter(rounded, torch.full_like(rounded, toward)), rounded)
