"""The compiled placement loops (placement_jit) place exactly as the Python loops they replaced, kept here
as references: same offsets, same peak, so plans did not change."""
import heapq
from bisect import bisect_left, insort

import numpy as np
import pytest

from tvm_swap.planner.swapadvisor.arena import place_by_size, place_stays


def ref_place_stays(first, last, size):
    m = len(first)
    order = np.lexsort((-np.asarray(size, dtype=np.int64), np.asarray(first, dtype=np.int64))).tolist() \
        if m else []
    offsets = [0] * m
    ends, starts, blk = [], [], {}
    top = peak = 0
    for s in order:
        f = first[s]
        while ends and ends[0][0] < f:
            _, r = heapq.heappop(ends)
            a, b = offsets[r], offsets[r] + size[r]
            k = bisect_left(starts, a)
            if k > 0 and blk[starts[k - 1]] == a:
                k -= 1
                a = starts[k]
                del starts[k]
            if k < len(starts) and starts[k] == b:
                b2 = blk.pop(b)
                del starts[k]
                b = b2
            if b == top:
                blk.pop(a, None)
                top = a
                continue
            insort(starts, a)
            blk[a] = b
        need = size[s]
        best, best_len = -1, -1
        for a in starts:
            ln = blk[a] - a
            if ln >= need and (best < 0 or ln < best_len):
                best, best_len = a, ln
        if best >= 0:
            offsets[s] = best
            del starts[bisect_left(starts, best)]
            end = blk.pop(best)
            if best + need < end:
                insort(starts, best + need)
                blk[best + need] = end
        else:
            offsets[s] = top
            top += need
        heapq.heappush(ends, (last[s], s))
        peak = max(peak, top)
    return offsets, peak


def ref_place_by_size(first, last, size):
    m = len(first)
    F, L, S = (np.asarray(x, dtype=np.int64) for x in (first, last, size))
    off = np.zeros(m, dtype=np.int64)
    placed = np.zeros(m, dtype=bool)
    peak = 0
    for s in np.lexsort((F, -S)).tolist():
        idx = np.flatnonzero(placed & (F <= L[s]) & (L >= F[s]))
        if len(idx):
            lo = off[idx]
            o = np.argsort(lo, kind="stable")
            lo = lo[o]
            hi = np.maximum.accumulate(lo + S[idx][o])
            cand = np.concatenate(([0], hi))
            nxt = np.concatenate((lo, [np.iinfo(np.int64).max]))
            off[s] = cand[int(np.argmax(nxt - cand >= S[s]))]
        placed[s] = True
        peak = max(peak, int(off[s] + S[s]))
    return off.tolist(), peak


def _instances(n):
    rng = np.random.default_rng(11)
    for k in range(n):
        m = int(rng.integers(0, 300 if k % 10 == 0 else 60))
        first = rng.integers(-1, 40, size=m)
        last = first + rng.integers(-1, 15, size=m)        # a few empty stays (last < first) too
        unit = int(rng.choice([1, 256]))
        size = rng.integers(1, int(rng.choice([3, 9, 200])), size=m) * unit     # many equal sizes: ties
        yield first.tolist(), last.tolist(), size.tolist()


@pytest.mark.parametrize("place, ref", [(place_stays, ref_place_stays), (place_by_size, ref_place_by_size)])
def test_compiled_placement_places_exactly_as_the_python_loop(place, ref):
    for first, last, size in _instances(300):
        assert place(first, last, size) == ref(first, last, size)


def test_compiled_prefetch_slot_matches_the_numpy_slices():
    from tvm_swap.planner.swapadvisor.placement_jit import prefetch_slot

    rng = np.random.default_rng(5)
    for _ in range(500):
        n = int(rng.integers(2, 40))
        usage = rng.integers(0, 10, size=n).astype(np.int64)
        i = int(rng.integers(1, n))
        lo = int(rng.integers(-1, i - 1)) if i > 1 else -1
        room, need = int(rng.integers(0, 10)), int(rng.integers(1, 5))
        ref = usage.copy()
        q = lo
        over = np.flatnonzero(ref[lo + 1:i] > room)
        if len(over):
            q = lo + 1 + int(over[-1])
        ref[q + 1:i] += need
        assert prefetch_slot(usage, lo, i, room, need) == q
        assert (usage == ref).all()
