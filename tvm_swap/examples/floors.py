"""A limit below a bundled example's floor, refused before TVM is imported (issue 16: within a second).

    refuse_below_floor("cnn-train", "10%", target="llvm")   # InfeasibleLimitError, or nothing

Building a bundled example needs TVM (1.5 CPU s to import), and its floor needs the lowered graph (seconds
more). Both depend only on the example's source, the target, and the code that lowers and plans, so they are
kept in a table (floors.json, beside this module; `python scripts/example_floors.py` writes it from the lowered
graphs, and tests/examples/test_example_floors.py regenerates it and compares): per example, the largest
tensor the Relax function must hold (model_checks.largest_tensor) and, per target and memory model, what the
exact check after lowering refuses (planner.api.sure_refusal: every limit below `below`, naming the floor,
why, and what "100%" is). The refusal here is that check's, word for word; it is given only under the
conditions a lowered graph in tvm_swap.caches.graph would be trusted (the same code version and TVM release),
and with the same sources of the examples themselves (and of the training step they build),
for the command line's defaults that the table covers (no --fuse-max-depth, --micro-batches, --train,
--shape or --params; a planner that meets any limit from the floor up); anything else says nothing here and
is checked as before.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

TABLE = Path(__file__).with_name("floors.json")
ALIGNMENT = 256


def target_key(target) -> str | None:
    """The table's name for a --target string (whitespace normalised); None for anything else."""
    return " ".join(target.split()) if isinstance(target, str) else None


_PACKAGE = Path(__file__).resolve().parents[1]
# what builds the examples' modules and checks a byte limit against them (beside graph_cache's code version:
# what lowers, extracts and plans)
_EXAMPLE_SOURCES = ("examples/models.py", "examples/train.py", "examples/__init__.py", "training/**/*.py",
                    "model_checks.py")


def versions() -> dict:
    """What the table's numbers depend on: the code that builds the examples, lowers and plans them, and TVM."""
    import hashlib
    import importlib.metadata

    from ..caches.graph import code_version

    try:
        tvm = importlib.metadata.version("apache-tvm")
    except importlib.metadata.PackageNotFoundError:
        tvm = None
    h = hashlib.sha256()
    for pattern in _EXAMPLE_SOURCES:
        for f in sorted(_PACKAGE.glob(pattern)):
            h.update(str(f.relative_to(_PACKAGE)).encode() + b"\0" + f.read_bytes())
    return {"code_version": code_version(), "examples_version": h.hexdigest()[:16], "tvm": tvm}


@functools.lru_cache(maxsize=1)
def _table() -> dict | None:
    try:
        doc = json.loads(TABLE.read_text())
    except (OSError, ValueError):
        return None
    v = versions()
    if v["tvm"] is None or any(doc.get(k) != v[k] for k in v) or doc.get("alignment") != ALIGNMENT:
        return None          # written for other code or another TVM: what it says may no longer hold
    return doc


def refuse_below_floor(model, mem_limit, *, target="llvm", planner="swapadvisor", pool=None, fuse_max_depth=None,
                       micro_batches=None, train=None, shapes=None, params=None, tensor_check=True,
                       split_dense=False) -> None:
    """Raise the InfeasibleLimitError compile_model would raise for `mem_limit` (after prepare_model's check of a
    byte limit against the largest tensor, then the exact check on the lowered graph), when the table proves
    it; otherwise return (the command goes on as before). tensor_check=False: the refusal `tvm-swap plan`
    gives (plan_graph's exact check alone, no byte check of the Relax function first)."""
    from ..planner.registry import FEASIBLE_AT_THE_FLOOR, SEARCH_PLANNERS

    if (not isinstance(model, str) or mem_limit is None or fuse_max_depth is not None or micro_batches is not None
            or split_dense
            or train is not None or shapes or params is not None or planner not in FEASIBLE_AT_THE_FLOOR):
        return
    doc = _table()
    example = (doc or {}).get("examples", {}).get(model)
    entry = (example or {}).get("targets", {}).get(target_key(target))
    if entry is None:
        return
    pool = pool if pool is not None else ("arena" if planner in SEARCH_PLANNERS else "size-classes")
    known = entry["pools"].get(pool)
    if known is None:
        return
    from ..errors import InfeasibleLimitError
    from ..limits.mem_limit import MemLimit
    from ..limits.model_checks import refuse_below_tensor

    given = MemLimit.of(mem_limit)
    if tensor_check and given.absolute is not None:      # prepare_model checks a byte limit first
        need, what, note = example["largest_tensor"]
        refuse_below_tensor(given, need, what, alignment=ALIGNMENT, note=note)
    try:
        limit = given.bytes_of(entry["no_swap_bytes"])
    except ValueError:
        return                                       # the lowered path words a bad limit
    if 0 < limit < known["below"]:
        from ..limits.floor_hint import hint_text

        reason = f"{known['reason']}; {hint_text(known['hint'], pool, limit)}"
        raise InfeasibleLimitError(limit, known["floor"], reason, reference_bytes=entry["no_swap_bytes"])


__all__ = ["TABLE", "refuse_below_floor", "target_key", "versions"]
