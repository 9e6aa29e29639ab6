"""placement._Blocks finds the best fit by bisection in a (length, start) index instead of scanning every free
block (the scan made clean-first placement quadratic at 10^5 ops). The placements must be exactly those of the
scanning block set, kept here as the reference."""
from bisect import bisect_left, bisect_right

import numpy as np
import pytest

from tvm_swap.planner.swapadvisor import placement
from tvm_swap.planner.swapadvisor.placement import _Blocks, place_stays_clean, place_stays_zoned
from tests.planner.swapadvisor.test_placement_zoned_jit import ref_place_stays_zoned


class _ScanBlocks:
    """The block set before the index: best_fit scans every block in address order."""

    def __init__(self):
        self.starts, self.end = [], {}

    def add(self, a, b):
        st, end = self.starts, self.end
        k = bisect_left(st, a)
        if k > 0 and end[st[k - 1]] == a:
            k -= 1
            a = st[k]
            del st[k]
        if k < len(st) and st[k] == b:
            b = end.pop(b)
            del st[k]
        st.insert(k, a)
        end[a] = b

    def remove(self, a, b):
        st, end = self.starts, self.end
        k = bisect_right(st, a) - 1
        if k < 0 or end[st[k]] <= a:
            k += 1
        while k < len(st) and st[k] < b:
            x = st[k]
            y = end.pop(x)
            del st[k]
            if x < a:
                st.insert(k, x)
                end[x] = a
                k += 1
            if y > b:
                st.insert(k, b)
                end[b] = y
                k += 1

    def pop_last(self):
        a = self.starts.pop()
        del self.end[a]
        return a

    def best_fit(self, need):
        best, best_len = -1, -1
        for a in self.starts:
            ln = self.end[a] - a
            if ln >= need and (best < 0 or ln < best_len):
                best, best_len = a, ln
                if ln == need:
                    break
        return best


def test_block_operations_match_the_scanning_reference():
    rng = np.random.default_rng(0)
    for _ in range(200):
        fast, ref = _Blocks(), _ScanBlocks()
        for _ in range(int(rng.integers(1, 80))):
            a = int(rng.integers(0, 64)) * 256
            b = a + int(rng.integers(1, 12)) * 256
            op = rng.random()
            if op < 0.45:
                # add only free-of-overlap ranges (as the placements do)
                if all(b <= x or ref.end[x] <= a for x in ref.starts):
                    fast.add(a, b)
                    ref.add(a, b)
            elif op < 0.8:
                fast.remove(a, b)
                ref.remove(a, b)
            elif op < 0.85 and ref.starts:
                assert fast.pop_last() == ref.pop_last()
            need = int(rng.integers(1, 20)) * 256
            assert fast.best_fit(need) == ref.best_fit(need)
            assert fast.starts == ref.starts and fast.end == ref.end
            assert fast.by_len == sorted((ref.end[x] - x, x) for x in ref.starts)


def _random_stays(rng, m):
    first = rng.integers(-1, 3 * m // 4 + 2, size=m).tolist()
    last = [f + int(rng.integers(0, 10)) for f in first]
    cool = [x + int(rng.integers(0, 8)) * int(rng.random() < 0.5) for x in last]
    size = (rng.integers(1, 40, size=m) * 256).tolist()
    return first, last, cool, size


def _random_zoned(rng, n, m):
    """Kept pairs' zones below `base` (as test_arena._random_zoned) and m stays over n slots."""
    zones, base = [], 0
    for _ in range(int(rng.integers(1, 4))):
        z = int(rng.integers(2, 9)) * 256
        lr, prod = int(rng.integers(0, n)), int(rng.integers(0, n))
        zones += [(base, base + z, lr, 1 << 62), (base + z, base + 2 * z, -2, prod)]
        base += 2 * z
    first = rng.integers(-1, n, size=m)
    last = np.minimum(first + rng.integers(0, 6, size=m), n)
    size = rng.integers(1, 9, size=m) * 256
    return zones, base, first.tolist(), last.tolist(), size.tolist()


@pytest.mark.parametrize("seed", range(10))
def test_clean_and_zoned_placements_are_those_of_the_scanning_block_set(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(30):
        first, last, cool, size = _random_stays(rng, int(rng.integers(1, 300)))
        limit = int(rng.integers(0, 3 * sum(size) // len(size) * 4 // 256 + 2)) * 256
        cases.append(("clean", (first, last, cool, size, limit)))
        zones, base, zf, zl, zs = _random_zoned(rng, n=40, m=int(rng.integers(1, 200)))
        cases.append(("zoned", (zf, zl, zs, zones, base)))
    fast = [{"clean": place_stays_clean, "zoned": place_stays_zoned}[k](*args) for k, args in cases]
    monkeypatch.setattr(placement, "_Blocks", _ScanBlocks)      # the zoned sweep's Python reference uses it
    ref = [{"clean": place_stays_clean, "zoned": ref_place_stays_zoned}[k](*args) for k, args in cases]
    assert fast == ref
