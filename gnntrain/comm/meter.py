"""Byte and time accounting for everything a rank sends.

Every collective goes through :class:`gnntrain.comm.communicator.Communicator`, which records
at the call site the payload bytes this rank hands to the network (rows x width x element
size, plus any metadata) and the seconds the rank spent blocked on it, under a *kind*
(``halo_fwd``, ``halo_bwd``, ``allreduce``, ...). ``wait_s`` is exposed communication: time a
rank could not compute. ``total_s`` is the lifetime of the operation, which differs from
``wait_s`` once operations overlap with compute.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from typing import Iterator


class CommMeter:
    def __init__(self) -> None:
        self.bytes: dict[str, int] = defaultdict(int)
        self.wait_s: dict[str, float] = defaultdict(float)
        self.total_s: dict[str, float] = defaultdict(float)
        self._prefix = ""

    def record(self, kind: str, nbytes: int, wait_s: float, total_s: float | None = None) -> None:
        key = self._prefix + kind
        self.bytes[key] += int(nbytes)
        self.wait_s[key] += wait_s
        self.total_s[key] += wait_s if total_s is None else total_s

    @contextlib.contextmanager
    def tagged(self, prefix: str) -> Iterator[None]:
        """Record under ``prefix + kind`` inside the block (e.g. ``eval_`` for evaluation)."""
        saved, self._prefix = self._prefix, prefix
        try:
            yield
        finally:
            self._prefix = saved

    def reset(self) -> None:
        self.bytes.clear()
        self.wait_s.clear()
        self.total_s.clear()
