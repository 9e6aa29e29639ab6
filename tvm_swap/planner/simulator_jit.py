"""simulator.simulate_time compiled with numba: the same need table and the same event loop, the same floating-point
operations in the same order, so the same seconds to the last bit.

The GA scores each genome with simulate_time; on the fuzz's graphs of 3-60 ops (a few hundred actions) the numpy
need table and the conversions to lists cost more than the loop itself: ~13% of a small graph's plan (issue 28,
bench/small_graphs.py). Here the need table is built in one pass in action order (a dep always names an earlier
action, pack_arrays checks it, so a drop's row is settled before any action that waits on it, chains of drops
included) and the loop of simulator._run_streams runs on arrays. tests/planner/test_simulator_jit.py checks the
times against simulator.simulate_time's Python loop on random plans and the GA's own. Compiled on first use and
cached on disk (numba's cache=True).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _need(kind, indptr, dep, stream_of):
    """simulator._need_table: per action and stream the highest FIFO position on that stream among its deps,
    a dep on a drop standing for the drop's own row; the stream and the position on it of every action."""
    n = len(kind)
    stream = np.empty(n, dtype=np.int64)
    pos = np.full(n, -1, dtype=np.int64)
    cnt = np.zeros(3, dtype=np.int64)
    for i in range(n):
        s = stream_of[kind[i]]
        stream[i] = s
        if s >= 0:
            pos[i] = cnt[s]
            cnt[s] += 1
    need = np.full((n, 3), -1, dtype=np.int64)
    for i in range(n):
        for e in range(indptr[i], indptr[i + 1]):
            j = dep[e]
            s = stream[j]
            if s >= 0:
                if pos[j] > need[i, s]:
                    need[i, s] = pos[j]
            else:
                for c in range(3):
                    if need[j, c] > need[i, c]:
                        need[i, c] = need[j, c]
    return need, stream, cnt


@njit(cache=True, nogil=True)
def _per_stream(work, need, stream, cnt):
    """simulator._per_stream: per stream, its actions' work and the other two columns of their need rows."""
    nc, nd, nh = cnt[0], cnt[1], cnt[2]
    c_dur, c_nd, c_nh = np.empty(nc), np.empty(nc, dtype=np.int64), np.empty(nc, dtype=np.int64)
    d_bytes, d_nc, d_nh = np.empty(nd), np.empty(nd, dtype=np.int64), np.empty(nd, dtype=np.int64)
    h_bytes, h_nc, h_nd = np.empty(nh), np.empty(nh, dtype=np.int64), np.empty(nh, dtype=np.int64)
    k = np.zeros(3, dtype=np.int64)
    for i in range(len(stream)):
        s = stream[i]
        if s == 0:
            c_dur[k[0]], c_nd[k[0]], c_nh[k[0]] = work[i], need[i, 1], need[i, 2]
        elif s == 1:
            d_bytes[k[1]], d_nc[k[1]], d_nh[k[1]] = work[i], need[i, 0], need[i, 2]
        elif s == 2:
            h_bytes[k[2]], h_nc[k[2]], h_nd[k[2]] = work[i], need[i, 0], need[i, 1]
        if s >= 0:
            k[s] += 1
    return c_dur, c_nd, c_nh, d_bytes, d_nc, d_nh, h_bytes, h_nc, h_nd


@njit(cache=True, nogil=True)
def sim_time(kind, work, indptr, dep, stream_of, d_solo, h_solo, d_both, h_both):
    """(iteration seconds, whether every action ran): simulator._run_streams' loop, statement for statement."""
    need, stream, cnt = _need(kind, indptr, dep, stream_of)
    nc, nd, nh = cnt[0], cnt[1], cnt[2]
    c_dur, c_nd, c_nh, d_bytes, d_nc, d_nh, h_bytes, h_nc, h_nd = _per_stream(work, need, stream, cnt)
    c_end, d_end, h_end = np.empty(nc), np.empty(nd), np.empty(nh)
    ci = di = hi = 0
    c_free = d_free = h_free = 0.0
    t_now = 0.0
    d_s = h_s = -1.0
    d_rem = h_rem = 0.0
    t = 0.0
    while True:
        while ci < nc:
            a = c_nd[ci]
            b = c_nh[ci]
            if a >= di or b >= hi:
                break
            t = c_free
            if a >= 0 and d_end[a] > t:
                t = d_end[a]
            if b >= 0 and h_end[b] > t:
                t = h_end[b]
            c_free = t + c_dur[ci]
            c_end[ci] = c_free
            ci += 1
        if d_s < 0 and di < nd and d_nc[di] < ci and d_nh[di] < hi:
            t = d_free
            a = d_nc[di]
            b = d_nh[di]
            if a >= 0 and c_end[a] > t:
                t = c_end[a]
            if b >= 0 and h_end[b] > t:
                t = h_end[b]
            d_s = t
            d_rem = d_bytes[di]
        if h_s < 0 and hi < nh and h_nc[hi] < ci and h_nd[hi] < di:
            t = h_free
            a = h_nc[hi]
            b = h_nd[hi]
            if a >= 0 and c_end[a] > t:
                t = c_end[a]
            if b >= 0 and d_end[b] > t:
                t = d_end[b]
            h_s = t
            h_rem = h_bytes[hi]
        if d_s >= 0:
            if h_s < 0:
                t = (d_s if d_s > t_now else t_now) + d_rem / d_solo
                d_end[di] = t
                d_free = t_now = t
                d_s = -1.0
                di += 1
                continue
        elif h_s >= 0:
            t = (h_s if h_s > t_now else t_now) + h_rem / h_solo
            h_end[hi] = t
            h_free = t_now = t
            h_s = -1.0
            hi += 1
            continue
        else:
            break
        t = t_now
        if d_s > t or h_s > t:
            t0 = d_s if d_s < h_s else h_s
            if t0 > t:
                t = t0
            if d_s > t:
                fin = t + h_rem / h_solo
                if fin <= d_s:
                    h_end[hi] = fin
                    h_free = t_now = fin
                    h_s = -1.0
                    hi += 1
                    continue
                h_rem -= (d_s - t) * h_solo
                t = d_s
            elif h_s > t:
                fin = t + d_rem / d_solo
                if fin <= h_s:
                    d_end[di] = fin
                    d_free = t_now = fin
                    d_s = -1.0
                    di += 1
                    continue
                d_rem -= (h_s - t) * d_solo
                t = h_s
        fd = d_rem / d_both
        fh = h_rem / h_both
        if fd <= fh:
            h_rem -= fd * h_both
            t += fd
            d_end[di] = t
            d_free = t_now = t
            d_s = -1.0
            di += 1
            if h_rem < 0.0:
                h_rem = 0.0
        else:
            d_rem -= fh * d_both
            t += fh
            h_end[hi] = t
            h_free = t_now = t
            h_s = -1.0
            hi += 1
    ok = ci >= nc and di >= nd and hi >= nh
    end = max(c_end[nc - 1] if nc else 0.0, d_end[nd - 1] if nd else 0.0, h_end[nh - 1] if nh else 0.0)
    return end, ok
