"""Packing of small unsigned integers into bytes, for compact messages.

``pack(values, bits)`` packs the last dimension, ``8 // bits`` values per byte, the first value
in the lowest bits (``bits`` in {1, 2, 4, 8}); the last byte of each row is zero-padded.
``unpack(packed, bits, count)`` inverts it. Boundary-node sampling sends its keep masks at 1
bit per node; quantized halo exchanges send their integer codes at 2, 4 or 8 bits.
"""

from __future__ import annotations

import torch

WIDTHS = (1, 2, 4, 8)


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
    uint8 ``[..., packed_size(count, bits)]``."""
    per_byte = _check(bits)
    v = values.to(torch.uint8)
    count = v.shape[-1]
    size = packed_size(count, bits)
    v = torch.cat([v, v.new_zeros(*v.shape[:-1], size * per_byte - count)], dim=-1).view(*v.shape[:-1], size, per_byte)
    shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=v.device)
    return (v << shifts).sum(dim=-1, dtype=torch.uint8)


def unpack(packed: torch.Tensor, bits: int, count: int) -> torch.Tensor:
    """The first ``count`` values of each row of ``packed`` (uint8, ``[..., bytes]``), as uint8."""
    per_byte = _check(bits)
    shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=packed.device)
    mask = (1 << bits) - 1
    values = (packed.unsqueeze(-1) >> shifts) & mask
    return values.view(*packed.shape[:-1], packed.shape[-1] * per_byte)[..., :count]
