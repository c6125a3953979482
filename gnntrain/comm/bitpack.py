"""Packing of small unsigned integers into bytes, for compact messages.

``pack(values, bits)`` packs the last dimension, ``8 // bits`` values per byte, the first value
in the lowest bits (``bits`` in {1, 2, 4, 8}); the last byte of each row is zero-padded.
``unpack(packed, bits, count)`` inverts it. Boundary-node sampling sends its keep masks at 1
bit per node; quantized halo exchanges send their integer codes at 2, 4 or 8 bits.

Both directions work on machine words rather than single values: the ``k = 8 // bits`` bytes
that share one packed byte are read as one little-endian ``8k``-bit integer ``w`` (value ``j``
at bit ``8j``), and ``OR_j (w >> j (8 - bits))`` moves value ``j`` to bit ``j * bits``, so its
low byte is the packed byte. Unpacking spreads a byte back with ``OR_j (w << j (8 - bits))``
and keeps the low ``bits`` of each byte. That is ``k - 1`` shifts per group of ``k`` values
instead of one operation per value.
"""

from __future__ import annotations

import torch

WIDTHS = (1, 2, 4, 8)
_WORD = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def _check(bits: int) -> int:
    if bits not in WIDTHS:
        raise ValueError(f"bits={bits} is invalid; valid: {', '.join(map(str, WIDTHS))}")
    return 8 // bits


def packed_size(count: int, bits: int) -> int:
    """Bytes that ``count`` values of ``bits`` bits occupy."""
    per_byte = _check(bits)
    return -(-count // per_byte)


def pack(values: torch.Tensor, bits: int) -> torch.Tensor:
    """``values``: integers in ``[0, 2**bits)`` (or bools for 1 bit), ``[..., count]`` ->
    uint8 ``[..., packed_size(count, bits)]``. int8 values are read as their bytes (no copy)."""
    per_byte = _check(bits)
    v = values.view(torch.uint8) if values.dtype == torch.int8 else values.to(torch.uint8)
    if per_byte == 1:
        return v.contiguous()
    count = v.shape[-1]
    size = packed_size(count, bits)
    if size * per_byte != count or not v.is_contiguous():
        v = torch.cat([v, v.new_zeros(*v.shape[:-1], size * per_byte - count)], dim=-1)
    word = v.view(_WORD[per_byte]) if v.numel() else v.new_zeros(*v.shape[:-1], size, dtype=_WORD[per_byte])
    packed = word.clone()
    for j in range(1, per_byte):
        packed |= word >> (j * (8 - bits))
    return packed.to(torch.uint8)


def unpack(packed: torch.Tensor, bits: int, count: int) -> torch.Tensor:
    """The first ``count`` values of each row of ``packed`` (uint8, ``[..., bytes]``), as uint8."""
    per_byte = _check(bits)
    if per_byte == 1:
        return packed[..., :count]
    word = packed.to(_WORD[per_byte])
    spread = word.clone()
    for j in range(1, per_byte):
        spread |= word << (j * (8 - bits))
    spread &= int.from_bytes(bytes([(1 << bits) - 1] * per_byte), "little", signed=True)
    values = spread.view(torch.uint8) if spread.numel() else packed.new_zeros(*packed.shape[:-1], 0)
    return values.view(*packed.shape[:-1], packed.shape[-1] * per_byte)[..., :count]
