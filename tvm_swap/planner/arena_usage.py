"""How full an arena plan keeps its arena over the iteration: the bytes its live objects hold after each kernel,
and what is left unused (issue 28: on BRNN-4-8K@64 the decide/place rounds lowered the walk's capacity until the
placement fitted, so 2.1-2.7 GiB of the arena held no tensor even at the fullest kernel).

Read from the plan itself (its actions in issue order and its Arena), so it measures any arena plan, whichever
planner or version made it. An object is live from its arrival (a kernel's output, a swap-in, an initial
resident) to its drop; a kernel run in place writes into its input's object, which then stays live until the
output's drop."""
from __future__ import annotations

import numpy as np

from ..plan import ActionKind, Arena, Plan

_KERNELS = (ActionKind.COMPUTE, ActionKind.RECOMPUTE)


def held_after_kernels(plan: Plan) -> np.ndarray:
    """Bytes of the arena's live objects after each kernel (compute or recompute), in issue order."""
    arena = plan.pool
    if not isinstance(arena, Arena):
        raise ValueError("held_after_kernels: the plan's pool is not an arena (plan with --pool arena)")
    size = arena.sizes
    live = {int(o) for _, o in plan.initial_residents}
    held = sum(size[o] for o in live)
    out = []
    for a in plan.actions:
        if a.kind in _KERNELS:
            for o in a.out_objs:
                if o not in live:
                    live.add(o)
                    held += size[o]
            out.append(held)
        elif a.kind == ActionKind.SWAP_IN and a.obj not in live:
            live.add(a.obj)
            held += size[a.obj]
        elif a.kind == ActionKind.DROP and a.obj in live:
            live.discard(a.obj)
            held -= size[a.obj]
    return np.asarray(out, dtype=np.int64)


def never_placed_bytes(arena: Arena) -> int:
    """Bytes of the arena inside no object's range: no tensor ever sits there."""
    spans = sorted(zip(arena.offsets, arena.sizes))
    covered, end = 0, 0
    for off, sz in spans:
        lo, hi = max(off, end), off + sz
        if hi > lo:
            covered += hi - lo
        end = max(end, hi)
    return int(arena.arena_bytes) - covered


def unused_summary(plan: Plan) -> dict:
    """The arena's size, the most its live objects hold after a kernel, what is unused then (at the fullest
    kernel) and on average over the kernels, and the bytes no object covers (all in bytes)."""
    held = held_after_kernels(plan)
    arena_bytes = int(plan.pool.arena_bytes)
    peak = int(held.max(initial=0))
    return {"arena_bytes": arena_bytes, "peak_held_bytes": peak, "unused_at_fullest_bytes": arena_bytes - peak,
            "mean_unused_bytes": float(arena_bytes - held.mean()) if len(held) else float(arena_bytes),
            "never_placed_bytes": never_placed_bytes(plan.pool)}
