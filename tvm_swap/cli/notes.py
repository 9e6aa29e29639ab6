"""What the commands tell the user beside their results: one vocabulary for the numbers (LABELS), the files a
compile wrote and what each is for, a warning when a limit exceeds the device it is planned for, and what the
demo emulates and why its measured time differs from the prediction."""
from __future__ import annotations

from pathlib import Path

from ..units import format_bytes
from ..vocabulary import LABELS, label  # noqa: F401  (the numbers' words: re-exported for the commands)


def demo_emulation(device, bandwidth) -> str:
    """One line: what `tvm-swap demo` runs on instead of a GPU."""
    link = (f"throttled to {bandwidth} each way" if bandwidth else
            "at memory-copy speed (no throttle; --bandwidth 12GB/s emulates PCIe 3)")
    return (f"emulating a GPU on the CPU: 'device' memory is a pool in host RAM held to the limit, the host link's "
            f"copies run on their own threads {link}; the plan was made for the '{device.name}' spec "
            f"(link {device.h2d_bandwidth / 1e9:.0f} GB/s)")


def time_gap(measured_s: float, predicted_s: float, bandwidth) -> str | None:
    """One line explaining a measured time more than 10% away from the prediction, else None."""
    if not measured_s or not predicted_s:
        return None
    r = measured_s / predicted_s
    if abs(r - 1) <= 0.10:
        return None
    if r > 1:
        why = ("the prediction times each kernel alone, while here kernels and copies share the CPU's cores and "
               "memory bandwidth with each other" + ("" if bandwidth else " (and with anything else running)"))
    else:
        why = ("the kernels ran faster than when they were profiled (profiled on a busier machine, or warmer "
               "caches now)")
    return f"measured {r:.2f}x the predicted time: {why}"


def compiled_files(output: str) -> list[tuple[str, str]]:
    """(path, what it is) of every file `tvm-swap compile -o OUTPUT` writes, those that exist."""
    from runtime_ext.library_check import CHECK_SUFFIX
    from runtime_ext.swap_module import PARAMS_SUFFIX

    from .run import INPUTS_SUFFIX
    from .unlimited import UNLIMITED_SUFFIX

    parts = [("", "the library: kernels, plan, manifest and params (tvm-swap run / tvm_swap.load)"),
             (PARAMS_SUFFIX, "its params (older compiles; load reads them from beside the library)"),
             (CHECK_SUFFIX, "size and SHA-256 that load checks the library against"),
             (INPUTS_SUFFIX, "example inputs that `tvm-swap run` uses when none are given"),
             (UNLIMITED_SUFFIX, "the same model built without a limit (older compiles; `run --compare-unlimited` "
                                "now builds it on demand, cached)")]
    return [(output + s, what) for s, what in parts if Path(output + s).exists()]


def limit_above_device(limit_bytes: int, device) -> str | None:
    """A warning when `limit_bytes` exceeds the memory of DeviceSpec `device` (the plan assumes memory it lacks)."""
    mem = int(getattr(device, "memory_bytes", 0) or 0)
    if mem and limit_bytes > mem:
        return (f"warning: the limit {format_bytes(limit_bytes)} is more than {device.name}'s "
                f"{format_bytes(mem)} of memory; the plan assumes memory that device does not have "
                f"(lower --mem-limit, or pass --device for the device you will run on)")
    return None


__all__ = ["LABELS", "label", "compiled_files", "limit_above_device", "demo_emulation", "time_gap"]
