"""Packing of small unsigned integers into bytes, for compact messages.

``pack(values, bits)`` stores ``8 // bits`` values per byte, the first value in the lowest
bits (``bits`` in {1, 2, 4, 8}); the last byte is zero-padded. ``unpack(packed, bits, count)``
inverts it. Boundary-node sampling sends its keep masks at 1 bit per node; quantized halo
exchanges send their integer codes at 2, 4 or 8 bits.
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
    """``values``: 1-D integers in ``[0, 2**bits)`` (or bools for 1 bit) -> 1-D uint8."""
    per_byte = _check(bits)
    v = values.reshape(-1).to(torch.uint8)
    pad = packed_size(v.numel(), bits) * per_byte - v.numel()
    v = torch.cat([v, v.new_zeros(pad)]).view(-1, per_byte)
    shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=v.device)
    return (v << shifts).sum(dim=1, dtype=torch.uint8)


def unpack(packed: torch.Tensor, bits: int, count: int) -> torch.Tensor:
    """The first ``count`` values stored in ``packed`` (uint8), as uint8."""
    per_byte = _check(bits)
    shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=packed.device)
    mask = (1 << bits) - 1
    return ((packed.view(-1, 1) >> shifts) & mask).view(-1)[:count]
