"""placement.place_stays_clean compiled with numba: the same sweep, the same ties, the same offsets.

In Python the clean-first sweep cost ~50 us per stay in list inserts and bisections on its block sets (18 CPU s of
the first plan at 10^5 ops). Here a block set is four lists (numba's native lists: typed.List inserts
element by element, slower than Python): block starts and ends by address, and
(length, start) sorted for best fit (placement._Blocks keeps the same two orders). The dirty ranges are parallel
ranges by address are kept in chunks (_dnew: a flat list cost 3.9 of the 4 CPU s of a
clean-first placement at 10^5 ops); the heaps are those of the Python version. tests/planner/swapadvisor/test_placement_clean_jit.py
checks the offsets against the Python version, kept there as the reference. Compiled on first use and cached on
disk (numba's cache=True), as placement_jit.
"""
from __future__ import annotations

import heapq

import numpy as np
from numba import njit

DIRT_CHUNK = 64        # dirty ranges per chunk (see _dnew)


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


# ---- the dirty ranges: disjoint [start, end) with a clean slot, by start, in chunks
# A flat sorted list cost ~50k-element moves per insert at 10^5 ops (~50k dirty ranges, ~130k inserts: 3.9 CPU s of
# the first plan). Here the ranges sit in chunks of at most `width` entries, each sorted, the chunks in address
# order (`order`, with each chunk's first start in `firsts` for bisection): an insert or delete moves at most one
# chunk's entries and, when a chunk splits or empties, the chunk order. The state is a tuple:
# (starts, ends, cleans: [chunk id, width]; count per chunk id; order: chunk ids by address; firsts; meta:
# [chunks in order, chunk ids used, free ids]; free: emptied chunk ids for reuse). A position is (p, j): entry j of
# the p-th chunk in order; (n chunks, 0) is the end. tests/planner/swapadvisor/test_placement_clean_jit.py checks it
# against a plain sorted list on random operations.

@njit(cache=True, nogil=True)
def _dnew(cap, width):
    """An empty dirty-range set with room for `cap` chunks of `width` entries (it grows when needed)."""
    return (np.empty((cap, width), dtype=np.int64), np.empty((cap, width), dtype=np.int64),
            np.empty((cap, width), dtype=np.int64), np.zeros(cap, dtype=np.int64), np.empty(cap, dtype=np.int64),
            np.empty(cap, dtype=np.int64), np.zeros(3, dtype=np.int64), np.empty(cap, dtype=np.int64))


@njit(cache=True, nogil=True)
def _dreserve(D):
    """D, or a copy with twice the chunks when fewer than 3 chunk ids are left (an insert splits at most one
    chunk; a trim inserts at most two ranges)."""
    DA, DB, DC, cnt, order, firsts, meta, free = D
    cap, width = DA.shape
    if cap - meta[1] + meta[2] >= 3:
        return D
    E = _dnew(2 * cap, width)
    E[0][:cap] = DA
    E[1][:cap] = DB
    E[2][:cap] = DC
    E[3][:cap] = cnt
    E[4][:cap] = order
    E[5][:cap] = firsts
    E[6][:] = meta
    E[7][:cap] = free
    return E


@njit(cache=True, nogil=True)
def _dfind(D, a):
    """The position of the first range starting at or after a."""
    DA, cnt, order, firsts, meta = D[0], D[3], D[4], D[5], D[6]
    n = meta[0]
    p = _br(firsts[:n], a) - 1
    if p < 0:
        return 0, 0
    c = order[p]
    j = _bl(DA[c, :cnt[c]], a)
    if j == cnt[c]:
        return p + 1, 0
    return p, j


@njit(cache=True, nogil=True)
def _dprev(D, p, j):
    """The position before (p, j), which must not be the first."""
    if j > 0:
        return p, j - 1
    return p - 1, D[3][D[4][p - 1]] - 1


@njit(cache=True, nogil=True)
def _dnext(D, p, j):
    if j + 1 < D[3][D[4][p]]:
        return p, j + 1
    return p + 1, 0


@njit(cache=True, nogil=True)
def _dnew_id(D):
    meta, free = D[6], D[7]
    if meta[2] > 0:
        meta[2] -= 1
        return free[meta[2]]
    meta[1] += 1
    return meta[1] - 1


@njit(cache=True, nogil=True)
def _dinsert(D, a, b, c):
    """Add the range [a, b) with clean slot c (disjoint from the others). Call _dreserve first."""
    DA, DB, DC, cnt, order, firsts, meta = D[0], D[1], D[2], D[3], D[4], D[5], D[6]
    width = DA.shape[1]
    n = meta[0]
    if n == 0:
        cid = _dnew_id(D)
        order[0] = cid
        firsts[0] = a
        cnt[cid] = 0
        meta[0] = 1
        p = 0
    else:
        p = max(_br(firsts[:n], a) - 1, 0)
        cid = order[p]
        if cnt[cid] == width:                   # full: its upper half becomes a new chunk after it
            nid = _dnew_id(D)
            h = width // 2
            m = width - h
            DA[nid, :m] = DA[cid, h:]
            DB[nid, :m] = DB[cid, h:]
            DC[nid, :m] = DC[cid, h:]
            cnt[nid] = m
            cnt[cid] = h
            for q in range(n, p + 1, -1):
                order[q] = order[q - 1]
                firsts[q] = firsts[q - 1]
            order[p + 1] = nid
            firsts[p + 1] = DA[nid, 0]
            meta[0] = n + 1
            if a >= firsts[p + 1]:
                p += 1
                cid = nid
    k = cnt[cid]
    j = _br(DA[cid, :k], a)
    for i in range(k, j, -1):
        DA[cid, i] = DA[cid, i - 1]
        DB[cid, i] = DB[cid, i - 1]
        DC[cid, i] = DC[cid, i - 1]
    DA[cid, j] = a
    DB[cid, j] = b
    DC[cid, j] = c
    cnt[cid] = k + 1
    if j == 0:
        firsts[p] = a


@njit(cache=True, nogil=True)
def _ddelete(D, p, j):
    """Remove the range at (p, j); the position of the range after it is then (p, j), or the end of chunk p."""
    DA, DB, DC, cnt, order, firsts, meta, free = D
    cid = order[p]
    k = cnt[cid]
    for i in range(j, k - 1):
        DA[cid, i] = DA[cid, i + 1]
        DB[cid, i] = DB[cid, i + 1]
        DC[cid, i] = DC[cid, i + 1]
    cnt[cid] = k - 1
    if k == 1:                                  # empty: out of the order, its id free again
        n = meta[0]
        for q in range(p, n - 1):
            order[q] = order[q + 1]
            firsts[q] = firsts[q + 1]
        meta[0] = n - 1
        free[meta[2]] = cid
        meta[2] += 1
    elif j == 0:
        firsts[p] = DA[cid, 0]


@njit(cache=True, nogil=True)
def _dstart(D, a):
    """The position of the first range that ends after a and starts at or after a's range (ranges are
    disjoint: the one containing a, else the next)."""
    p, j = _dfind(D, a)
    if p > 0 or j > 0:
        q, i = _dprev(D, p, j)
        if D[1][D[4][q], i] > a:
            return q, i
    return p, j


@njit(cache=True, nogil=True)
def _add_dirt(D, expiry, a, b, c):
    _dinsert(D, a, b, c)
    heapq.heappush(expiry, (c, a, b))


@njit(cache=True, nogil=True)
def _trim(D, expiry, a, b):
    """Forget the dirt of [a, b) (keeping what lies outside it). Call _dreserve first."""
    p, j = _dstart(D, a)
    lo = hi = np.int64(-1)
    lo_c = hi_c = np.int64(0)
    lo_x = hi_y = np.int64(0)
    while p < D[6][0]:
        cid = D[4][p]
        x, y, c = D[0][cid, j], D[1][cid, j], D[2][cid, j]
        if x >= b:
            break
        _ddelete(D, p, j)                       # the next range is now at (p, j), unless:
        if D[3][cid] == 0:                      # chunk p emptied and left: the next chunk's first
            j = 0
        elif j == D[3][cid]:                    # past chunk p's end
            p, j = p + 1, 0
        if x < a:
            lo, lo_x, lo_c = a, x, c
        if y > b:
            hi, hi_y, hi_c = b, y, c
    if lo >= 0:
        _add_dirt(D, expiry, lo_x, lo, lo_c)
    if hi >= 0:
        _add_dirt(D, expiry, hi, hi_y, hi_c)


@njit(cache=True, nogil=True)
def _dirty_until(D, a, b):
    """The last slot at which some byte of [a, b) is still dirty (-1: none)."""
    p, j = _dstart(D, a)
    u = np.int64(-1)
    while p < D[6][0]:
        cid = D[4][p]
        if D[0][cid, j] >= b:
            break
        if D[2][cid, j] > u:
            u = D[2][cid, j]
        p, j = _dnext(D, p, j)
    return u


@njit(cache=True, nogil=True)
def _ilist():
    out = [np.int64(0)]
    out.pop()
    return out


@njit(cache=True, nogil=True)
def _sweep(first, last, cool, size, order, limit, dirt_chunk):
    m = len(first)
    fs, fe, fl, fst = _ilist(), _ilist(), _ilist(), _ilist()     # free blocks below the top: by address, by
    cs, ce, cl, cst = _ilist(), _ilist(), _ilist(), _ilist()     # (length, start); clean free bytes, the same
    D = _dnew(16, dirt_chunk)                                    # dirty ranges by address: start, end, clean slot
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
                D = _dreserve(D)
                _add_dirt(D, expiry, a, b, cool[r])
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
            p, j = _dfind(D, a)
            if p < D[6][0] and D[0][D[4][p], j] == a and D[1][D[4][p], j] == b and D[2][D[4][p], j] == c:
                _ddelete(D, p, j)
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
                    u = _dirty_until(D, a, a + need)
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
        D = _dreserve(D)
        _trim(D, expiry, o, o + need)
        offsets[s] = o
        heapq.heappush(ends, (last[s], np.int64(s)))
        if top > peak:
            peak = top
    return offsets, peak


def clean_sweep(first, last, cool, size, order, limit: int, dirt_chunk: int = DIRT_CHUNK):
    """placement.place_stays_clean on int64 arrays, stays visited in `order`: (offsets, peak). dirt_chunk: dirty
    ranges per chunk (>= 2; the tests split chunks often with small ones)."""
    return _sweep(first, last, cool, size, order, np.int64(limit), np.int64(dirt_chunk))
