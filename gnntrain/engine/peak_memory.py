"""A rank's peak memory per epoch: on CUDA the caching allocator's peaks (tensor-level), on CPU
the process's resident high-water mark, and on CPU a tensor-level peak measured in one epoch.

On CPU the resident set also holds the interpreter, the libraries, the allocator's cached and
fragmented heap and whatever gnntrain keeps outside tensors, so two methods whose tensors differ
by a few MB show the same few hundred MB. PyTorch keeps no statistics of its CPU allocations;
its profiler with ``profile_memory`` reports every allocation and free made while it runs.
:class:`TensorPeakWindow` measures

    peak = live + max_t sum_{events up to t} bytes(event)

where ``live`` is what the CPU tensors Python can reach hold when the window opens (each
storage once; a sparse tensor's index and value arrays) and the sum runs over the profiler's
memory events in time order (allocations positive, frees negative). Two approximations, both
small against a layer's activations: a tensor held only by C++ when the window opens is missing
from ``live``, and the free of a tensor allocated before the window is not reported by the
profiler, so it still counts (an upper bound for such tensors). The profiler costs a few
microseconds per operator, so the loop measures only the last warm-up epoch, which the timing
means leave out (:mod:`gnntrain.engine.loop`).
"""

from __future__ import annotations

import gc
import os
import resource
from pathlib import Path
from typing import Iterator, Optional

import torch
from torch.profiler import ProfilerActivity, profile


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak-memory window (per epoch): CUDA allocator stats, or Linux's RSS
    high-water mark via ``/proc/self/clear_refs``."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak_memory_mb(device: torch.device) -> tuple[float, float]:
    """Peak memory since :func:`reset_peak_memory`, allocated and reserved: on CUDA the caching
    allocator's peaks; on CPU the peak RSS for both (``VmHWM``; the process lifetime peak where
    that cannot be reset)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, torch.cuda.max_memory_reserved(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                rss = int(line.split()[1]) / 1024
    except OSError:
        pass
    return rss, rss


def _storages(tensor: torch.Tensor) -> Iterator[torch.UntypedStorage]:
    """The storages holding ``tensor``'s data: its own, or a sparse tensor's index and value arrays."""
    if tensor.layout == torch.strided:
        yield tensor.untyped_storage()
    elif tensor.layout in (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc):
        compressed, plain = ((tensor.crow_indices(), tensor.col_indices()) if tensor.layout in (torch.sparse_csr, torch.sparse_bsr)
                             else (tensor.ccol_indices(), tensor.row_indices()))
        for part in (compressed, plain, tensor.values()):
            yield part.untyped_storage()
    elif tensor.layout == torch.sparse_coo:
        for part in (tensor._indices(), tensor._values()):
            yield part.untyped_storage()


def live_tensor_bytes() -> int:
    """Bytes held by the CPU tensors the garbage collector can reach, each storage counted once."""
    seen: set[int] = set()
    total = 0
    for obj in gc.get_objects():
        if not issubclass(type(obj), torch.Tensor) or obj.device.type != "cpu":
            continue
        for storage in _storages(obj):
            if storage.data_ptr() not in seen and storage.nbytes():
                seen.add(storage.data_ptr())
                total += storage.nbytes()
    return total


class TensorPeakWindow:
    """``with TensorPeakWindow() as window: ...``, then ``window.peak_mb``: the CPU tensor-level
    peak of the code run inside (the module's formula), in MiB."""

    def __init__(self) -> None:
        self.peak_mb: Optional[float] = None
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # the profiler's start and stop lines stay off the console

    def __enter__(self) -> "TensorPeakWindow":
        self.live = live_tensor_bytes()
        self.profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        self.profiler.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.profiler.__exit__(*exc)
        events = [e for e in self.profiler.profiler.kineto_results.events() if e.name() == "[memory]"]
        running = highest = 0
        for event in sorted(events, key=lambda e: e.start_ns()):
            running += event.nbytes()
            highest = max(highest, running)
        self.peak_mb = (self.live + highest) / 2**20
