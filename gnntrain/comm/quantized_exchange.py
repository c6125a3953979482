"""Quantized all-to-all of rows: each row travels at its own bit-width (AdaQP, Sec. 3.3 and 5).

The rows bound for one peer are grouped by bit-width (2, 4, 8, then 32 = unquantized), each
group's rows keep their order, and the groups go back to back as fixed-size records
(:mod:`gnntrain.comm.quantize`). Sender and receiver hold the same per-row bit-widths (a
:class:`BitPlan`), so both know every peer's byte count without a size message.

Where each width's rows lie (:class:`WidthLayout`: rows per peer and width, and each width's
row positions) depends on the widths alone, which change once per assignment at most; a plan
computes it once per set of widths, so an exchange reads nothing back from the device to
lay out its records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from gnntrain.comm.communicator import Communicator, InFlight
from gnntrain.comm.quantize import FULL, WIDTHS, dequantize, quantize, record_bytes
from gnntrain.timing.clock import phase

ALL_WIDTHS = (*WIDTHS, FULL)


@dataclass(frozen=True)
class WidthLayout:
    """The rows of one direction of an exchange, stacked in peer order, by bit-width."""

    counts: list[list[int]]
    """Rows per peer and width (``ALL_WIDTHS`` order)."""
    rows: dict[int, torch.Tensor]
    """Per width present, the positions of its rows (ascending), on the bits' device."""

    @classmethod
    def of(cls, bits: torch.Tensor, splits: list[int]) -> WidthLayout:
        """The layout of rows with widths ``bits``, ``splits[q]`` of them for peer ``q``."""
        device = bits.device
        peer = torch.repeat_interleave(torch.arange(len(splits), device=device),
                                       torch.tensor(splits, dtype=torch.long, device=device), output_size=bits.numel())
        width = torch.searchsorted(torch.tensor(ALL_WIDTHS, device=device), bits.long())
        counts = torch.bincount(peer * len(ALL_WIDTHS) + width, minlength=len(splits) * len(ALL_WIDTHS))
        counts = counts.view(len(splits), len(ALL_WIDTHS)).tolist()
        present = [w for i, w in enumerate(ALL_WIDTHS) if any(row[i] for row in counts)]
        return cls(counts, {w: (bits == w).nonzero().view(-1) for w in present})

    @property
    def single(self) -> int | None:
        """The one width all rows have, if they have one and there are rows."""
        return next(iter(self.rows)) if len(self.rows) == 1 else None

    def byte_splits(self, dim: int) -> list[int]:
        """Bytes per peer of rows of ``dim`` values."""
        sizes = [record_bytes(dim, w) for w in ALL_WIDTHS]
        return [sum(n * size for n, size in zip(row, sizes)) for row in self.counts]

    def pieces(self) -> list[tuple[int, int]]:
        """(width, rows) of each group of records, in buffer order: peer by peer, width by width."""
        return [(w, n) for row in self.counts for w, n in zip(ALL_WIDTHS, row) if n]


class BitPlan(Protocol):
    def bits(self, layer: int, direction: str) -> tuple[torch.Tensor, torch.Tensor]:
        """Bit-width of every row this rank sends and of every row it receives in layer
        ``layer``'s ``direction`` ("fwd": features, in send-index and halo order; "bwd":
        gradients, in halo and send-index order)."""
        ...

    def layouts(self, layer: int, direction: str) -> tuple[WidthLayout, WidthLayout]:
        """The :class:`WidthLayout` of the rows this rank sends and of those it receives."""
        ...

    def observe(self, layer: int, direction: str, received: torch.Tensor) -> None:
        """The dequantized rows that arrived (for plans that adapt to them)."""
        ...


def encode(rows: torch.Tensor, layout: WidthLayout, generator: torch.Generator | None = None) -> torch.Tensor:
    """Rows stacked in peer order -> one uint8 buffer."""
    if layout.single is not None:  # the buffer is every row's record in order
        return quantize(rows, layout.single, generator).reshape(-1)
    records = {w: quantize(rows.index_select(0, at), w, generator) for w, at in layout.rows.items()}
    offsets = dict.fromkeys(records, 0)
    chunks = []
    for w, n in layout.pieces():
        chunks.append(records[w][offsets[w]: offsets[w] + n].reshape(-1))
        offsets[w] += n
    return torch.cat(chunks) if chunks else rows.new_empty(0, dtype=torch.uint8)


def decode(buffer: torch.Tensor, layout: WidthLayout, dim: int) -> torch.Tensor:
    """The inverse of :func:`encode` on the receiving side: ``[rows, dim]`` float32."""
    count = sum(at.numel() for at in layout.rows.values())
    if layout.single is not None:
        return dequantize(buffer.view(count, record_bytes(dim, layout.single)), layout.single, dim)
    parts: dict[int, list[torch.Tensor]] = {w: [] for w in layout.rows}
    start = 0
    for w, n in layout.pieces():
        size = record_bytes(dim, w)
        parts[w].append(buffer[start: start + n * size].view(n, size))
        start += n * size
    out = torch.empty(count, dim, dtype=torch.float32, device=buffer.device)
    for w, blocks in parts.items():
        out.index_copy_(0, layout.rows[w], dequantize(torch.cat(blocks), w, dim))
    return out


def start_quantized(comm: Communicator, rows: torch.Tensor, plan: BitPlan, layer: int, direction: str, kind: str,
                    generator: torch.Generator | None = None) -> InFlight:
    """Start the exchange of ``rows`` quantized as ``plan`` says; waiting yields the received
    rows dequantized (in ``rows``' dtype)."""
    send, recv = plan.layouts(layer, direction)
    dim = rows.shape[1]

    def receive(buffer: torch.Tensor) -> torch.Tensor:
        with phase("dequantize"):
            received = decode(buffer, recv, dim).to(rows.dtype)
            plan.observe(layer, direction, received)
        return received

    with phase("quantize"):
        payload = encode(rows, send, generator)
    return comm.all_to_all_start(payload, send.byte_splits(dim), recv.byte_splits(dim), kind, decode=receive)
