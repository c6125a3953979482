"""A rank's peak memory per epoch: on CUDA the caching allocator's peaks (tensor-level), on CPU
the process's resident high-water mark."""

from __future__ import annotations

import resource
from pathlib import Path

import torch


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
