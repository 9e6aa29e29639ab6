"""Greedy-by-size placement in more visit orders, for small instances the sweep and one greedy order fragment.

placement.place_by_size visits the stays largest first (then by start) and puts each at the lowest offset
clear of the placed stays it overlaps in time. On graphs of a few dozen stays of few distinct sizes (the
bench_gap instances: 8-20 ops, tensors of 1-8 MB) that order often packs worse than the per-slot byte usage
allows, and the arena planner then lowers its capacity (more evictions) or gives up its kept pairs (a
parameter copied in and its update copied out every iteration). Here the same greedy runs in a few other
orders (longest stay first, by start, by end, by bytes x slots, then seeded random orders) until one fits;
each try is one compiled quadratic pass (placement_jit.by_size), microseconds at these sizes, all tries in
one compiled call (one numba dispatch, the random orders drawn once per size: the Python loop over the tries
was 10% of a small graph's plan, issue 28).

Same contract as place_by_size (offsets for closed slot intervals such that stays whose intervals intersect
get disjoint byte ranges; `fixed` stays placed beforehand, `bounds` offsets no stay may straddle); a result
is only used when it needs fewer bytes than what the caller already has, so it can only help.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

MAX_STAYS = 64       # only instances this small (the tries are quadratic each)
RANDOM_TRIES = 24    # seeded random orders after the fixed ones


def place_by_size_orders(first: list[int], last: list[int], size: list[int], fixed=(), bounds=(),
                         fits: int | None = None, seed: int = 0) -> tuple[list[int], int] | None:
    """The best greedy-by-size placement over several visit orders: (offsets, bytes needed), stopping at the
    first that needs at most `fits` bytes; None above MAX_STAYS stays (or none at all)."""
    from .placement import by_size_arrays
    from .placement_orders_jit import best_of_orders

    m = len(first)
    if not m or m > MAX_STAYS:
        return None
    F, L, S, off0, placed0 = by_size_arrays(first, last, size, fixed, bounds)
    f, l_, s = F[:m], L[:m], S[:m]
    span = l_ - f + 1
    orders = [np.lexsort((f, -s, -span)),          # longest stay first
              np.lexsort((-s, f)),                 # by start, largest first
              np.lexsort((-s, -l_)),               # by end, latest first
              np.lexsort((f, -(s * span)))]        # most bytes x slots first
    orders = np.concatenate((np.stack(orders), _random_orders(m, seed))).astype(np.int64)
    off, peak = best_of_orders(F, L, S, orders, off0, placed0, -1 if fits is None else int(fits))
    return off[:m].tolist(), int(peak)


@lru_cache(maxsize=128)
def _random_orders(m: int, seed: int) -> np.ndarray:
    """RANDOM_TRIES seeded random visit orders of m stays (the same for every call: kept, not drawn again)."""
    rng = np.random.default_rng(seed)
    out = np.stack([rng.permutation(m) for _ in range(RANDOM_TRIES)])
    out.flags.writeable = False
    return out
