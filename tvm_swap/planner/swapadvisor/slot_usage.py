"""The arena walk's per-slot byte usage (arena/walk.py), kept in blocks of BLOCK slots, compiled.

The walk asks one thing of it per swap-in: the last slot before the use whose usage leaves no room for the
tensor (the prefetch starts after it), then adds the tensor's bytes to every slot from there to the use.
With a prefetch window of 4096 slots, doing both slot by slot scanned and wrote ~8000 slots per swap-in,
1.05e9 at 10^5 ops (~1 CPU s per walk, several walks per plan). Here a slot's usage is base[s] + lazy[block];
a range add touches the partial blocks at its ends slot by slot and whole blocks through `lazy`, and the
search skips whole blocks whose max (bmax, lazy included) is within the room: ~BLOCK + window / BLOCK steps.
The numbers are the same integers the flat array held (tests/planner/swapadvisor/test_slot_usage.py checks
every operation against numpy slices), so plans are unchanged.
"""
from __future__ import annotations

import numpy as np
from numba import njit

SHIFT = 6
BLOCK = 1 << SHIFT          # slots per block


def new_usage(n: int):
    """(base, lazy, bmax) for n slots, all zero."""
    nb = max(1, (n + BLOCK - 1) >> SHIFT)
    return np.zeros(nb << SHIFT, dtype=np.int64), np.zeros(nb, dtype=np.int64), np.zeros(nb, dtype=np.int64)


def usage_values(base, lazy, n: int) -> np.ndarray:
    """The usage of slots 0..n-1 as a flat array (for tests and debugging)."""
    return (base + np.repeat(lazy, BLOCK))[:n]


@njit(cache=True, nogil=True)
def _refresh(base, lazy, bmax, k):
    lo = k << SHIFT
    m = base[lo]
    for s in range(lo + 1, lo + BLOCK):
        if base[s] > m:
            m = base[s]
    bmax[k] = m + lazy[k]


@njit(cache=True, nogil=True)
def usage_set(base, lazy, bmax, i, v):
    """usage[i] = v"""
    k = i >> SHIFT
    base[i] = v - lazy[k]
    _refresh(base, lazy, bmax, k)


@njit(cache=True, nogil=True)
def usage_add(base, lazy, bmax, a, b, v):
    """usage[a:b] += v"""
    if a >= b:
        return
    ka, kb = a >> SHIFT, (b - 1) >> SHIFT
    if ka == kb:
        for s in range(a, b):
            base[s] += v
        _refresh(base, lazy, bmax, ka)
        return
    if a & (BLOCK - 1):                     # partial block at the left end
        for s in range(a, (ka + 1) << SHIFT):
            base[s] += v
        _refresh(base, lazy, bmax, ka)
        ka += 1
    if b & (BLOCK - 1):                     # and at the right end
        for s in range(kb << SHIFT, b):
            base[s] += v
        _refresh(base, lazy, bmax, kb)
        kb -= 1
    for k in range(ka, kb + 1):             # whole blocks
        lazy[k] += v
        bmax[k] += v


@njit(cache=True, nogil=True)
def prefetch_slot(base, lazy, bmax, lo, i, room, need):
    """The last slot q in (lo, i) whose usage exceeds `room` (else lo), after which a swap-in for slot i is
    issued; adds `need` to the usage of slots q+1..i-1. Returns q."""
    q = lo
    s = i - 1
    while s > lo:
        k = s >> SHIFT
        start = k << SHIFT
        if s == start + BLOCK - 1 and start > lo and bmax[k] <= room:   # a whole block, nothing over: skip
            s = start - 1
            continue
        if base[s] + lazy[k] > room:
            q = s
            break
        s -= 1
    usage_add(base, lazy, bmax, q + 1, i, need)
    return q
