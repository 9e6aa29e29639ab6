"""One vocabulary for the numbers every command prints (issue 16): JSON key -> the words text output uses.

The keys are those of `tvm-swap plan/compile/run/demo --json` and of SwapModule.stats() alike; the README's
"The numbers" section defines each. Used by the command line (cli.notes) and the HTML report (report.html).
No TVM here.
"""
from __future__ import annotations

LABELS = {
    "mem_limit_bytes": "limit",
    "pool_bytes": "pool (device bytes planned)",
    "peak_bytes": "in use at most (predicted)",
    "device_peak_bytes": "device peak (measured)",
    "no_swap_bytes": "no-swap need (100%)",
    "liveness_peak_bytes": "liveness peak (ideal)",
    "limit_vs_no_swap": "limit / no-swap need",
    "limit_vs_liveness_peak": "limit / liveness peak",
    "device_peak_vs_no_swap": "device peak / no-swap need",
    "predicted_time_s": "time per call (predicted)",
    "time_s": "time per call (measured)",
    "unlimited_time_s": "time per call, unlimited build",
}


def label(key: str) -> str:
    return LABELS.get(key, key)


__all__ = ["LABELS", "label"]
