"""Keep freed memory in the process for reuse, so large CPU tensors stop paying page faults.

glibc's ``malloc`` serves every block above its mmap threshold (128 KiB, raised dynamically to
at most 32 MiB) with a fresh ``mmap`` and unmaps it on ``free``. A full graph's activations,
gradients, dropout masks and quantized messages are tens to hundreds of MB each, so every such
tensor comes back from the OS as untouched pages and pays one page fault per 4 KiB when first
written: an elementwise op on a 200 MB tensor took 61 ms with fresh pages and 9 ms with reused
ones on the bench machine (``scripts/bench_speed.py`` measures the epochs). Raising the mmap and
trim thresholds with ``mallopt`` makes freed blocks stay in the heap and serve the next
allocation (torch's own CPU allocator does no caching). The cost: a process's resident memory
stays at its peak instead of shrinking after it. The same remedy as PyTorch's CPU tuning guide's
jemalloc/tcmalloc, without preloading a library. Linux with glibc only; a no-op elsewhere.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
LARGEST = 2 ** 31 - 1
"""mallopt takes an ``int``: blocks up to 2 GiB come from the heap."""


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds to their largest values; whether it applied."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    return bool(libc.mallopt(M_MMAP_THRESHOLD, LARGEST)) and bool(libc.mallopt(M_TRIM_THRESHOLD, LARGEST))
