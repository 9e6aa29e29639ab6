"""The arena's two placement loops (placement.place_stays, placement.place_by_size) compiled with numba.

Placement runs once per decide/place round, several rounds per candidate, so a search spends much of its
time here; in Python these loops cost ~5-50 us per stay. The compiled loops do exactly what the Python
versions did (the same order, the same ties: tests/planner/swapadvisor/test_placement_jit.py checks them
against those versions kept as references), so plans are unchanged. Compiled on first use and cached on
disk (numba's cache=True: __pycache__ beside this file, or numba's user cache where that is read-only).
"""
from __future__ import annotations

import heapq

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def sweep(first, last, size, order):
    """placement.place_stays on int64 arrays, stays visited in `order`: (offsets, peak)."""
    m = len(first)
    offsets = np.zeros(m, dtype=np.int64)
    ends = [(np.int64(0), np.int64(0))]          # heap (last slot, stay) of placed stays (typed by the seed)
    ends.pop()
    starts = [np.int64(0)]                      # free blocks below `top`: starts ascending, their ends
    blk_end = [np.int64(0)]
    starts.pop()
    blk_end.pop()
    top = np.int64(0)
    peak = np.int64(0)
    for s in order:
        f = first[s]
        while len(ends) > 0 and ends[0][0] < f:
            r = heapq.heappop(ends)[1]
            a = offsets[r]
            b = a + size[r]
            # k = bisect_left(starts, a)
            lo, hi = 0, len(starts)
            while lo < hi:
                mid = (lo + hi) // 2
                if starts[mid] < a:
                    lo = mid + 1
                else:
                    hi = mid
            k = lo
            if k > 0 and blk_end[k - 1] == a:           # merge with the block below
                k -= 1
                a = starts[k]
                starts.pop(k)
                blk_end.pop(k)
            if k < len(starts) and starts[k] == b:       # and the one above
                b = blk_end[k]
                starts.pop(k)
                blk_end.pop(k)
            if b == top:                                 # free space at the top: lower the top
                top = a
                continue
            lo, hi = 0, len(starts)                      # insort: at bisect_right(starts, a)
            while lo < hi:
                mid = (lo + hi) // 2
                if a < starts[mid]:
                    hi = mid
                else:
                    lo = mid + 1
            starts.insert(lo, a)
            blk_end.insert(lo, b)
        need = size[s]
        best, best_len, best_k = np.int64(-1), np.int64(-1), -1
        for j in range(len(starts)):
            ln = blk_end[j] - starts[j]
            if ln >= need and (best < 0 or ln < best_len):
                best, best_len, best_k = starts[j], ln, j
        if best >= 0:
            offsets[s] = best
            end = blk_end[best_k]
            if best + need < end:
                starts[best_k] = best + need
            else:
                starts.pop(best_k)
                blk_end.pop(best_k)
        else:
            offsets[s] = top
            top += need
        heapq.heappush(ends, (last[s], np.int64(s)))
        if top > peak:
            peak = top
    return offsets, peak


@njit(cache=True, nogil=True)
def by_size(first, last, size, order, off, placed):
    """placement.place_by_size on int64 arrays, stays visited in `order`, starting from the offsets `off` of
    the stays `placed` beforehand (both updated in place): (offsets, peak of the stays in `order`)."""
    m = len(first)
    lo = np.empty(m, dtype=np.int64)
    hi = np.empty(m, dtype=np.int64)
    peak = np.int64(0)
    for s in order:
        fs, ls, need = first[s], last[s], size[s]
        k = 0
        for j in range(m):                      # placed stays that overlap s in time, by index
            if placed[j] and first[j] <= ls and last[j] >= fs:
                lo[k] = off[j]
                hi[k] = off[j] + size[j]
                k += 1
        if k > 0:
            o = np.argsort(lo[:k], kind="mergesort")      # stable, as the numpy version
            cand = np.int64(0)                  # free from here up to the next placed start (or the top)
            for i in range(k):
                if lo[o[i]] - cand >= need:
                    break
                if hi[o[i]] > cand:
                    cand = hi[o[i]]
            off[s] = cand
        placed[s] = True
        if off[s] + need > peak:
            peak = off[s] + need
    return off, peak
