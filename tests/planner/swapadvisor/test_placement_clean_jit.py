"""The compiled clean-first sweep (placement_clean_jit) places exactly as the Python loop it replaced, kept
here as the reference: same offsets, same peak, so plans did not change."""
import heapq
from bisect import bisect_left, insort

import numpy as np
import pytest

from tvm_swap.planner.swapadvisor import placement_clean_jit as pcj
from tvm_swap.planner.swapadvisor.placement import _Blocks, place_stays, place_stays_clean
from tvm_swap.planner.swapadvisor.placement_clean_jit import clean_sweep


def ref_place_stays_clean(first: list[int], last: list[int], cool: list[int], size: list[int],
                      limit: int) -> tuple[list[int], int]:
    """place_stays, preferring clean bytes: a stay's bytes are free after slot `last` but *dirty* until slot
    `cool` (its copy to the host is still running, so a tenant there would wait for the link). Each stay goes
    to the best-fitting clean free range below `limit` (free blocks and the room above the top, less the
    dirty ranges); when none fits, to the free block whose dirt clears first (then the smallest), else the
    top grows, as in place_stays. A tenant of dirty bytes waits for their drop, which waits for the copy, so
    their dirt is forgotten once taken (a later tenant waits on that tenant anyway).
    Same contract as place_stays; cool[k] >= last[k]."""
    m = len(first)
    order = np.lexsort((-np.asarray(size, dtype=np.int64), np.asarray(first, dtype=np.int64))).tolist() \
        if m else []
    offsets = [0] * m
    ends: list = []
    free = _Blocks()                # free below `top` (clean or dirty)
    clean = _Blocks()               # clean free bytes below `limit` (above the top included)
    if limit > 0:
        clean.add(0, limit)
    dstarts: list[int] = []         # dirty free ranges (disjoint), by address
    dirt: dict[int, tuple] = {}     # start -> (end, clean after this slot)
    expiry: list = []               # heap (clean slot, start, end): dirt that turns clean (lazy)
    top = peak = 0

    def add_dirt(a: int, b: int, c: int) -> None:
        insort(dstarts, a)
        dirt[a] = (b, c)
        heapq.heappush(expiry, (c, a, b))

    def trim(a: int, b: int) -> None:
        """Forget the dirt of [a, b) (keeping what lies outside it)."""
        k = bisect_left(dstarts, a)
        if k > 0 and dirt[dstarts[k - 1]][0] > a:
            k -= 1
        while k < len(dstarts) and dstarts[k] < b:
            x = dstarts[k]
            y, c = dirt.pop(x)
            del dstarts[k]
            if x < a:
                add_dirt(x, a, c)
                k += 1
            if y > b:
                add_dirt(b, y, c)
                k += 1

    def dirty_until(a: int, b: int) -> int:
        """The last slot at which some byte of [a, b) is still dirty (-1: none)."""
        k = bisect_left(dstarts, a)
        if k > 0 and dirt[dstarts[k - 1]][0] > a:
            k -= 1
        u = -1
        while k < len(dstarts) and dstarts[k] < b:
            c = dirt[dstarts[k]][1]
            if c > u:
                u = c
            k += 1
        return u

    for s in order:
        f = first[s]
        while ends and ends[0][0] < f:
            _, r = heapq.heappop(ends)
            a, b = offsets[r], offsets[r] + size[r]
            if cool[r] >= f:
                add_dirt(a, b, cool[r])
            elif a < limit:
                clean.add(a, min(b, limit))
            if b == top:                # (merging with the free block below first)
                k = bisect_left(free.starts, a)
                if k > 0 and free.end[free.starts[k - 1]] == a:
                    a = free.starts[k - 1]
                    free.remove(a, b)
                top = a
            else:
                free.add(a, b)
        while expiry and expiry[0][0] < f:      # clean again
            c, a, b = heapq.heappop(expiry)
            if dirt.get(a) == (b, c):
                del dirt[a]
                del dstarts[bisect_left(dstarts, a)]
                clean.add(a, min(b, limit))
        need = size[s]
        o = clean.best_fit(need)
        if o < 0:                   # nothing clean fits: the free block whose dirt clears first, then the
            key = None              # smallest; or the top
            for a in free.starts:
                ln = free.end[a] - a
                if ln >= need:
                    k2 = (dirty_until(a, a + need), ln)
                    if key is None or k2 < key:
                        o, key = a, k2
            if o < 0:
                o = top
        if o >= top:
            if o > top:             # the room skipped below it becomes a free block
                free.add(top, o)
            top = o + need
        else:
            free.remove(o, o + need)
        if o < limit:
            clean.remove(o, min(o + need, limit))
        trim(o, o + need)
        offsets[s] = o
        heapq.heappush(ends, (last[s], s))
        if top > peak:
            peak = top
    return offsets, peak


def _random_case(rng, m):
    first = rng.integers(-1, 3 * m // 4 + 2, size=m).tolist()
    last = [f + int(rng.integers(0, 10)) for f in first]
    cool = [x + int(rng.integers(0, 8)) * int(rng.random() < 0.5) for x in last]
    size = (rng.integers(1, 40, size=m) * 256).tolist()
    limit = int(rng.integers(0, 60)) * 256 * int(rng.random() < 0.9)
    return first, last, cool, size, limit


@pytest.mark.parametrize("seed", range(12))
def test_compiled_clean_sweep_matches_the_python_loop(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        case = _random_case(rng, int(rng.integers(0, 400)))
        assert place_stays_clean(*case) == ref_place_stays_clean(*case)


@pytest.mark.parametrize("chunk", [2, 3, 5])
def test_compiled_clean_sweep_matches_with_small_dirt_chunks(chunk):
    """Chunks of a few dirty ranges split and empty all the time: the same offsets as the Python loop."""
    rng = np.random.default_rng(chunk)
    for _ in range(30):
        first, last, cool, size, limit = _random_case(rng, int(rng.integers(0, 300)))
        F, S = np.asarray(first, dtype=np.int64), np.asarray(size, dtype=np.int64)
        off, peak = clean_sweep(F, np.asarray(last, dtype=np.int64), np.asarray(cool, dtype=np.int64), S,
                                np.lexsort((-S, F)), limit, chunk)
        assert (off.tolist(), int(peak)) == ref_place_stays_clean(first, last, cool, size, limit)


@pytest.mark.parametrize("chunk", [2, 3, 4, 8])
def test_chunked_dirty_ranges_match_a_sorted_list(chunk):
    """The chunked dirty-range set (_dnew ...) against a plain sorted list of (start, end, clean slot): random
    inserts of disjoint ranges, deletes by exact match (expiry), trims and dirty_until queries."""
    rng = np.random.default_rng(chunk)
    D = pcj._dnew(1, chunk)
    expiry = [(np.int64(-1), np.int64(-1), np.int64(-1))]     # (typed by its entry; _trim only pushes)
    ref: list = []                  # sorted (start, end, clean)
    inserted = 0
    for step in range(3000):
        op = rng.integers(0, 4)
        a = int(rng.integers(0, 400))
        b = a + int(rng.integers(1, 30))
        if op == 0:                 # insert [a, b) where nothing is dirty (the sweep trims before it adds)
            if any(x < b and a < y for x, y, _ in ref):
                continue
            c = int(rng.integers(0, 50))
            D = pcj._dreserve(D)
            pcj._dinsert(D, a, b, c)
            insort(ref, (a, b, c))
            inserted += 1
        elif op == 1 and ref:       # delete an exact range (as the expiry does)
            x, y, c = ref[int(rng.integers(0, len(ref)))]
            p, j = pcj._dfind(D, x)
            cid = D[4][p]
            assert (D[0][cid, j], D[1][cid, j], D[2][cid, j]) == (x, y, c)
            pcj._ddelete(D, p, j)
            ref.remove((x, y, c))
        elif op == 2:               # trim [a, b)
            D = pcj._dreserve(D)
            pcj._trim(D, expiry, a, b)
            new = []
            for x, y, c in ref:
                if x < b and a < y:
                    if x < a:
                        new.append((x, a, c))
                    if y > b:
                        new.append((b, y, c))
                else:
                    new.append((x, y, c))
            ref = sorted(new)
        else:
            want = max((c for x, y, c in ref if x < b and a < y), default=-1)
            assert pcj._dirty_until(D, a, b) == want, step
        got = []
        for p in range(D[6][0]):
            cid = D[4][p]
            assert D[5][p] == D[0][cid, 0]                  # each chunk's first start, for bisection
            got += [(int(D[0][cid, j]), int(D[1][cid, j]), int(D[2][cid, j])) for j in range(D[3][cid])]
        assert got == ref, step
    assert inserted > 300, inserted          # the random steps did insert: the set was exercised


def test_compiled_clean_sweep_matches_with_equal_sizes_and_ties():
    rng = np.random.default_rng(99)
    for _ in range(200):
        m = int(rng.integers(1, 60))
        first = rng.integers(0, 8, size=m).tolist()
        last = [f + int(rng.integers(0, 3)) for f in first]
        cool = [x + int(rng.integers(0, 4)) for x in last]
        size = (rng.integers(1, 3, size=m) * 256).tolist()
        limit = int(rng.integers(0, 12)) * 256
        case = (first, last, cool, size, limit)
        assert place_stays_clean(*case) == ref_place_stays_clean(*case)
        assert place_stays_clean(first, last, last, size, 0) == place_stays(first, last, size)
