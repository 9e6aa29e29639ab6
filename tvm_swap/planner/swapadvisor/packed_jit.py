"""packed_builder.pack_decisions in arena mode (byte ranges) compiled with numba: the same arrays, in one pass.

The numpy version answers each dep rule with a sort and a searchsorted over the whole action list: some 150
numpy calls per evaluation, which on the fuzz's graphs of 3-60 ops (a few hundred actions) cost ~300 us of
call overhead, a fifth of an evaluation (issue 28, profiled over 60 of bench/small_graphs.py's cases). Here the
actions are visited once in list order, keeping per tensor its latest swap-in, arrival, read and swap-out, and
per elementary byte segment (the address space cut at every stay's bounds, as _latest_covering_drops cuts it)
its latest drop; "latest before this action" is then the value kept when the action is reached. Each action's
deps are sorted and deduplicated as np.unique sorts and deduplicates them there.
tests/planner/swapadvisor/test_packed_jit.py checks the arrays against the numpy version on the fuzz's
decisions. Compiled on first use and cached on disk (numba's cache=True), as placement_jit.
"""
from __future__ import annotations

from itertools import chain

import numpy as np
from numba import njit

from ..simulator import COMPUTE, DROP, RECOMPUTE, SWAP_IN, SWAP_OUT, PackedActions

_R, _C, _O, _D, _I = 0, 1, 2, 3, 4          # kind of action, by rank within a slot (recompute, compute, ...)


def pack_arena(n_slots: int, sched, out_objs: list, swap_outs: list, drops: list, swap_ins: list, op_ptr, op_tensors,
               op_nin, op_time, nbytes, ranges, recomputes=()) -> PackedActions:
    """pack_decisions(..., ranges=ranges, recomputes=recomputes), compiled (see the module docstring)."""
    n = int(n_slots)
    rc = _rows([(s, op) for s, op, _ in recomputes], 2)
    so, dr, si = _rows(swap_outs, 2), _rows(drops, 3), _rows(swap_ins, 3)
    wr_obj = [o for objs in out_objs for o in objs]
    for _, _, objs in recomputes:
        wr_obj.extend(objs)
    r_off, r_size = (np.asarray(x, dtype=np.int64) for x in ranges)
    sched = np.asarray(sched, dtype=np.int64)
    kind, work, indptr, dep = _pack(n, sched, rc, so, dr, si, np.array(wr_obj, dtype=np.int64), op_ptr, op_tensors,
                                    op_nin, op_time, nbytes, r_off, r_size)
    if len(indptr) == 0:
        raise ValueError("pack_decisions: output objects do not match the ops' outputs")
    return PackedActions(kind, work, indptr, dep)


def _rows(tuples: list, width: int) -> np.ndarray:
    """A list of int tuples as an int64 array of `width` columns (np.fromiter: np.array on a list of tuples
    costs ~5x more, a fifth of a small graph's pack)."""
    return np.fromiter(chain.from_iterable(tuples), dtype=np.int64, count=width * len(tuples)).reshape(-1, width)


@njit(cache=True, nogil=True)
def _order(n, rc, so, dr, si):
    """The action list: per slot its recomputes, its compute, then its swap-outs, drops and swap-ins in recorded
    order (a swap-in at the latest slot of those recorded before it). Returns (kind rank, index) per position."""
    n_r, n_o, n_d, n_i = len(rc), len(so), len(dr), len(si)
    A = n_r + n + n_o + n_d + n_i
    m = max(n_r, n_o, n_d, n_i, 1)
    key = np.empty(A, dtype=np.int64)
    rank = np.empty(A, dtype=np.int64)
    idx = np.empty(A, dtype=np.int64)
    # slots run from -1 (a drop or swap-in before the first op) to n: shifted to stay non-negative
    lo = 0
    for k in range(n_r):
        lo = min(lo, rc[k, 0])
    for k in range(n_o):
        lo = min(lo, so[k, 0])
    for k in range(n_d):
        lo = min(lo, dr[k, 0])
    for k in range(n_i):
        lo = min(lo, si[k, 0])
    w = 5 * m
    a = 0
    for k in range(n_r):
        key[a], rank[a], idx[a] = (rc[k, 0] - lo) * w + k, _R, k
        a += 1
    for k in range(n):
        key[a], rank[a], idx[a] = (k - lo) * w + m, _C, k
        a += 1
    for k in range(n_o):
        key[a], rank[a], idx[a] = (so[k, 0] - lo) * w + 2 * m + k, _O, k
        a += 1
    for k in range(n_d):
        key[a], rank[a], idx[a] = (dr[k, 0] - lo) * w + 3 * m + k, _D, k
        a += 1
    top = np.int64(-(1 << 62))
    for k in range(n_i):
        if si[k, 0] > top:
            top = si[k, 0]
        key[a], rank[a], idx[a] = (top - lo) * w + 4 * m + k, _I, k
        a += 1
    order = np.argsort(key, kind="mergesort")      # (the keys are distinct: any sort gives this order)
    return rank[order], idx[order]


@njit(cache=True, nogil=True)
def _segments(lo, hi, bnd):
    """The elementary segments [a, b) of the byte range [lo, hi) (the address space cut at `bnd`)."""
    return np.searchsorted(bnd, lo), np.searchsorted(bnd, hi)


@njit(cache=True, nogil=True)
def _pack(n, sched, rc, so, dr, si, wr_obj, op_ptr, op_tensors, op_nin, op_time, nbytes, r_off, r_size):
    rank, idx = _order(n, rc, so, dr, si)
    A = len(rank)
    n_t = len(nbytes)
    # the first output object of each compute (by slot) and each recompute (after all computes)
    n_r = len(rc)
    obj0 = np.empty(n + n_r + 1, dtype=np.int64)
    c = 0
    for k in range(n + n_r):
        obj0[k] = c
        op = sched[k] if k < n else rc[k - n, 1]
        c += op_ptr[op + 1] - op_ptr[op] - op_nin[op]
    obj0[n + n_r] = c
    if c != len(wr_obj):
        return (np.empty(0, dtype=np.int8), np.empty(0, dtype=np.float64), np.empty(0, dtype=np.int64),
                np.empty(0, dtype=np.int64))         # (the caller raises: the outputs do not match)
    # the address space cut at every drop's and arrival's bounds
    bounds = np.empty(2 * (len(dr) + len(wr_obj) + len(si)), dtype=np.int64)
    b = 0
    for k in range(len(dr)):
        bounds[b], bounds[b + 1] = r_off[dr[k, 2]], r_off[dr[k, 2]] + r_size[dr[k, 2]]
        b += 2
    for k in range(len(wr_obj)):
        bounds[b], bounds[b + 1] = r_off[wr_obj[k]], r_off[wr_obj[k]] + r_size[wr_obj[k]]
        b += 2
    for k in range(len(si)):
        bounds[b], bounds[b + 1] = r_off[si[k, 2]], r_off[si[k, 2]] + r_size[si[k, 2]]
        b += 2
    bnd = np.unique(bounds)
    seg_drop = np.full(max(len(bnd), 1), -1, dtype=np.int64)   # per segment: the latest drop that freed it
    last_si = np.full(n_t, -1, dtype=np.int64)
    last_arr = np.full(n_t, -1, dtype=np.int64)
    last_rd = np.full(n_t, -1, dtype=np.int64)
    last_so = np.full(n_t, -1, dtype=np.int64)
    kind = np.empty(A, dtype=np.int8)
    work = np.zeros(A, dtype=np.float64)
    indptr = np.zeros(A + 1, dtype=np.int64)
    dep = np.empty(16, dtype=np.int64)
    nd = 0
    buf = np.empty(16, dtype=np.int64)
    for p in range(A):
        r, k = rank[p], idx[p]
        m = 0                      # this action's deps, collected in buf
        if r == _R or r == _C:
            op = sched[k] if r == _C else rc[k, 1]
            kind[p] = COMPUTE if r == _C else RECOMPUTE
            work[p] = op_time[op]
            a0, a1, k_out = op_ptr[op], op_ptr[op + 1], op_ptr[op] + op_nin[op]
            for j in range(a0, k_out):             # inputs: their latest swap-in
                t = op_tensors[j]
                if last_si[t] >= 0:
                    buf, m = _put(buf, m, last_si[t])
            o = obj0[k] if r == _C else obj0[n + k]
            for j in range(k_out, a1):             # outputs: the drops that last freed their bytes
                s = wr_obj[o + j - k_out]
                buf, m = _covering(buf, m, r_off[s], r_off[s] + r_size[s], bnd, seg_drop)
            for j in range(a0, k_out):
                last_rd[op_tensors[j]] = p
            for j in range(k_out, a1):
                last_arr[op_tensors[j]] = p
        elif r == _O:
            t = so[k, 1]
            kind[p] = SWAP_OUT
            work[p] = nbytes[t]
            if last_arr[t] >= 0:                   # the tensor's arrival
                buf, m = _put(buf, m, last_arr[t])
            last_so[t] = p
        elif r == _D:
            t, s = dr[k, 1], dr[k, 2]
            kind[p] = DROP
            a, rd, sw = last_arr[t], last_rd[t], last_so[t]
            first = rd if rd > a else a            # its last reader in this tenancy, else its arrival
            if first >= 0:
                buf, m = _put(buf, m, first)
            if sw > a:                             # this tenancy's swap-out
                buf, m = _put(buf, m, sw)
            sa, sb = _segments(r_off[s], r_off[s] + r_size[s], bnd)
            for g in range(sa, sb):
                seg_drop[g] = p
        else:
            t, s = si[k, 1], si[k, 2]
            kind[p] = SWAP_IN
            work[p] = nbytes[t]
            buf, m = _covering(buf, m, r_off[s], r_off[s] + r_size[s], bnd, seg_drop)
            if last_so[t] >= 0:                    # its host copy
                buf, m = _put(buf, m, last_so[t])
            last_si[t] = p
            last_arr[t] = p
        if m:
            _sort_small(buf, m)
            if nd + m > len(dep):
                dep = _grown(dep, nd + m)
            prev = -1
            for j in range(m):
                if buf[j] != prev:
                    prev = dep[nd] = buf[j]
                    nd += 1
        indptr[p + 1] = nd
    return kind, work, indptr, dep[:nd].copy()


@njit(cache=True, nogil=True)
def _covering(buf, m, lo, hi, bnd, seg_drop):
    """The drops that last freed any byte of [lo, hi), appended to buf (repeats removed later)."""
    sa, sb = _segments(lo, hi, bnd)
    for g in range(sa, sb):
        if seg_drop[g] >= 0:
            buf, m = _put(buf, m, seg_drop[g])
    return buf, m


@njit(cache=True, nogil=True)
def _sort_small(buf, m):
    """buf[:m] sorted in place (insertion sort: an action has a handful of deps; np.sort allocates)."""
    if m > 32:
        buf[:m] = np.sort(buf[:m])
        return
    for i in range(1, m):
        x = buf[i]
        j = i - 1
        while j >= 0 and buf[j] > x:
            buf[j + 1] = buf[j]
            j -= 1
        buf[j + 1] = x


@njit(cache=True, nogil=True)
def _put(buf, m, x):
    if m == len(buf):
        buf = _grown(buf, m + 1)
    buf[m] = x
    return buf, m + 1


@njit(cache=True, nogil=True)
def _grown(a, need):
    out = np.empty(max(need, 2 * len(a)), dtype=a.dtype)
    out[:len(a)] = a
    return out
