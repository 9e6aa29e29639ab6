"""Kernel timings kept on disk, so the second compile of a model skips profiling (tvm_swap.cost.profile).

    cache = kernel_timings_for("llvm")                       # a CostTable read from the cache folder
    profile_times(lowered, graph, target, cache=cache)       # fills in what is missing
    cache.flush()                                            # merges the new entries into the file

An entry is keyed by kernel name, argument shapes and the kernel's structural hash (its source, in effect; see
tvm_swap.graph.extract), inside one file per target and device: the full target string and, for the CPU, the
processor's model name and core count, so timings never travel between machines or targets. `refresh=True`
ignores what is stored and overwrites it (`tvm-swap compile --refresh-timings`).

The folder: $TVM_SWAP_CACHE_DIR, else $XDG_CACHE_HOME/tvm_swap, else ~/.cache/tvm_swap. Files are replaced
atomically after merging with what is on disk then, so two compiles at once lose nothing but a race's entries.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .table import CostTable

CACHE_ENV = "TVM_SWAP_CACHE_DIR"


def cache_dir() -> Path:
    """The folder of tvm_swap's caches (not created here)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tvm_swap"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def device_identity(target_text: str, device_text: str) -> str:
    """What a timing is only valid on: the target string and the device (for CPUs: model and core count)."""
    if device_text.startswith("cpu"):
        device_text = f"{device_text} {cpu_name()} x{os.cpu_count()}"
    return f"{target_text} | {device_text}"


class KernelTimings(CostTable):
    """A CostTable backed by one cache file; `flush()` writes the entries added since it was opened."""

    def __init__(self, path: Path, identity: str, refresh: bool = False):
        self.path, self.identity, self.refresh = Path(path), identity, bool(refresh)
        super().__init__({} if refresh else _read_entries(self.path))
        self.hits = 0
        self.misses = 0
        self._new: dict[str, float] = {}

    def get(self, key: str) -> float | None:
        t = super().get(key)
        self.hits += t is not None
        self.misses += t is None
        return t

    def put(self, key: str, seconds: float) -> None:
        super().put(key, seconds)
        self._new[key] = float(seconds)

    def flush(self) -> None:
        if not self._new:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        entries = _read_entries(self.path)     # what others wrote meanwhile; ours (refreshed or new) win
        entries.update(self._new)
        doc = {**CostTable(entries).to_dict(), "identity": self.identity}
        fd, tmp = tempfile.mkstemp(prefix=".timings-", dir=self.path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=0, sort_keys=True)
        os.replace(tmp, self.path)
        self._new.clear()


def _read_entries(path: Path) -> dict:
    """The file's entries; an unreadable or foreign file counts as empty (it is only a cache)."""
    try:
        return dict(CostTable.load(path).entries)
    except Exception:  # noqa: BLE001 - missing, truncated by a crash, or an older format: profile again
        return {}


def open_kernel_timings(target_text: str, device_text: str, refresh: bool = False) -> KernelTimings:
    """The cached kernel timings for this target and device (see the module docstring)."""
    identity = device_identity(target_text, device_text)
    name = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return KernelTimings(cache_dir() / "kernel-timings" / f"{name}.json", identity, refresh)


def kernel_timings_for(target, refresh: bool = False) -> KernelTimings:
    """The cache profile_times reads for `target` (a string or tvm Target) on device 0 of its kind."""
    from relay_passes.lower import as_target

    t = as_target(target)
    return open_kernel_timings(str(t), f"{t.kind.name if t.kind.name != 'llvm' else 'cpu'}(0)", refresh)


__all__ = ["cache_dir", "open_kernel_timings", "kernel_timings_for", "KernelTimings", "device_identity", "CACHE_ENV"]
