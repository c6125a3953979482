"""gnntrain.job.launch.allocator: the heap thresholds are set where glibc is the C library."""

import platform

from gnntrain.job.launch.allocator import keep_freed_memory


def test_keep_freed_memory_applies_under_glibc_and_is_a_no_op_elsewhere():
    assert keep_freed_memory() == (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
