"""Host memory a plan needs, checked before a module allocates it: one buffer per swapped-out tensor and per
persistent tensor kept on the host (runtime_ext.host_store), plus the spare buffer an update renamed into a
param leaves behind. A plan that needs more than the host has would fail mid-call (or swap the host itself);
it is refused up front with both numbers."""
from __future__ import annotations

import os

from tvm_swap.errors import TvmSwapError
from tvm_swap.units import format_bytes


class HostMemoryError(TvmSwapError):
    """The host cannot hold what the plan swaps out."""


def available_host_bytes() -> int | None:
    """Host memory available now (Linux MemAvailable; else free physical pages), None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def host_bytes_needed(swapped_out, persistent, initial, needs_host, end_updates, nbytes) -> int:
    """Bytes of host buffers a PlanExecutor allocates (see the module docstring); `nbytes(t)` sizes tensor t."""
    resident = {t for t, _ in initial}
    held = set(swapped_out) | {p for p in persistent if p not in resident or p in needs_host}
    spare = {new for new, old in end_updates if old not in held}
    return int(sum(nbytes(t) for t in held | spare))


def check_host_memory(need: int) -> None:
    avail = available_host_bytes()
    if avail is not None and need > avail:
        raise HostMemoryError(
            f"the plan keeps {format_bytes(need)} ({need} bytes) of swapped-out tensors and params on the host, "
            f"but only {format_bytes(avail)} ({avail} bytes) of host memory is available: free host memory, "
            f"or build with a larger mem_limit so that less is swapped out")
