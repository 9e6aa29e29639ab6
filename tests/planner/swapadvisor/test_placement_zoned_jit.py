"""The compiled zoned sweep (placement_zoned_jit) places exactly as the Python loop it replaced, kept here as
the reference (ref_place_stays_zoned): same offsets, same bytes needed, so plans did not change."""
import heapq
from bisect import bisect_left, insort

import numpy as np
import pytest

from tvm_swap.planner.swapadvisor import placement
from tvm_swap.planner.swapadvisor.placement import place_stays_zoned
from tvm_swap.planner.swapadvisor.placement_zoned_jit import zoned_sweep


def ref_place_stays_zoned(first: list[int], last: list[int], size: list[int], zones: list, base: int
                      ) -> tuple[list[int], int]:
    """place_stays above `base`, with `zones` below it: (lo, hi, after, before), a byte range [lo, hi) that a
    stay [f, l] may use when after < f and l < before (a kept pair's bytes while its tenant is away). A stay
    takes the best-fitting open zone block first, else a block of the region above `base` (as place_stays).
    Zone blocks merge only within their zone, so no stay straddles two zones or a zone and the region.
    Returns absolute offsets and the bytes needed (base included)."""
    m = len(first)
    order = np.lexsort((-np.asarray(size, dtype=np.int64), np.asarray(first, dtype=np.int64))).tolist() \
        if m else []
    offsets = [0] * m
    in_zone = [-1] * m
    ends: list = [(z[2], -1 - j) for j, z in enumerate(zones)]   # a zone opens after its `after` slot
    heapq.heapify(ends)
    before = [z[3] for z in zones]
    zfree: list = []                # open zone blocks (length, start, zone), sorted
    zs = [dict() for _ in zones]    # zone -> {block start: end}
    ze = [dict() for _ in zones]    # zone -> {block end: start}

    def zadd(z: int, a: int, b: int) -> None:
        e = ze[z].pop(a, None)
        if e is not None:                                  # merge with the free block below
            del zs[z][e]
            del zfree[bisect_left(zfree, (a - e, e, z))]
            a = e
        nb = zs[z].pop(b, None)
        if nb is not None:                                 # and the one above
            del ze[z][nb]
            del zfree[bisect_left(zfree, (nb - b, b, z))]
            b = nb
        zs[z][a] = b
        ze[z][b] = a
        insort(zfree, (b - a, a, z))

    region = placement._Blocks()              # free blocks of the region above base (relative to it), below `top`
    top = peak = 0
    for s in order:
        f, l_, need = first[s], last[s], size[s]
        while ends and ends[0][0] < f:
            _, r = heapq.heappop(ends)
            if r < 0:
                z = -1 - r
                zadd(z, zones[z][0], zones[z][1])
                continue
            if in_zone[r] >= 0:
                zadd(in_zone[r], offsets[r], offsets[r] + size[r])
                continue
            a = offsets[r] - base
            region.add(a, a + size[r])
            if region.starts and region.end[region.starts[-1]] == top:   # free space at the top: lower it
                top = region.pop_last()
        k = bisect_left(zfree, (need, -1, -1))
        while k < len(zfree):
            ln, a, z = zfree[k]
            if f >= before[z]:                 # the zone's tenant has arrived: closed for good
                del zfree[k]
                del zs[z][a]
                del ze[z][a + ln]
                continue
            if l_ < before[z]:
                break
            k += 1
        if k < len(zfree):
            ln, a, z = zfree.pop(k)
            del zs[z][a]
            del ze[z][a + ln]
            offsets[s] = a
            in_zone[s] = z
            if ln > need:
                zs[z][a + need] = a + ln
                ze[z][a + ln] = a + need
                insort(zfree, (ln - need, a + need, z))
            heapq.heappush(ends, (l_, s))
            continue
        best = region.best_fit(need)
        if best >= 0:
            offsets[s] = base + best
            region.remove(best, best + need)
        else:
            offsets[s] = base + top
            top += need
        heapq.heappush(ends, (l_, s))
        if top > peak:
            peak = top
    return offsets, base + peak


def _random_case(rng, n, m, overlap):
    """Kept pairs' zones below `base` over n slots, m stays. `overlap`: zones that share bytes at different times
    (rotation's slots: one slot backs several pairs' zones in turn), else side by side (ping-pong blocks)."""
    zones, base = [], 0
    for _ in range(int(rng.integers(0, 6))):
        z = int(rng.integers(1, 9)) * 256
        lr, prod = int(rng.integers(-1, n)), int(rng.integers(0, n + 1))
        if overlap and zones and rng.random() < 0.5:
            lo, hi = zones[int(rng.integers(0, len(zones)))][:2]
            zones.append((lo, hi, int(rng.integers(-2, n)), int(rng.integers(0, n + 1))))
            continue
        zones += [(base, base + z, lr, 1 << 62), (base + z, base + 2 * z, -2, prod)]
        base += 2 * z
    first = rng.integers(-1, n, size=m)
    last = np.minimum(first + rng.integers(0, 8, size=m), n)
    size = rng.integers(1, 12, size=m) * 256
    if rng.random() < 0.3:                 # many equal sizes: ties in every order
        size = np.full(m, 512)
    return first.tolist(), last.tolist(), size.tolist(), zones, base


@pytest.mark.parametrize("seed", range(40))
def test_compiled_zoned_sweep_places_as_the_python_loop(seed):
    rng = np.random.default_rng(seed)
    for _ in range(15):
        n = int(rng.integers(1, 60))
        case = _random_case(rng, n, int(rng.integers(0, 250)), overlap=bool(seed % 2))
        assert place_stays_zoned(*case) == ref_place_stays_zoned(*case)


def test_zoned_sweep_takes_any_visit_order():
    """zoned_sweep itself (what place_stays_zoned calls) in an order of its caller's choosing: reversed."""
    rng = np.random.default_rng(3)
    first, last, size, zones, base = _random_case(rng, 30, 120, overlap=True)
    order = np.lexsort((-np.asarray(size), np.asarray(first)))
    offs, need = zoned_sweep(np.asarray(first, dtype=np.int64), np.asarray(last, dtype=np.int64),
                             np.asarray(size, dtype=np.int64), order, zones, base)
    assert (offs.tolist(), int(need)) == ref_place_stays_zoned(first, last, size, zones, base)


def test_compiled_zoned_sweep_on_a_large_instance():
    rng = np.random.default_rng(7)
    case = _random_case(rng, 3000, 20000, overlap=False)
    assert place_stays_zoned(*case) == ref_place_stays_zoned(*case)
