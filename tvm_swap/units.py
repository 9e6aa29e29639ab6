"""Parsing and printing of sizes, bandwidths and times, the way people write them."""
from __future__ import annotations

import re

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_bytes(text: str | int | float) -> int:
    """'16GB' -> 16e9, '512MiB' -> 512*2**20, '17179869184' -> int. Raises ValueError with a hint."""
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"size must be non-negative, got {text}")
        return int(text)
    m = _SIZE_RE.match(str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(
            f"cannot read size {text!r}: write bytes (17179869184) or a number with a unit "
            f"(16GB, 512MiB, 1.5GiB)"
        )
    return int(round(float(m.group(1)) * _UNITS[m.group(2).lower()]))


def parse_share(text: str) -> float:
    """'25%' -> 0.25 (positive). Raises ValueError with a hint."""
    try:
        frac = float(text.strip()[:-1]) / 100.0
    except ValueError:
        raise ValueError(f"cannot read percentage {text!r}: write e.g. 25%") from None
    if frac <= 0:
        raise ValueError(f"limit {text!r} must be positive")
    return frac


def parse_limit(text: str | int | float, reference_bytes: int | None = None) -> int:
    """A memory limit: a size (see parse_bytes) or a percentage of `reference_bytes` ('25%'). The value that
    travels through a compile is tvm_swap.limits.mem_limit.MemLimit, which parses with these same rules."""
    if isinstance(text, str) and text.strip().endswith("%"):
        if reference_bytes is None:
            raise ValueError(f"limit {text!r} is a percentage, but there is no peak to take it of")
        return int(reference_bytes * parse_share(text))
    return parse_bytes(text)


def parse_bandwidth(text: str | int | float) -> float:
    """'12GB/s' -> 12e9 bytes per second."""
    if isinstance(text, (int, float)):
        return float(text)
    t = str(text).strip()
    if t.lower().endswith("/s"):
        t = t[:-2]
    return float(parse_bytes(t))


def format_bytes(n: float) -> str:
    """Human-readable, binary units: 1536 -> '1.50 KiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def format_seconds(s: float) -> str:
    """0.0123 -> '12.3 ms'."""
    s = float(s)
    if s >= 60:
        return f"{s / 60:.1f} min"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


def percent_at_least(nbytes: int, reference: int) -> float:
    """The percentage (2 decimals) of `reference` that, written as a limit ('79.60%'), gives at least `nbytes`:
    rounded up, so a refusal's percentage is a limit that then plans."""
    import math

    pct = math.ceil(10000 * nbytes / reference) / 100
    while parse_limit(f"{pct}%", reference) < nbytes:
        pct = round(pct + 0.01, 2)
    return pct
