"""Timing-aware placement (when the planner passes op times and the device).

An evicted tensor's drop waits for its copy to the host, so the next tenant of its bytes would wait on the d2h
link. Placement first keeps such a stay's bytes until the copy is estimated to end (cooled_lasts: the copies
queued on the link in production order, converted to slots with the op times) and falls back to plain drops
when that does not fit. When keeping every such stay whole does not fit (the arena is full), placement can
still prefer clean bytes stay by stay (clean_first: placement.place_stays_clean, the best-fitting clean range,
else the free block whose copy ends first), at the same decisions or, while it overflows by under 1/16, at a
slightly lower capacity. It packs less tightly and a lower capacity costs evictions, so the simulator (`judge`,
decide.make_judge) judges it against the plain placement and the faster one is kept. On small instances
(tuning.PARTLY_COOLED_MAX_STAYS, genomes with the `partly` gene) the judge also sees a placement that cools
only some stays (partly_cooled). Measurements: notes/arena.md."""
from __future__ import annotations

import numpy as np

from ....errors import PlanError
from . import tuning
from .decisions import Decisions, Placed, WalkInputs, floored_firsts
from .layout import place_with_pairs


def _never(over: int) -> bool:
    """No greedy by size: cooling is an optional improvement."""
    return False


def _always(over: int) -> bool:
    """Greedy by size whenever the sweep overflows (small instances)."""
    return True


def cooled_lasts(walk, d: Decisions) -> list[int]:
    """Stay ends for placement: a stay whose drop waits on its copy to the host keeps its bytes until the
    slot by which that copy (queued on the d2h link behind the earlier ones) is estimated to end, so the next
    tenant of those bytes does not stall on the link. Only lengthens stays (always safe); the walk's budget
    does not see it, so a tight arena pays with another placement round."""
    last = list(d.stay_last)
    if walk.cum is None or not d.dirty:
        return last
    cum = walk.cum
    link = 0.0
    for slot, sid in sorted(d.dirty):
        start = max(link, float(cum[slot]) if slot >= 0 else 0.0)
        link = start + walk.size[d.stay_t[sid]] / walk.d2h
        e = int(np.searchsorted(cum, link, side="left"))
        if e > last[sid] and last[sid] < walk.n:
            last[sid] = min(e, walk.n)
    return last


def cooled(walk, placed: Placed, first, arena_bytes: int, inputs: WalkInputs, judge=None) -> Placed:
    """With op times, the best of: the same decisions placed with cooled stays (cooled_lasts) if that fits,
    else one more decision at the capacity lowered by the overflow if that fits cooled, unless `judge`
    (decisions, offsets, sizes -> simulated seconds) prefers the clean-first placement (clean_first) at the
    capacity before; else the plain placement or, when `judge` prefers it, the clean-first one."""
    d, sizes = placed.decisions, placed.sizes
    if walk.cum is None or not d.dirty:
        return placed
    cool = cooled_lasts(walk, d)
    off2, need = place_with_pairs(d, first, cool, sizes, arena_bytes, _never)
    if need <= arena_bytes:
        return placed._replace(offsets=off2)
    got = _cooled_or_lower(walk, placed, first, arena_bytes, inputs, cool, need, judge)
    if judge is None or not inputs.genes.partly or len(sizes) > tuning.PARTLY_COOLED_MAX_STAYS:
        return got
    partly = partly_cooled(d, first, sizes, placed.offsets, arena_bytes, cool, judge)
    if partly is not None and partly[1] < judge(*got[:3]):
        return placed._replace(offsets=partly[0])
    return got


def partly_cooled(d: Decisions, first, sizes, offsets, arena_bytes: int, cool, judge):
    """When cooling every dirty stay overflows the arena: cool some of them. The dirty stays in the order of
    their copies (the first tuning.PARTLY_COOLED_TRIES), each cooled when the placement (greedy by size, with
    the pairs' zones) still fits and the simulator (`judge`) finds it faster than without; (offsets, seconds)
    of the best, or None when cooling none is best. dag110@0.4 (no evictions, 14 ops): cooling all needs 70.8
    of 43.4 MB, so the plain placement let op5 and op6 reuse the bytes of outputs still copying out (5.51 ms);
    cooling two small outputs, 5.37 ms."""
    last = list(d.stay_last)
    best_t, best_off = judge(d, offsets, sizes), None      # the plain placement (`offsets`)
    cur = list(offsets)
    tries = [sid for _, sid in sorted(d.dirty) if cool[sid] > last[sid]][:tuning.PARTLY_COOLED_TRIES]
    for sid in tries:
        keep = last[sid]
        last[sid] = cool[sid]
        off, need = place_with_pairs(d, first, last, sizes, arena_bytes, _always,
                                     orders=tuning.PARTLY_COOLED_ORDERS)
        # (the same offsets are the same plan: not faster, no simulation)
        t = judge(d, off, sizes) if need <= arena_bytes and off != cur else None
        if t is not None and t < best_t:
            best_t, best_off, cur = t, off, off
        else:
            last[sid] = keep
    return None if best_off is None else (best_off, best_t)


def _cooled_or_lower(walk, placed: Placed, first, arena_bytes: int, inputs: WalkInputs, cool, need: int,
                     judge) -> Placed:
    """cooled when the cooled placement overflows: the decisions at the capacity lowered by the overflow,
    placed cooled, if that fits (judged against clean-first); else plain or clean-first, the faster."""
    d, capacity = placed.decisions, placed.capacity
    a = walk.gi.alignment
    lower = (capacity - (need - arena_bytes)) // a * a
    if lower >= walk.floor():
        try:
            d2 = inputs.run(walk, lower)
        except PlanError:              # the kept pairs do not fit beside the largest op at the lower capacity
            if not inputs.pairs:
                raise                  # (as before kept pairs existed: the caller decides)
            return placed
        first2 = floored_firsts(d2)
        sizes2 = [walk.size[t] for t in d2.stay_t]
        off3, need3 = place_with_pairs(d2, first2, cooled_lasts(walk, d2), sizes2, arena_bytes, _never)
        if need3 <= arena_bytes:
            lowered = Placed(d2, off3, sizes2, lower, placed.rounds + 1)
            if judge is None or not tuning.CLEAN_FIRST:
                return lowered
            # the lower capacity evicts more: judged by the simulator against clean-first at this capacity
            # (BERT-large@32 took the lowered placement at 0.586 of ideal where clean-first gave 0.608)
            clean = clean_first(walk, placed, first, arena_bytes, cool, inputs)
            best = lowered if clean is None or judge(*lowered[:3]) <= judge(*clean[:3]) else clean
            if tuning.ROTATE_KEPT and d.pairs and judge(*placed[:3]) < judge(*best[:3]):
                # rotated zones leave more room, so a cooled placement overflows by less and the lowered
                # capacity is tried where it was not: it evicts more, so the plain placement is judged too
                # (train37@0.8: 6 evictions at 17.8 MB against 4 at the full 24.5 MB)
                return placed
            return best
    if judge is None or not tuning.CLEAN_FIRST:
        return placed
    clean = clean_first(walk, placed, first, arena_bytes, cool, inputs)
    if clean is None or judge(*clean[:3]) >= judge(*placed[:3]):
        return placed
    return clean


def clean_first(walk, placed: Placed, first, arena_bytes: int, cool, inputs: WalkInputs) -> Placed | None:
    """The decisions placed clean-first (place_stays_clean: a swapped-out stay's bytes are taken by the next
    tenant only when no clean range fits, so fewer arrivals wait on the d2h link), else up to
    tuning.CLEAN_ROUNDS decisions at a capacity lowered by the clean placement's overflow while that is under
    1/16 of the capacity; None if none fits."""
    d, sizes, capacity, rounds = placed.decisions, placed.sizes, placed.capacity, placed.rounds
    a = walk.gi.alignment
    floor = walk.floor()
    for rnd in range(tuning.CLEAN_ROUNDS + 1):
        off, need = place_with_pairs(d, first, d.stay_last, sizes, arena_bytes, _never, cool)
        if need <= arena_bytes:
            return Placed(d, off, sizes, capacity, rounds + rnd)
        if rnd == tuning.CLEAN_ROUNDS or need - arena_bytes > capacity // 16:
            return None             # (far over: the evictions a much lower capacity costs would not pay)
        capacity = (capacity - max(need - arena_bytes, capacity // 64)) // a * a
        if capacity < floor:
            return None
        try:
            d = inputs.run(walk, capacity)
        except PlanError:          # the kept pairs do not fit beside the largest op at the lower capacity
            return None
        if not d.dirty:
            return None
        first = floored_firsts(d)
        sizes = [walk.size[t] for t in d.stay_t]
        cool = cooled_lasts(walk, d)
    return None
