"""Quantized all-to-all of rows: each row travels at its own bit-width (AdaQP, Sec. 3.3 and 5).

The rows bound for one peer are grouped by bit-width (2, 4, 8, then 32 = unquantized), each
group's rows keep their order, and the groups go back to back as fixed-size records
(:mod:`gnntrain.comm.quantize`). Sender and receiver hold the same per-row bit-widths (a
:class:`BitPlan`), so both know every peer's byte count without a size message.
"""

from __future__ import annotations

from typing import Protocol

import torch

from gnntrain.comm.communicator import Communicator, InFlight
from gnntrain.comm.quantize import FULL, WIDTHS, dequantize, quantize, record_bytes

ALL_WIDTHS = (*WIDTHS, FULL)


class BitPlan(Protocol):
    def bits(self, layer: int, direction: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Bit-width of every row this rank sends and of every row it receives in layer
        ``layer``'s ``direction`` ("fwd": features, in send-index and halo order; "bwd":
        gradients, in halo and send-index order)."""
        ...

    def observe(self, layer: int, direction: str, received: torch.Tensor) -> None:
        """The dequantized rows that arrived (for plans that adapt to them)."""
        ...


def _counts(bits: torch.Tensor, splits: list[int]) -> torch.Tensor:
    """``[peers, widths]`` number of rows per peer and width."""
    device = bits.device
    peer = torch.repeat_interleave(torch.arange(len(splits), device=device),
                                   torch.tensor(splits, dtype=torch.long, device=device))
    width = torch.searchsorted(torch.tensor(ALL_WIDTHS, device=device), bits.long())
    return torch.bincount(peer * len(ALL_WIDTHS) + width, minlength=len(splits) * len(ALL_WIDTHS)).view(
        len(splits), len(ALL_WIDTHS))


def _single_width(counts: torch.Tensor) -> int | None:
    """The one width all rows have, if they have one and there are rows."""
    used = (counts.sum(dim=0) > 0).nonzero().flatten().tolist()
    return ALL_WIDTHS[used[0]] if len(used) == 1 else None


def byte_splits(bits: torch.Tensor, splits: list[int], dim: int) -> list[int]:
    """Bytes per peer of rows of ``dim`` values with these bit-widths."""
    sizes = torch.tensor([record_bytes(dim, b) for b in ALL_WIDTHS], device=bits.device)
    return (_counts(bits, splits) * sizes).sum(dim=1).tolist()


def encode(rows: torch.Tensor, bits: torch.Tensor, splits: list[int],
           generator: torch.Generator | None = None) -> torch.Tensor:
    """Rows stacked in peer order (``splits[q]`` for peer ``q``) -> one uint8 buffer."""
    counts = _counts(bits, splits)
    single = _single_width(counts)
    if single is not None:  # the buffer is every row's record in order
        return quantize(rows, single, generator).reshape(-1)
    records = {w: quantize(rows[bits == w], w, generator) for i, w in enumerate(ALL_WIDTHS) if counts[:, i].any()}
    offsets = dict.fromkeys(records, 0)
    chunks = []
    for q in range(len(splits)):
        for i, w in enumerate(ALL_WIDTHS):
            n = int(counts[q, i])
            if n:
                chunks.append(records[w][offsets[w]: offsets[w] + n].reshape(-1))
                offsets[w] += n
    return torch.cat(chunks) if chunks else rows.new_empty(0, dtype=torch.uint8)


def decode(buffer: torch.Tensor, bits: torch.Tensor, splits: list[int], dim: int) -> torch.Tensor:
    """The inverse of :func:`encode` on the receiving side: ``[sum(splits), dim]`` float32."""
    counts = _counts(bits, splits)
    single = _single_width(counts)
    if single is not None:
        return dequantize(buffer.view(bits.numel(), record_bytes(dim, single)), single, dim)
    parts: dict[int, list[torch.Tensor]] = {w: [] for w in ALL_WIDTHS}
    start = 0
    for q in range(len(splits)):
        for i, w in enumerate(ALL_WIDTHS):
            n, size = int(counts[q, i]), record_bytes(dim, w)
            if n:
                parts[w].append(buffer[start: start + n * size].view(n, size))
                start += n * size
    out = torch.empty(bits.numel(), dim, dtype=torch.float32, device=buffer.device)
    for w, blocks in parts.items():
        if blocks:
            out[bits == w] = dequantize(torch.cat(blocks), w, dim)
    return out


def start_quantized(comm: Communicator, rows: torch.Tensor, plan: BitPlan, layer: int, direction: str,
                    send_splits: list[int], recv_splits: list[int], kind: str,
                    generator: torch.Generator | None = None) -> InFlight:
    """Start the exchange of ``rows`` quantized as ``plan`` says; waiting yields the received
    rows dequantized (in ``rows``' dtype)."""
    send_bits, recv_bits = plan.bits(layer, direction)
    dim = rows.shape[1]

    def receive(buffer: torch.Tensor) -> torch.Tensor:
        received = decode(buffer, recv_bits, recv_splits, dim).to(rows.dtype)
        plan.observe(layer, direction, received)
        return received

    return comm.all_to_all_start(encode(rows, send_bits, send_splits, generator),
                                 byte_splits(send_bits, send_splits, dim), byte_splits(recv_bits, recv_splits, dim),
                                 kind, decode=receive)
