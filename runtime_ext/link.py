"""A throttled host<->device link for the emulated backend: copies take bytes / bandwidth, as on a real bus.

Rates follow the simulator (tvm_swap.planner.simulator._link_rates): alone on the link a direction gets its
one-way rate; while both directions copy they share the duplex rate (each at most its one-way rate, split
evenly when both can use half). A copy's rate changes whenever the other direction starts or stops, so each
transfer advances in segments: progress is settled at every change and the remaining time recomputed.

Virtual time: a CPU thread cannot sleep for exactly a few microseconds, so each direction keeps the time its
last copy *should* have ended. A copy starts, on paper, when it became ready (`ready_at`: its waits were met)
or when the previous copy in its direction should have ended, whichever is later; it ends when its bytes
would have crossed from then. Late wake-ups are therefore caught up by the next copy instead of adding up,
and `transfer` returns the ideal end so that whoever waits on the copy can start from that time too.
"""
from __future__ import annotations

import threading
import time

DIRECTIONS = ("d2h", "h2d")


class Link:
    def __init__(self, h2d_bandwidth: float, d2h_bandwidth: float, duplex_bandwidth: float | None = None):
        one = {"h2d": float(h2d_bandwidth), "d2h": float(d2h_bandwidth)}
        dup = float(duplex_bandwidth) if duplex_bandwidth else one["h2d"] + one["d2h"]
        if min(*one.values(), dup) <= 0:
            raise ValueError(f"link bandwidths must be positive (h2d {one['h2d']}, d2h {one['d2h']}, duplex {dup})")
        self.alone = one
        self.both = {"d2h": min(one["d2h"], max(dup / 2, dup - one["h2d"])),
                     "h2d": min(one["h2d"], max(dup / 2, dup - one["d2h"]))}
        self._cond = threading.Condition()
        self._active: dict[str, bool] = {"d2h": False, "h2d": False}
        self._epoch = 0               # bumps whenever the set of active directions changes
        self._virtual_end = {"d2h": 0.0, "h2d": 0.0}

    def rate(self, direction: str) -> float:
        other = "h2d" if direction == "d2h" else "d2h"
        return self.both[direction] if self._active[other] else self.alone[direction]

    def transfer(self, direction: str, nbytes: int, work=None, work_first: bool = True,
                 ready_at: float | None = None) -> float:
        """Hold the link for as long as `nbytes` take in `direction`; run `work()` (the real copy) at the start
        (work_first) or at the end of that window. Time spent in `work` counts towards the window.
        ready_at: perf_counter time the copy could have started (default: now). Returns its ideal end."""
        now = time.perf_counter()
        with self._cond:
            self._active[direction] = True
            self._epoch += 1
            self._cond.notify_all()
            rate = self.rate(direction)     # the rate since `last`; progress is settled with it
            last = min(now, max(now if ready_at is None else ready_at, self._virtual_end[direction]))
        try:
            if work is not None and work_first:
                work()
            remaining = float(nbytes)
            with self._cond:
                while True:
                    now = time.perf_counter()
                    remaining -= (now - last) * rate
                    last = now
                    if remaining <= 0:
                        ideal_end = now + remaining / rate
                        self._virtual_end[direction] = ideal_end
                        break
                    rate = self.rate(direction)
                    epoch = self._epoch
                    self._cond.wait_for(lambda: self._epoch != epoch, timeout=remaining / rate)
        finally:
            with self._cond:
                self._active[direction] = False
                self._epoch += 1
                self._cond.notify_all()
        if work is not None and not work_first:
            work()
        return ideal_end
