"""CostTable: measured kernel times kept between runs (tvm_swap.cost.profile fills one, tvm_swap.cost.timing_cache keeps
one per target and device on disk). Its own module so the disk cache and the profiler need not import each
other."""
from __future__ import annotations

import json
from pathlib import Path

from ..jsonio import check_versioned, read_json

COST_TABLE_FORMAT = "tvm_swap.cost.table"  # a file format name (kept when the module moved)
COST_TABLE_VERSION = 1


class CostTable:
    """Measured kernel times, keyed by target + kernel name + argument signature + structural hash.

    Survives between runs as JSON so a model is profiled once per machine.
    """

    def __init__(self, entries: dict | None = None):
        self.entries: dict[str, float] = dict(entries or {})

    @staticmethod
    def key(target: str, kernel: str, signature: dict) -> str:
        args = json.dumps(signature.get("args"), separators=(",", ":"))
        return f"{target}|{kernel}|{args}|{signature.get('hash', '')}"

    def get(self, key: str) -> float | None:
        return self.entries.get(key)

    def put(self, key: str, seconds: float) -> None:
        self.entries[key] = float(seconds)

    def __len__(self) -> int:
        return len(self.entries)

    def to_dict(self) -> dict:
        return {"format": COST_TABLE_FORMAT, "version": COST_TABLE_VERSION, "entries": self.entries}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True))

    @classmethod
    def load(cls, path: str | Path) -> "CostTable":
        d = check_versioned(read_json(path, "cost table"), COST_TABLE_FORMAT, COST_TABLE_VERSION, "cost table")
        return cls({str(k): float(v) for k, v in d["entries"].items()})
