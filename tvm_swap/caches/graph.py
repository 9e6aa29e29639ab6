"""Lowered graphs kept on disk, so a limit no plan can meet is refused before lowering from the second time on.

    key = graph_key(mod, "llvm", fuse_max_depth=None, func_name="main")
    graph = cached_graph(key)           # the DataflowGraph an earlier compile of this module lowered, or None
    store_graph(key, graph)             # after lowering: for the next compile
    FloorMemo(key)                      # its smallest feasible limit per memory model, once found

Why a cache beside the bounds: a percentage limit is a share of TVM's static plan of the *lowered* graph
(tvm_swap.limits.mem_limit.no_swap_bytes). Before lowering, tvm_swap.limits.early_floor bounds that plan from above and the
floor from below, which proves limits far below the floor infeasible on the first compile; a limit between
its bound and the exact floor needs the lowered graph. The exact check runs right after lowering, before
any profiling (tvm_swap.pipeline.compile_model); with this cache it runs on the very graph lowering
would produce, before lowering, whenever this module was lowered before (a user retrying at another limit,
a second compile). It never refuses what lowering would accept: the graph is exactly the one lowering made.

A graph depends on the module (its structural hash), the target, the fusion cap, the function, TVM's version
and the code that lowers and extracts it (relay_passes/*.py and tvm_swap/graph/*.py, by content; the planner's
too, for the floors kept beside it), which key the file. The folder is tvm_swap.cost.timing_cache.cache_dir()/graphs;
an unreadable entry counts as missing.
"""
from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

from ..cost.timing_cache import cache_dir

_ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """SHA-256 of the sources that turn a module into a graph and a graph into its floor (FloorMemo): a change
    there invalidates every entry."""
    h = hashlib.sha256()
    for pattern in ("relay_passes/*.py", "tvm_swap/graph/*.py", "tvm_swap/planner/**/*.py", "tvm_swap/limits/mem_limit.py",
                    "tvm_swap/limits/floor_hint.py", "tvm_swap/param_layouts.py"):
        for f in sorted(_ROOT.glob(pattern)):
            h.update(str(f.relative_to(_ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def graph_key(mod, target, fuse_max_depth=None, func_name: str = "main") -> str:
    import tvm
    import tvm_ffi

    from relay_passes.lower import as_target

    h = tvm_ffi.structural_hash(mod) & 0xFFFFFFFFFFFFFFFF
    text = f"{h:016x}|{as_target(target)}|{fuse_max_depth}|{func_name}|{tvm.__version__}|{code_version()}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _path(key: str) -> Path:
    return cache_dir() / "graphs" / f"{key}.json.gz"


def cached_graph(key: str):
    """The DataflowGraph stored under `key`, or None (missing, truncated or unreadable: lower again)."""
    from ..graph import DataflowGraph

    path = _path(key)
    if not path.exists():
        return None
    try:
        return DataflowGraph.load(path)
    except Exception:  # noqa: BLE001 - only a cache
        return None


def store_graph(key: str, graph) -> None:
    """Write `graph` under `key` atomically (a reader never sees half a file); a write error is ignored."""
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".graph-", suffix=".json.gz", dir=path.parent)
        os.close(fd)
        graph.save(tmp)
        os.replace(tmp, path)
    except OSError:
        pass


class FloorMemo:
    """The smallest feasible limit of the graph stored under `key`, per memory model and alignment, kept beside
    it (planner.api.feasible_floor's memo): finding it is a search of about a dozen placements (1.5 s for the
    cnn-train example on a busy 2-core machine), done once per graph."""

    def __init__(self, key: str):
        self.path = cache_dir() / "graphs" / f"{key}.floors.json"

    def _read(self) -> dict:
        import json

        try:
            return dict(json.loads(self.path.read_text()))
        except (OSError, ValueError, TypeError):
            return {}

    def get(self, pool: str, alignment: int):
        v = self._read().get(f"{pool}@{int(alignment)}")
        if isinstance(v, list) and len(v) == 2 and isinstance(v[0], int) and isinstance(v[1], str):
            return int(v[0]), v[1]
        return None

    def put(self, pool: str, alignment: int, value) -> None:
        import json

        doc = {**self._read(), f"{pool}@{int(alignment)}": [int(value[0]), str(value[1])]}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".floors-", dir=self.path.parent)
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f)
            os.replace(tmp, self.path)
        except OSError:
            pass


__all__ = ["graph_key", "cached_graph", "store_graph", "FloorMemo"]
