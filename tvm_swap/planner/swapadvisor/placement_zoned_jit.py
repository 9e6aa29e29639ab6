"""placement.place_stays_zoned compiled with numba: the same sweep, the same ties, the same offsets.

In Python the zoned sweep was ~40% of an evaluation of a 12k-op genome with kept pairs (NasNet-25: ~1 CPU s of
~2 per evaluation, profiled with cProfile): list inserts and bisections on the open zone blocks, and a scan past
the blocks whose zone's tenant comes back before the stay ends. Here the open zone blocks are three parallel
lists sorted by (length, start, zone), each zone's blocks are found by (zone, start) and (zone, end) in two
dicts, and the region above the base is placement._Blocks as placement_clean_jit keeps it (by address and by
(length, start)). tests/planner/swapadvisor/test_placement_zoned_jit.py checks the offsets against the Python
loop, kept there as the reference. Compiled on first use and cached on disk (numba's cache=True), as
placement_jit.
"""
from __future__ import annotations

import heapq

import numpy as np
from numba import njit, types
from numba.typed import Dict

from .placement_clean_jit import _add, _best_fit, _ilist, _remove, _take

_KEY = types.UniTuple(types.int64, 2)


@njit(cache=True, nogil=True)
def _bl3(zl, za, zz, x, y, w):
    """bisect_left of (x, y, w) in the triples (zl[k], za[k], zz[k])"""
    lo, hi = 0, len(zl)
    while lo < hi:
        mid = (lo + hi) // 2
        if zl[mid] < x or (zl[mid] == x and (za[mid] < y or (za[mid] == y and zz[mid] < w))):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _zput(zl, za, zz, ln, a, z):
    k = _bl3(zl, za, zz, ln, a, z)
    zl.insert(k, ln)
    za.insert(k, a)
    zz.insert(k, z)


@njit(cache=True, nogil=True)
def _zdel(zl, za, zz, k):
    zl.pop(k)
    za.pop(k)
    zz.pop(k)


@njit(cache=True, nogil=True)
def _zadd(zl, za, zz, zs, ze, z, a, b):
    """The Python loop's zadd: [a, b) free again in zone z, merged with its free neighbours in that zone."""
    if (z, a) in ze:                                   # merge with the free block below
        e = ze[(z, a)]
        del ze[(z, a)]
        del zs[(z, e)]
        _zdel(zl, za, zz, _bl3(zl, za, zz, a - e, e, z))
        a = e
    if (z, b) in zs:                                   # and the one above
        nb = zs[(z, b)]
        del zs[(z, b)]
        del ze[(z, nb)]
        _zdel(zl, za, zz, _bl3(zl, za, zz, nb - b, b, z))
        b = nb
    zs[(z, a)] = b
    ze[(z, b)] = a
    _zput(zl, za, zz, b - a, a, z)


@njit(cache=True, nogil=True)
def _zoned(first, last, size, order, zlo, zhi, zafter, zbefore, base):
    m = len(first)
    offsets = np.zeros(m, dtype=np.int64)
    in_zone = np.full(m, -1, dtype=np.int64)
    ends = [(np.int64(0), np.int64(0))]            # heap (slot, stay or -1 - zone): a zone opens after `after`
    ends.pop()
    for j in range(len(zlo)):
        ends.append((zafter[j], np.int64(-1 - j)))
    heapq.heapify(ends)
    zl, za, zz = _ilist(), _ilist(), _ilist()      # open zone blocks (length, start, zone), sorted
    zs = Dict.empty(key_type=_KEY, value_type=types.int64)    # (zone, block start) -> end
    ze = Dict.empty(key_type=_KEY, value_type=types.int64)    # (zone, block end) -> start
    rs, rend, rl, rst = _ilist(), _ilist(), _ilist(), _ilist()   # the region's free blocks (relative to base)
    top = np.int64(0)
    peak = np.int64(0)
    for s in order:
        f, l_, need = first[s], last[s], size[s]
        while len(ends) > 0 and ends[0][0] < f:
            r = heapq.heappop(ends)[1]
            if r < 0:
                z = -1 - r
                _zadd(zl, za, zz, zs, ze, z, zlo[z], zhi[z])
                continue
            if in_zone[r] >= 0:
                _zadd(zl, za, zz, zs, ze, in_zone[r], offsets[r], offsets[r] + size[r])
                continue
            a = offsets[r] - base
            _add(rs, rend, rl, rst, a, a + size[r])
            if len(rs) > 0 and rend[len(rend) - 1] == top:     # free space at the top: lower it
                top = rs.pop()
                e = rend.pop()
                _take(rl, rst, top, e)
        k = _bl3(zl, za, zz, need, np.int64(-1), np.int64(-1))
        while k < len(zl):
            z = zz[k]
            if f >= zbefore[z]:                # the zone's tenant has arrived: closed for good
                a = za[k]
                del zs[(z, a)]
                del ze[(z, a + zl[k])]
                _zdel(zl, za, zz, k)
                continue
            if l_ < zbefore[z]:
                break
            k += 1
        if k < len(zl):
            ln, a, z = zl[k], za[k], zz[k]
            _zdel(zl, za, zz, k)
            del zs[(z, a)]
            del ze[(z, a + ln)]
            offsets[s] = a
            in_zone[s] = z
            if ln > need:
                zs[(z, a + need)] = a + ln
                ze[(z, a + ln)] = a + need
                _zput(zl, za, zz, ln - need, a + need, z)
            heapq.heappush(ends, (l_, np.int64(s)))
            continue
        best = _best_fit(rl, rst, need)
        if best >= 0:
            offsets[s] = base + best
            _remove(rs, rend, rl, rst, best, best + need)
        else:
            offsets[s] = base + top
            top += need
        heapq.heappush(ends, (l_, np.int64(s)))
        if top > peak:
            peak = top
    return offsets, base + peak


def zoned_sweep(first, last, size, order, zones, base: int):
    """placement.place_stays_zoned on int64 arrays, stays visited in `order`, `zones` as there:
    (offsets, bytes needed, base included)."""
    Z = np.asarray(zones, dtype=np.int64).reshape(-1, 4)
    return _zoned(first, last, size, order, np.ascontiguousarray(Z[:, 0]), np.ascontiguousarray(Z[:, 1]),
                  np.ascontiguousarray(Z[:, 2]), np.ascontiguousarray(Z[:, 3]), np.int64(base))
