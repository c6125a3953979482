"""Rows on the wire in a 16-bit float format: the cheap baseline of message compression.

``bfloat16`` keeps float32's exponent range and 8 bits of mantissa (a relative rounding error
of at most 2^-9); ``float16`` keeps 11 bits of mantissa but overflows above 65504 and flushes
below 6e-8 (no loss scaling here, so tiny halo gradients may vanish). Each row is rounded to
nearest once by the sender and widened back to the compute dtype by the receiver; the rows
travel as their bytes (``uint8``, which every backend moves, :mod:`gnntrain.comm.dtypes`), so a
row of ``D`` values is counted at exactly ``2 D`` bytes.
"""

from __future__ import annotations

import torch

from gnntrain.comm.communicator import Communicator, InFlight


def start_half(comm: Communicator, rows: torch.Tensor, wire: torch.dtype, send_splits: list[int],
               recv_splits: list[int], kind: str) -> InFlight:
    """Start the all-to-all of ``rows`` rounded to ``wire``; waiting yields them in ``rows``' dtype."""
    dtype = rows.dtype
    patterns = rows.detach().to(wire).view(torch.uint8)
    return comm.all_to_all_start(patterns, send_splits, recv_splits, kind,
                                 decode=lambda arrived: arrived.view(wire).to(dtype))
