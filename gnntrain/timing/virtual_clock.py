"""A rank's virtual clock: the time the rank would have reached had it a machine of its own.

Virtual time advances in three ways only:

* by *compute*, the rank's own work between two communication points, as if it had its cores
  to itself. On a CPU that is the CPU time of the rank's thread (``time.thread_time``): a rank
  that the host deschedules while three others share its two cores is not charged for it,
  unlike the wall clock; what sharing still costs (caches and memory bandwidth shared with the
  rank running beside it) is measured by the validation (docs/testing.md). A thread's CPU time
  counts one thread, so on a CPU the virtual clock runs each rank on one torch thread
  (``cluster.threads_per_worker`` 1; a rank with more threads would need their CPU times summed,
  and torch's pool threads spin while they wait, which CPU time would charge as work). On a GPU
  it is the device's time between the two points (CUDA events on the rank's stream).
* by *waiting*: where the rank waits for a transfer, its clock moves to
  ``max(clock, completion)``, the completion that the network model gives from every
  participant's virtual post time (:mod:`gnntrain.timing.links`).
* by the host's cost of the messages the rank sends and receives, the described cluster's
  per-message ``o`` (:meth:`VirtualClock.occupy`: communication, not compute).

The communication calls themselves (their bookkeeping, the real transfer through gloo or NCCL,
the wait for a peer that is late in wall-clock time) advance nothing: :meth:`VirtualClock.skip`
forgets what they took. So a run's virtual times do not depend on how many ranks share this
host's cores, and no sleep is needed: the data moves as fast as the host lets it, and the
network's time is arithmetic.

The host to itself (``cluster.virtual_compute=alone``, the validation's reference,
docs/testing.md): the ranks take turns through a lock file that one rank holds while it
computes, and a rank's compute is the wall time it held it. The rank lets go wherever it may
block (every communication call, every collective outside the meter: :meth:`pause`), and takes
it again to compute. Slower (one rank computes at a time), but nothing shares the core a rank
computes on but the other ranks' communication threads.

A :class:`VirtualClock` serves wherever :class:`gnntrain.timing.clock.Clock` does (marks are virtual
seconds, floats), so every timer of the run (the epoch, evaluation, the meter's operations)
reads virtual time once :func:`gnntrain.timing.clock.use` has made it the device's clock.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import torch


class VirtualClock:
    """One rank's virtual clock (module docstring)."""

    on_device = False
    """Its marks are floats, read at once."""

    def __init__(self, device: torch.device, alone: Path | None = None) -> None:
        """``alone``: the lock file through which the ranks take turns (None: thread CPU time)."""
        self.device = device
        self.cuda = device.type == "cuda"
        self.lock = os.open(alone, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600) if alone is not None else None
        self.holding = False
        self.now = 0.0
        """The virtual time, seconds."""
        self.compute_s = 0.0
        """Virtual seconds of compute so far."""
        self.compute_cpu_s = 0.0
        """On a CPU, the rank's thread CPU time in its compute spans: ``compute_s`` itself, or
        under ``alone`` what of the wall time it held the host its thread ran."""
        self.skipped_s = 0.0
        """The rank's thread CPU seconds that :meth:`skip` forgot: what its communication calls
        took (bookkeeping, posting, copies); not virtual time."""
        self._reading = self._read()

    def _read(self) -> tuple:
        """(what compute is measured on: wall time under ``alone``, thread CPU time, a CUDA event;
        the thread's CPU time)."""
        cpu = time.thread_time()
        if self.lock is not None:
            return time.perf_counter(), cpu
        if not self.cuda:
            return cpu, cpu
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event, cpu

    def _elapsed(self, start: tuple, end: tuple) -> tuple[float, float]:
        """Compute and thread CPU seconds from reading ``start`` to ``end``."""
        cpu = max(0.0, end[1] - start[1])
        if not self.cuda or self.lock is not None:
            return max(0.0, end[0] - start[0]), cpu
        end[0].synchronize()
        return max(0.0, start[0].elapsed_time(end[0]) / 1e3), cpu

    def mark(self) -> float:
        """Now: the clock advanced by the compute since the last reading."""
        if self.lock is not None and not self.holding:
            self._take()
            return self.now
        reading = self._read()
        spent, cpu = self._elapsed(self._reading, reading)
        self._reading = reading
        self.now += spent
        self.compute_s += spent
        self.compute_cpu_s += cpu
        return self.now

    def skip(self) -> None:
        """Forget what the rank did since the last reading (communication, bookkeeping)."""
        if self.lock is not None and not self.holding:
            self._take()
            return
        reading = self._read()
        self.skipped_s += self._elapsed(self._reading, reading)[1]
        self._reading = reading

    def charge(self, seconds: float) -> None:
        """Add the CPU time other threads of the rank spent computing for it (a thread pool
        solving problems while the rank's thread waits for them) as compute: on one thread they
        would have run one after the other. Nothing under ``alone``, whose wall time has them."""
        if self.lock is None and not self.cuda:
            self.now += seconds
            self.compute_s += seconds
            self.compute_cpu_s += seconds

    def pause(self) -> None:
        """The rank is about to block on its peers: under ``alone`` it lets another rank
        compute (nothing otherwise; the wall clock's :class:`gnntrain.timing.clock.Clock` has it too)."""
        if self.lock is not None and self.holding:
            fcntl.flock(self.lock, fcntl.LOCK_UN)
            self.holding = False

    def _take(self) -> None:
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.holding = True
        self._reading = self._read()

    def wait_until(self, completion: float) -> float:
        """A wait on a transfer that completes at ``completion``: the clock moves there unless it
        is already later; what the wait itself took is forgotten. Returns the new time."""
        self.skip()
        self.now = max(self.now, completion)
        return self.now

    def occupy(self, seconds: float) -> None:
        """The host spends ``seconds`` on communication for the rank (the described cluster's
        per-message costs): its clock advances, its compute does not."""
        self.now += seconds

    def seconds(self, start: float, end: float) -> float:
        return end - start

    def host_time(self, mark: float) -> float:
        """Marks are virtual times already (the meter places operations with it)."""
        return mark

    def anchor(self) -> None:
        """Nothing to anchor: every mark is read when taken."""
