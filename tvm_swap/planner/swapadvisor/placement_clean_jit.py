"""placement.place_stays_clean compiled with numba: the same sweep, the same ties, the same offsets.

In Python the clean-first sweep cost ~50 us per stay in list inserts and bisections on its block sets (18 CPU s of
the first plan at 10^5 ops). Here a block set is four lists (numba's native lists: typed.List inserts
element by element, slower than Python): block starts and ends by address, and
(length, start) sorted for best fit (placement._Blocks keeps the same two orders). The dirty ranges are parallel
lists by address; the heaps are those of the Python version. tests/planner/swapadvisor/test_placement_clean_jit.py
checks the offsets against the Python version, kept there as the reference. Compiled on first use and cached on
disk (numba's cache=True), as placement_jit.
"""
from __future__ import annotations

import heapq

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _bl(lst, x):
    """bisect_left"""
    lo, hi = 0, len(lst)
    while lo < hi:
        mid = (lo + hi) // 2
        if lst[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _br(lst, x):
    """bisect_right"""
    lo, hi = 0, len(lst)
    while lo < hi:
        mid = (lo + hi) // 2
        if x < lst[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(cache=True, nogil=True)
def _bl2(ln, st, x, y):
    """bisect_left of (x, y) in the pairs (ln[k], st[k])"""
    lo, hi = 0, len(ln)
    while lo < hi:
        mid = (lo + hi) // 2
        if ln[mid] < x or (ln[mid] == x and st[mid] < y):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _put(ln, st, a, b):
    k = _bl2(ln, st, b - a, a)
    ln.insert(k, b - a)
    st.insert(k, a)


@njit(cache=True, nogil=True)
def _take(ln, st, a, b):
    k = _bl2(ln, st, b - a, a)
    ln.pop(k)
    st.pop(k)


@njit(cache=True, nogil=True)
def _add(starts, ends, ln, st, a, b):
    """placement._Blocks.add"""
    k = _bl(starts, a)
    if k > 0 and ends[k - 1] == a:
        k -= 1
        a = starts[k]
        _take(ln, st, a, ends[k])
        starts.pop(k)
        ends.pop(k)
    if k < len(starts) and starts[k] == b:
        e = ends[k]
        _take(ln, st, b, e)
        starts.pop(k)
        ends.pop(k)
        b = e
    starts.insert(k, a)
    ends.insert(k, b)
    _put(ln, st, a, b)


@njit(cache=True, nogil=True)
def _remove(starts, ends, ln, st, a, b):
    """placement._Blocks.remove: take [a, b) out (whatever part of it is here)."""
    k = _br(starts, a) - 1
    if k < 0 or ends[k] <= a:
        k += 1
    while k < len(starts) and starts[k] < b:
        x = starts[k]
        y = ends[k]
        _take(ln, st, x, y)
        starts.pop(k)
        ends.pop(k)
        if x < a:
            starts.insert(k, x)
            ends.insert(k, a)
            _put(ln, st, x, a)
            k += 1
        if y > b:
            starts.insert(k, b)
            ends.insert(k, y)
            _put(ln, st, b, y)
            k += 1


@njit(cache=True, nogil=True)
def _best_fit(ln, st, need):
    k = _bl2(ln, st, need, np.int64(-1))
    return st[k] if k < len(ln) else np.int64(-1)


@njit(cache=True, nogil=True)
def _add_dirt(ds, de, dc, expiry, a, b, c):
    k = _br(ds, a)                  # insort (right), as the Python version
    ds.insert(k, a)
    de.insert(k, b)
    dc.insert(k, c)
    heapq.heappush(expiry, (c, a, b))


@njit(cache=True, nogil=True)
def _trim(ds, de, dc, expiry, a, b):
    """Forget the dirt of [a, b) (keeping what lies outside it)."""
    k = _bl(ds, a)
    if k > 0 and de[k - 1] > a:
        k -= 1
    while k < len(ds) and ds[k] < b:
        x, y, c = ds[k], de[k], dc[k]
        ds.pop(k)
        de.pop(k)
        dc.pop(k)
        if x < a:
            _add_dirt(ds, de, dc, expiry, x, a, c)
            k += 1
        if y > b:
            _add_dirt(ds, de, dc, expiry, b, y, c)
            k += 1


@njit(cache=True, nogil=True)
def _dirty_until(ds, de, dc, a, b):
    """The last slot at which some byte of [a, b) is still dirty (-1: none)."""
    k = _bl(ds, a)
    if k > 0 and de[k - 1] > a:
        k -= 1
    u = np.int64(-1)
    while k < len(ds) and ds[k] < b:
        if dc[k] > u:
            u = dc[k]
        k += 1
    return u


@njit(cache=True, nogil=True)
def _ilist():
    out = [np.int64(0)]
    out.pop()
    return out


@njit(cache=True, nogil=True)
def _sweep(first, last, cool, size, order, limit):
    m = len(first)
    fs, fe, fl, fst = _ilist(), _ilist(), _ilist(), _ilist()     # free blocks below the top: by address, by
    cs, ce, cl, cst = _ilist(), _ilist(), _ilist(), _ilist()     # (length, start); clean free bytes, the same
    ds, de, dc = _ilist(), _ilist(), _ilist()                    # dirty ranges by address: start, end, clean slot
    offsets = np.zeros(m, dtype=np.int64)
    ends = [(np.int64(0), np.int64(0))]           # heap (last slot, stay)
    ends.pop()
    expiry = [(np.int64(0), np.int64(0), np.int64(0))]   # heap (clean slot, start, end), lazy
    expiry.pop()
    if limit > 0:
        _add(cs, ce, cl, cst, np.int64(0), limit)
    top = np.int64(0)
    peak = np.int64(0)
    for s in order:
        f = first[s]
        while len(ends) > 0 and ends[0][0] < f:
            r = heapq.heappop(ends)[1]
            a = offsets[r]
            b = a + size[r]
            if cool[r] >= f:
                _add_dirt(ds, de, dc, expiry, a, b, cool[r])
            elif a < limit:
                _add(cs, ce, cl, cst, a, min(b, limit))
            if b == top:                # (merging with the free block below first)
                k = _bl(fs, a)
                if k > 0 and fe[k - 1] == a:
                    a = fs[k - 1]
                    _remove(fs, fe, fl, fst, a, b)
                top = a
            else:
                _add(fs, fe, fl, fst, a, b)
        while len(expiry) > 0 and expiry[0][0] < f:      # clean again
            c, a, b = heapq.heappop(expiry)
            k = _bl(ds, a)
            if k < len(ds) and ds[k] == a and de[k] == b and dc[k] == c:
                ds.pop(k)
                de.pop(k)
                dc.pop(k)
                _add(cs, ce, cl, cst, a, min(b, limit))
        need = size[s]
        o = _best_fit(cl, cst, need)
        if o < 0:                   # nothing clean fits: the free block whose dirt clears first, then the
            have = False            # smallest (then the lowest); or the top
            ku, kl = np.int64(0), np.int64(0)
            for j in range(len(fs)):
                a = fs[j]
                ln = fe[j] - a
                if ln >= need:
                    u = _dirty_until(ds, de, dc, a, a + need)
                    if not have or u < ku or (u == ku and ln < kl):
                        o, ku, kl, have = a, u, ln, True
            if o < 0:
                o = top
        if o >= top:
            if o > top:             # the room skipped below it becomes a free block
                _add(fs, fe, fl, fst, top, o)
            top = o + need
        else:
            _remove(fs, fe, fl, fst, o, o + need)
        if o < limit:
            _remove(cs, ce, cl, cst, o, min(o + need, limit))
        _trim(ds, de, dc, expiry, o, o + need)
        offsets[s] = o
        heapq.heappush(ends, (last[s], np.int64(s)))
        if top > peak:
            peak = top
    return offsets, peak


def clean_sweep(first, last, cool, size, order, limit: int):
    """placement.place_stays_clean on int64 arrays, stays visited in `order`: (offsets, peak)."""
    return _sweep(first, last, cool, size, order, np.int64(limit))
