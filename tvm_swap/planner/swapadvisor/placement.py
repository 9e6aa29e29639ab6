"""Offline placement of arena stays (dynamic storage allocation): offsets for closed slot intervals such that
stays whose intervals intersect get disjoint byte ranges. The sweep (place_stays) is what the arena planner
uses; place_stays_clean is the sweep that avoids bytes a copy to the host is still draining; place_by_size
packs tighter near the floor (and is quadratic). See the arena package (arena/layout.py) for how the planner uses them.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

import numpy as np


def place_stays(first: list[int], last: list[int], size: list[int]) -> tuple[list[int], int]:
    """Offsets for stays [first, last] (closed slot intervals) of `size` bytes such that stays whose
    intervals intersect get disjoint ranges; returns (offsets, bytes needed). See the module docstring.
    A sweep by start (largest first, then index), best fit among the free blocks below the top, lowest
    address on ties, else at the top (compiled: placement_jit.sweep)."""
    from .placement_jit import sweep

    m = len(first)
    if not m:
        return [], 0
    F = np.asarray(first, dtype=np.int64)
    S = np.asarray(size, dtype=np.int64)
    order = np.lexsort((-S, F))         # by start, largest first, then index (lexsort is stable)
    offsets, peak = sweep(F, np.asarray(last, dtype=np.int64), S, order)
    return offsets.tolist(), int(peak)


def place_stays_zoned(first: list[int], last: list[int], size: list[int], zones: list, base: int
                      ) -> tuple[list[int], int]:
    """place_stays above `base`, with `zones` below it: (lo, hi, after, before), a byte range [lo, hi) that a
    stay [f, l] may use when after < f and l < before (a kept pair's bytes while its tenant is away). A stay
    takes the best-fitting open zone block first, else a block of the region above `base` (as place_stays).
    Zone blocks merge only within their zone, so no stay straddles two zones or a zone and the region.
    Returns absolute offsets and the bytes needed (base included). Compiled: placement_zoned_jit.zoned_sweep
    (the Python loop is the reference in tests/planner/swapadvisor/test_placement_zoned_jit.py)."""
    from .placement_zoned_jit import zoned_sweep

    m = len(first)
    if not m:
        return [], base
    F = np.asarray(first, dtype=np.int64)
    S = np.asarray(size, dtype=np.int64)
    order = np.lexsort((-S, F))         # by start, largest first, then index (lexsort is stable)
    offsets, need = zoned_sweep(F, np.asarray(last, dtype=np.int64), S, order, zones, base)
    return offsets.tolist(), int(need)


class _Blocks:
    """Disjoint free ranges [a, b) by address, neighbours coalesced; also sorted by (length, start) so that
    best_fit is a bisection, not a scan of every block (the scan made placement quadratic at 10^5 ops)."""

    def __init__(self):
        self.starts: list[int] = []
        self.end: dict[int, int] = {}
        self.by_len: list[tuple[int, int]] = []     # (length, start) of every block, sorted

    def _put(self, a: int, b: int) -> None:
        self.end[a] = b
        insort(self.by_len, (b - a, a))

    def _take(self, a: int) -> int:
        b = self.end.pop(a)
        bl = self.by_len
        del bl[bisect_left(bl, (b - a, a))]
        return b

    def add(self, a: int, b: int) -> None:
        st, end = self.starts, self.end
        k = bisect_left(st, a)
        if k > 0 and end[st[k - 1]] == a:
            k -= 1
            a = st[k]
            self._take(a)
            del st[k]
        if k < len(st) and st[k] == b:
            b = self._take(b)
            del st[k]
        st.insert(k, a)
        self._put(a, b)

    def remove(self, a: int, b: int) -> None:
        """Take [a, b) out (whatever part of it is here)."""
        st, end = self.starts, self.end
        k = bisect_right(st, a) - 1
        if k < 0 or end[st[k]] <= a:
            k += 1
        while k < len(st) and st[k] < b:
            x = st[k]
            y = self._take(x)
            del st[k]
            if x < a:
                st.insert(k, x)
                self._put(x, a)
                k += 1
            if y > b:
                st.insert(k, b)
                self._put(b, y)
                k += 1

    def pop_last(self) -> int:
        """Remove the highest block; its start."""
        a = self.starts.pop()
        self._take(a)
        return a

    def best_fit(self, need: int) -> int:
        """The start of the smallest range of at least `need` bytes (lowest address on ties), or -1."""
        bl = self.by_len
        k = bisect_left(bl, (need, -1))
        return bl[k][1] if k < len(bl) else -1


def place_stays_clean(first: list[int], last: list[int], cool: list[int], size: list[int],
                      limit: int) -> tuple[list[int], int]:
    """place_stays, preferring clean bytes: a stay's bytes are free after slot `last` but *dirty* until slot
    `cool` (its copy to the host is still running, so a tenant there would wait for the link). Each stay goes
    to the best-fitting clean free range below `limit` (free blocks and the room above the top, less the
    dirty ranges); when none fits, to the free block whose dirt clears first (then the smallest), else the
    top grows, as in place_stays. A tenant of dirty bytes waits for their drop, which waits for the copy, so
    their dirt is forgotten once taken (a later tenant waits on that tenant anyway).
    Same contract as place_stays; cool[k] >= last[k]. Compiled: placement_clean_jit.clean_sweep (the Python
    loop is the reference in tests/planner/swapadvisor/test_placement_clean_jit.py)."""
    from .placement_clean_jit import clean_sweep

    m = len(first)
    if not m:
        return [], 0
    F = np.asarray(first, dtype=np.int64)
    S = np.asarray(size, dtype=np.int64)
    order = np.lexsort((-S, F))
    offsets, peak = clean_sweep(F, np.asarray(last, dtype=np.int64), np.asarray(cool, dtype=np.int64), S, order,
                                int(limit))
    return offsets.tolist(), int(peak)


def by_size_arrays(first: list[int], last: list[int], size: list[int], fixed=(), bounds=()):
    """The arrays placement_jit.by_size takes, (F, L, S, offsets, placed): the m stays first, then the `fixed`
    ones (placed), then a zero-size stay at each bound, alive always (placed: gaps end there)."""
    m, nf = len(first), len(fixed)
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
    return F, L, S, off, placed


def place_by_size(first: list[int], last: list[int], size: list[int], fixed=(), bounds=()
                  ) -> tuple[list[int], int]:
    """Greedy by size (largest first, then by start, each at the lowest offset clear of the already placed
    stays it overlaps in time): quadratic in stays, slower than the sweep, but packs tight instances the
    sweep fragments, near the largest working set. Same contract as place_stays (compiled:
    placement_jit.by_size). `fixed`: (first, last, offset, size) stays placed beforehand; `bounds`: offsets
    no stay may straddle (a kept pair's zones, see arena.layout.place_with_pairs). Both only constrain; offsets
    returned are absolute."""
    from .placement_jit import by_size

    m = len(first)
    if not m:
        return [], 0
    F, L, S, off, placed = by_size_arrays(first, last, size, fixed, bounds)
    off, peak = by_size(F, L, S, np.lexsort((F[:m], -S[:m])), off, placed)
    return off[:m].tolist(), int(peak)
