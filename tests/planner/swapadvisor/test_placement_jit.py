"""The compiled placement loops (placement_jit) place exactly as the Python loops they replaced, kept here
as references: same offsets, same peak, so plans did not change."""
import heapq
from bisect import bisect_left, insort

import numpy as np
import pytest

from tvm_swap.planner.swapadvisor.placement import place_by_size, place_stays


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


def ref_place_by_size(first, last, size, fixed=(), bounds=()):
    m = len(first)
    nf = len(fixed)
    F = np.asarray(list(first) + [x[0] for x in fixed], dtype=np.int64)
    L = np.asarray(list(last) + [x[1] for x in fixed], dtype=np.int64)
    S = np.asarray(list(size) + [x[3] for x in fixed], dtype=np.int64)
    off = np.zeros(m + nf, dtype=np.int64)
    off[m:] = [x[2] for x in fixed]
    placed = np.zeros(m + nf, dtype=bool)
    placed[m:] = True
    if len(bounds):
        B = np.asarray(sorted(bounds), dtype=np.int64)
        F = np.concatenate((F, np.full(len(B), np.iinfo(np.int64).min // 2)))
        L = np.concatenate((L, np.full(len(B), np.iinfo(np.int64).max // 2)))
        S = np.concatenate((S, np.zeros(len(B), dtype=np.int64)))
        off = np.concatenate((off, B))
        placed = np.concatenate((placed, np.ones(len(B), dtype=bool)))
    peak = 0
    for s in np.lexsort((F[:m], -S[:m])).tolist():
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
    return off[:m].tolist(), peak


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


def test_compiled_greedy_by_size_around_fixed_stays_and_bounds_places_as_the_python_loop():
    # kept pairs' own stays (fixed) and their zone edges (bounds), as arena.layout.place_with_pairs passes them
    rng = np.random.default_rng(3)
    for first, last, size in _instances(150):
        nf = int(rng.integers(0, 4))
        fixed = [(int(rng.integers(-1, 40)), int(rng.integers(0, 60)), int(rng.integers(0, 400)),
                  int(rng.integers(1, 50))) for _ in range(nf)]
        bounds = sorted(int(b) for b in rng.integers(0, 500, size=int(rng.integers(0, 4))))
        assert place_by_size(first, last, size, fixed, bounds) == ref_place_by_size(first, last, size, fixed, bounds)
