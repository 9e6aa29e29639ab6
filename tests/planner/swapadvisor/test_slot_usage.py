"""slot_usage: the walk's blocked per-slot usage holds the same integers as a flat array under the same
operations (numpy slices are the reference), across block boundaries and at the ends."""
import numpy as np

from tvm_swap.planner.swapadvisor.slot_usage import (BLOCK, new_usage, prefetch_slot, usage_add, usage_set,
                                                     usage_values)


def _ref_prefetch(usage, lo, i, room, need):
    q = lo
    over = np.flatnonzero(usage[lo + 1:i] > room)
    if len(over):
        q = lo + 1 + int(over[-1])
    usage[q + 1:i] += need
    return q


def test_blocked_usage_matches_a_flat_array_under_random_operations():
    rng = np.random.default_rng(7)
    for _ in range(60):
        n = int(rng.choice([1, 2, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 5, 700]))
        ref = np.zeros(n, dtype=np.int64)
        ub, ul, um = new_usage(n)
        for _ in range(300):
            kind = rng.integers(0, 3)
            if kind == 0:
                i, v = int(rng.integers(0, n)), int(rng.integers(0, 50))
                ref[i] = v
                usage_set(ub, ul, um, i, v)
            elif kind == 1:
                a = int(rng.integers(0, n + 1))
                b = int(rng.integers(a, n + 1))
                v = int(rng.integers(-20, 21))
                ref[a:b] += v
                usage_add(ub, ul, um, a, b, v)
            else:
                i = int(rng.integers(0, n + 1))          # i == n: the walk's end-of-iteration swap-ins
                lo = int(rng.integers(-1, max(i - 1, 0) + 1)) if i > 0 else -1
                room, need = int(rng.integers(-5, 60)), int(rng.integers(1, 10))
                assert prefetch_slot(ub, ul, um, lo, i, room, need) == _ref_prefetch(ref, lo, i, room, need)
            assert (usage_values(ub, ul, n) == ref).all()
            # each block's max (the search skips blocks by it) stays exact
            full = usage_values(ub, ul, len(ub))
            assert (um == full.reshape(-1, BLOCK).max(axis=1)).all()
