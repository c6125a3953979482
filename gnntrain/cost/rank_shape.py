"""What a rank holds, as a method's memory declaration sees it (torch-free: the strategies'
declarations import it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankShape:
    """What a rank holds, as a method's :attr:`Method.memory` sees it (:mod:`gnntrain.cost.memory`)."""

    inner: int
    """Inner nodes."""
    halo: int
    """Halo rows one exchange brings in."""
    sent: int
    """Rows one exchange sends (its inner rows, once per peer that reads them)."""
    edges: int
    """In-edges of its inner nodes."""
    widths: tuple[int, ...]
    """Each message-passing layer's input width: the widths its halo exchanges move."""
    value_bytes: int
    """Bytes per value of the training dtype."""
