"""Per-row stochastic integer quantization of messages (AdaQP, Sec. 2.3, Eq. 4-5).

A row ``h`` (``D`` values) is sent at ``b`` bits as ``q = round_st((h - Z) / S)`` with zero-point
``Z = min(h)`` and scale ``S = (max(h) - min(h)) / (2^b - 1)``; the receiver computes
``h_hat = q S + Z``. Stochastic rounding (``floor(v + u)``, ``u ~ U[0, 1)``) makes ``h_hat``
unbiased, with variance ``sum_j f_j (1 - f_j) S^2`` (``f_j`` the fractional part of element
``j``), i.e. ``D S^2 / 6`` on average over fractional parts (Theorem 1).

Wire format of a block of rows quantized at one width: the codes bit-packed row-major
(:mod:`gnntrain.comm.bitpack`, ``8 / b`` per byte; the last byte of the block zero-padded),
then every row's ``Z`` and then every row's ``S`` as bfloat16 (2 bytes each, the range of
float32, so tiny gradients do not underflow). ``Z`` is rounded *down* and ``S`` *up* to
bfloat16 before quantizing, so every ``(h - Z) / S`` lies in ``[0, 2^b - 1]`` and the
receiver's dequantization uses exactly the sender's ``Z`` and ``S`` (no bias from the compact
format). A constant row whose value bfloat16 represents gets ``S = 0`` and arrives exactly.
``bits = 32`` sends the rows unquantized (float32 bytes).
"""

from __future__ import annotations

import torch

from gnntrain.comm.bitpack import pack, packed_size, unpack

WIDTHS = (2, 4, 8)
FULL = 32
META = torch.bfloat16


def message_bytes(rows: int, dim: int, bits: int) -> int:
    """Bytes of ``rows`` rows of ``dim`` values sent at ``bits`` (codes plus per-row Z, S)."""
    if bits == FULL:
        return rows * dim * 4
    return packed_size(rows * dim, bits) + rows * 2 * META.itemsize


def quantize(h: torch.Tensor, bits: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``[rows, dim]`` floats -> the block's bytes (1-D uint8), see the module docstring."""
    if bits == FULL:
        return h.detach().to(torch.float32).contiguous().view(-1).view(torch.uint8)
    if bits not in WIDTHS:
        raise ValueError(f"bits={bits} is invalid; valid: {', '.join(map(str, (*WIDTHS, FULL)))}")
    h = h.detach().to(torch.float32)
    levels = 2 ** bits - 1
    low, high = h.amin(dim=1, keepdim=True), h.amax(dim=1, keepdim=True)
    zero = _to_meta(low, float("-inf"))
    scale = _to_meta((high - zero.float()) / levels, float("inf"))
    z, s = zero.float(), scale.float()
    ratio = torch.where(s > 0, (h - z) / torch.where(s > 0, s, 1.0), 0.0)
    noise = torch.rand(h.shape, generator=generator, device=h.device)
    codes = torch.floor(ratio + noise).clamp_(0, levels)
    meta = torch.cat([zero.view(-1), scale.view(-1)]).view(torch.uint8)
    return torch.cat([pack(codes.view(-1), bits), meta])


def dequantize(payload: torch.Tensor, bits: int, rows: int, dim: int) -> torch.Tensor:
    """A block's bytes -> ``[rows, dim]`` float32."""
    if bits == FULL:
        return _view(payload, torch.float32).view(rows, dim)
    code_bytes = packed_size(rows * dim, bits)
    codes = unpack(payload[:code_bytes], bits, rows * dim).view(rows, dim).float()
    meta = _view(payload[code_bytes:], META).float().view(2, rows, 1)
    return codes * meta[1] + meta[0]


def _view(payload: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Bytes reinterpreted as ``dtype`` (copied first where the offset is not aligned)."""
    if payload.storage_offset() % dtype.itemsize:
        payload = payload.clone()
    return payload.view(dtype)


def _to_meta(value: torch.Tensor, toward: float) -> torch.Tensor:
    """``value`` in bfloat16, rounded toward ``-inf`` or ``+inf``."""
    rounded = value.to(META)
    crossed = rounded.float() > value if toward < 0 else rounded.float() < value
    return torch.where(crossed, torch.nextafter(rounded, torch.full_like(rounded, toward)), rounded)
