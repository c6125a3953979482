"""One timing rule for work that may run on a device: marks on the device's timeline.

On a CUDA device the host runs ahead of the device: a kernel, a copy or an NCCL collective is
queued and the call returns, and ``work.wait()`` only makes the stream wait. A host clock read
around such work measures how long the host took to queue it, not how long it ran. So every
timer that spans device work takes :meth:`Clock.mark`\\ s:

* on a CPU a mark is the host's ``perf_counter`` when the host gets there (the work is done
  then);
* on CUDA a mark is an event recorded on the current stream: the moment the *device* reaches
  that point of the work queued before it.

:meth:`Clock.seconds` of two marks is the time between them on that timeline (for CUDA events
it waits until the later one has happened). :meth:`Clock.host_time` places a mark on the host's
``perf_counter`` scale, which every process of a machine shares (a callback's time): a CUDA
mark is placed from the anchor, an event the host saw
happen at a known host time, taken afresh by :meth:`Clock.anchor` (each epoch, so the two
clocks cannot drift apart). Where an event cannot serve, e.g. a transfer's start that must be
known on the host when the transfer starts, :meth:`Clock.host_time` waits for the device to
get there: a synchronisation, taken only where it is needed.

So a CPU and a GPU figure of the same metric mean the same thing: the time the work took where
it ran.
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator, Union

import torch

Mark = Union[float, "torch.cuda.Event"]


class Clock:
    """Marks on one device's timeline (module docstring)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.on_device = device.type == "cuda"
        self._anchor: tuple[torch.cuda.Event, float] | None = None

    def mark(self) -> Mark:
        """Now, on the device's timeline: the host's clock on a CPU, an event on the current
        CUDA stream."""
        if not self.on_device:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.device))
        return event

    def seconds(self, start: Mark, end: Mark) -> float:
        """Seconds from ``start`` to ``end`` (waits for ``end`` to happen on the device)."""
        if isinstance(start, float) and isinstance(end, float):
            return end - start
        if isinstance(start, float) or isinstance(end, float):
            return self.host_time(end) - self.host_time(start)
        start.synchronize()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def host_time(self, mark: Mark) -> float:
        """``mark`` on the host's ``perf_counter`` scale; a CUDA event is waited for first."""
        if isinstance(mark, float):
            return mark
        if self._anchor is None:
            self.anchor()
        event, at = self._anchor  # type: ignore[misc]
        mark.synchronize()
        return at + event.elapsed_time(mark) / 1e3

    def charge(self, seconds: float) -> None:
        """Nothing: the host's clock has the time other threads computed for the rank in it (a
        virtual clock adds it, :meth:`gnntrain.timing.virtual_clock.VirtualClock.charge`)."""

    def pause(self) -> None:
        """Nothing: the rank is about to block on its peers (a virtual clock may let another rank
        compute then, :meth:`gnntrain.timing.virtual_clock.VirtualClock.pause`)."""

    def anchor(self) -> None:
        """Wait for the current stream's work and take a new anchor (an event the host sees
        happen now). Only the current stream: transfers still in flight on other streams (a
        stale halo exchange crossing the epoch boundary) go on, as they do on a CPU."""
        if not self.on_device:
            return
        stream = torch.cuda.current_stream(self.device)
        stream.synchronize()
        event = torch.cuda.Event(enable_timing=True)
        event.record(stream)
        event.synchronize()
        self._anchor = (event, time.perf_counter())


_CLOCKS: dict[torch.device, Clock] = {}


def _key(device: torch.device | str) -> torch.device:
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def use(clock) -> None:
    """Make ``clock`` (a :class:`gnntrain.timing.virtual_clock.VirtualClock`) the process's clock of its
    device: every timer made from now on reads it."""
    _CLOCKS[_key(clock.device)] = clock


def clock_of(device: torch.device | str) -> Clock:
    """The process's clock of ``device`` (one per device, so every timer shares its anchor): the
    device's timeline, or the rank's virtual clock under ``cluster.clock=virtual`` (:func:`use`)."""
    device = _key(device)
    if device not in _CLOCKS:
        _CLOCKS[device] = Clock(device)
    return _CLOCKS[device]


_NAMER: list = []
"""The rank that names its compute spans (a traced virtual rank), if any."""


def name_phases(rank) -> None:
    """Let ``rank`` (None: no rank; a :class:`~gnntrain.timing.virtual_rank.VirtualRank` that traces) name its
    compute spans after the phases :func:`phase` opens."""
    _NAMER[:] = [] if rank is None else [rank]


@contextlib.contextmanager
def _named(name: str) -> Iterator[None]:
    namer = _NAMER[0]
    namer.enter(name)
    try:
        yield
    finally:
        namer.exit()


_UNNAMED = contextlib.nullcontext()


def phase(name: str) -> contextlib.AbstractContextManager:
    """The compute inside the block is the phase ``name`` (``forward layer 1``, ``backward``,
    ``optimizer step``, a strategy's own) in the trace: where a traced rank names its spans,
    else nothing (no clock is read)."""
    return _named(name) if _NAMER else _UNNAMED


def naming() -> bool:
    """Whether a traced rank names its compute spans (so hooks that name them are worth adding)."""
    return bool(_NAMER)


def relabel(name: str) -> None:
    """The open phase is ``name`` from now on (the compute so far keeps its old name), where a
    traced rank names its spans: a backward pass has one phase, ``backward``, and autograd's hooks
    name its layers as it reaches them."""
    if _NAMER:
        _NAMER[0].relabel(name)


class WallRank:
    """A rank on the wall clock, as the epoch loop sees it: the questions a
    :class:`~gnntrain.timing.virtual_rank.VirtualRank` answers, answered for the real transport."""

    one_origin = False
    """The ranks' clocks are their hosts': the loop measures their offsets."""

    def __init__(self, device: torch.device) -> None:
        self.clock = clock_of(device)

    def begin_epoch(self) -> None:
        """Nothing: the host's clock runs on."""

    def counters(self) -> dict[str, float]:
        """What the rank's clock counts apart, so far (nothing on the wall clock)."""
        return {}

    def epoch(self, epoch: int, start: Mark, end: Mark) -> None:
        """Nothing to trace."""

    def finish(self) -> None:
        """Nothing to write."""


class Stopwatch:
    """Seconds spent in the timed sections (``with watch:``) since the last :meth:`reset`, on
    the device's timeline; read with :attr:`seconds` once the device may have passed them."""

    def __init__(self, device: torch.device | str) -> None:
        self.clock = clock_of(device)
        self.spans: list[tuple[Mark, Mark]] = []
        self._start: Mark | None = None

    def __enter__(self) -> Stopwatch:
        self._start = self.clock.mark()
        return self

    def __exit__(self, *exc: object) -> None:
        self.spans.append((self._start, self.clock.mark()))  # type: ignore[arg-type]

    @property
    def seconds(self) -> float:
        return sum(self.clock.seconds(start, end) for start, end in self.spans)

    def laps(self) -> list[float]:
        """Each timed section's seconds, in order."""
        return [self.clock.seconds(start, end) for start, end in self.spans]

    def reset(self) -> None:
        self.spans.clear()
