"""placement_orders' tries in one compiled call: placement_jit.by_size in each visit order, the best kept (one
numba dispatch instead of one per order, and no Python between them)."""
from __future__ import annotations

import numpy as np
from numba import njit

from .placement_jit import by_size


@njit(cache=True, nogil=True)
def best_of_orders(F, L, S, orders, off0, placed0, fits):
    """placement_jit.by_size in each visit order (a row of `orders`) until one needs at most `fits` bytes (-1:
    all of them): the offsets and peak of the first order with the lowest peak."""
    best_off = off0.copy()
    best = np.int64(-1)
    for r in range(orders.shape[0]):
        off, peak = by_size(F, L, S, orders[r], off0.copy(), placed0.copy())
        peak = max(peak, np.int64(0))
        if best < 0 or peak < best:
            best, best_off = peak, off
            if fits >= 0 and peak <= fits:
                break
    return best_off, best
