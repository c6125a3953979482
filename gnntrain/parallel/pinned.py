"""Host-to-device copies that repeat, through one page-locked buffer.

Some tensors are made on the host again and again and then needed on the device: each
mini-batch iteration's roots (dealt on the host from the seeded permutation), each epoch's boundary
sample (drawn from a CPU generator so that a seed samples the same graph on every device). A
copy from ordinary (pageable) host memory is staged by the driver through a pinned buffer of
its own and holds the host until it is done; a copy from page-locked memory runs
asynchronously while the host goes on. :class:`PinnedStaging` packs the tensors of one copy
into its page-locked buffer, moves them in one asynchronous copy and hands back device tensors
(views of one device allocation); it reuses the buffer once the device has read the previous
copy (an event guards it). On a CPU device it returns the tensors as they are.
"""

from __future__ import annotations

import torch

ALIGN = 16
"""Bytes each tensor's place in the buffer is aligned to (any element type can view it)."""


class PinnedStaging:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.buffer: torch.Tensor | None = None
        self.read: torch.cuda.Event | None = None
        """Recorded after the last copy out of the buffer: the buffer is free once it has happened."""

    def to_device(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """``tensors`` (on the host) on the device, in one asynchronous copy."""
        if self.device.type == "cpu":
            return list(tensors)
        sizes = [t.numel() * t.element_size() for t in tensors]
        offsets, total = [], 0
        for size in sizes:
            offsets.append(total)
            total += -(-size // ALIGN) * ALIGN
        if self.read is not None:
            self.read.synchronize()
        if self.buffer is None or self.buffer.numel() < total:
            self.buffer = torch.empty(max(total, 2 * (0 if self.buffer is None else self.buffer.numel())),
                                      dtype=torch.uint8, pin_memory=True)
        for t, offset, size in zip(tensors, offsets, sizes):
            self.buffer[offset: offset + size].view(t.dtype).view(t.shape).copy_(t)
        arrived = self.buffer[:total].to(self.device, non_blocking=True)
        self.read = torch.cuda.Event()
        self.read.record(torch.cuda.current_stream(self.device))
        return [arrived[offset: offset + size].view(t.dtype).view(t.shape)
                for t, offset, size in zip(tensors, offsets, sizes)]

    def one(self, tensor: torch.Tensor) -> torch.Tensor:
        """One host tensor on the device (:meth:`to_device`)."""
        return self.to_device([tensor])[0]
