"""What the commands tell the user beside their results: the files a compile wrote and what each is for, and
a warning when a limit exceeds the device it is planned for."""
from __future__ import annotations

from pathlib import Path

from ..units import format_bytes


def compiled_files(output: str) -> list[tuple[str, str]]:
    """(path, what it is) of every file `tvm-swap compile -o OUTPUT` writes, those that exist."""
    from runtime_ext.library_check import CHECK_SUFFIX
    from runtime_ext.swap_module import PARAMS_SUFFIX

    from .run import INPUTS_SUFFIX, UNLIMITED_SUFFIX

    parts = [("", "the library: kernels, plan and manifest (tvm-swap run / tvm_swap.load)"),
             (PARAMS_SUFFIX, "its params; load reads them from beside the library"),
             (CHECK_SUFFIX, "size and SHA-256 that load checks the library against"),
             (INPUTS_SUFFIX, "example inputs that `tvm-swap run` uses when none are given"),
             (UNLIMITED_SUFFIX, "the same model built without a limit, for `tvm-swap run --compare-unlimited`")]
    return [(output + s, what) for s, what in parts if Path(output + s).exists()]


def limit_above_device(limit_bytes: int, device) -> str | None:
    """A warning when `limit_bytes` exceeds the memory of DeviceSpec `device` (the plan assumes memory it lacks)."""
    mem = int(getattr(device, "memory_bytes", 0) or 0)
    if mem and limit_bytes > mem:
        return (f"warning: the limit {format_bytes(limit_bytes)} is more than {device.name}'s "
                f"{format_bytes(mem)} of memory; the plan assumes memory that device does not have "
                f"(lower --mem-limit, or pass --device for the device you will run on)")
    return None


__all__ = ["compiled_files", "limit_above_device"]
