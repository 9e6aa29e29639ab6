"""Decide, then place, with a tightened capacity when placement fails.

Decide (the walk) at a capacity; place the stays; if the placement needs more bytes than the arena,
fragmentation cost that much: decide again with the capacity lowered by the overflow (at least 1/64 of it
each round) and place again, up to tuning.MAX_ROUNDS rounds, then once at the floor with every swap-in just
in time. Then, with op times, cooling.cooled may keep swapped-out bytes clean. The walk keeps the bytes of the
stays covering every slot within the capacity and the placement gives intersecting stays disjoint ranges
inside the arena, so a placement that fits is a sound layout: a plan only leaves here once it fits."""
from __future__ import annotations

import weakref

import numpy as np

from ....errors import PlanError
from . import tuning
from .cooling import cooled
from .decisions import Placed, Rounds, WalkInputs, floored_firsts
from .layout import place_with_pairs
from .pairs import choose_pairs, facts_of, pairs_last


def decide_and_place(walk, arena_bytes: int, genes, pinned=(), judge=None) -> Placed:
    """Decide at a capacity, place, lower the capacity by the overflow until the placement fits; then
    cooling.cooled (with `judge`, the simulator's time of a placement, a clean-first placement may win)."""
    r = rounds_memo(walk, arena_bytes, genes, pinned)
    return cooled(walk, Placed(r.decisions, r.offsets, r.sizes, r.capacity, r.rounds), r.first, arena_bytes,
                  r.inputs, judge)


_LAST_ROUNDS: list = []   # [(weakref to the GraphIndex, schedule, arena bytes, Rounds, walk.end_kept)]


def rounds_memo(walk, arena_bytes: int, genes, pinned) -> Rounds:
    """rounds, remembered for the plain genome (the no-search plan's) on one schedule and arena size: the
    feasibility check (arena_fits) and the plan that follows make the same decisions on the same schedule
    (two walks and two placements, ~5 CPU s at 10^5 ops). The rounds do not depend on op times (only
    cooling does), and walks are deterministic, so a remembered result is the result. Read-only to callers."""
    if pinned or not genes.is_plain():
        return rounds(walk, arena_bytes, genes, pinned)
    if _LAST_ROUNDS:
        ref, sched, size, hit, end_kept = _LAST_ROUNDS[0]
        if ref() is walk.gi and size == arena_bytes and np.array_equal(sched, walk.sched):
            walk.end_kept = list(end_kept)
            # the caller's own genes (plain genes differ only in `partly`, which cooling reads from them): the
            # remembered ones made a plain genome's time depend on whether a partly one was timed first
            return hit._replace(inputs=hit.inputs._replace(genes=genes))
    _LAST_ROUNDS.clear()          # (a failed decision raises before it is kept: it is cheap to fail again)
    hit = rounds(walk, arena_bytes, genes, pinned)
    _LAST_ROUNDS.append((weakref.ref(walk.gi), np.asarray(walk.sched, dtype=np.int64), arena_bytes, hit,
                         list(walk.end_kept)))
    return hit


def forget_rounds() -> None:
    """Drop the remembered rounds (plan_arena: the feasibility check's decisions are used, or not)."""
    _LAST_ROUNDS.clear()


def rounds(walk, arena_bytes: int, genes, pinned=()) -> Rounds:
    """decide_and_place before cooling: the first placement that fits, or PlanError when no round fits."""
    a = walk.gi.alignment
    floor = walk.floor()
    room = arena_bytes
    sched = np.asarray(walk.sched, dtype=np.int64)
    capacity = int(room * (1.0 - genes.headroom)) // a * a
    capacity = max(capacity, min(floor, room))
    bias0 = genes.bias.tolist()
    tried = []
    n_pairs = None                              # at most this many kept pairs (None: what the capacity affords)
    for rnd in range(tuning.MAX_ROUNDS + 1):
        last_try = rnd == tuning.MAX_ROUNDS or capacity < floor
        if last_try:
            if floor in tried or floor > room:
                break
            capacity = floor                    # last try: nothing but the largest working set planned
        tried.append(capacity)
        # the pairs the capacity affords (fewer when fragmentation lowered it): "keep 1" keeps all it can
        pairs = choose_pairs(walk.gi, sched, capacity, genes.keep, facts_of(walk))
        if n_pairs is not None:
            pairs = pairs[:n_pairs]
        inputs = WalkInputs(pairs_last(bias0, pairs), pinned, pairs, genes)
        d = inputs.run(walk, capacity)
        first = floored_firsts(d)
        sizes = [walk.size[t] for t in d.stay_t]
        # the sweep fragments near the floor; greedy by size packs tighter (and costs more); on small
        # instances it is cheap, so it is always tried there
        offsets, need = place_with_pairs(
            d, first, d.stay_last, sizes, arena_bytes,
            lambda over, c=capacity, lt=last_try, m=len(sizes):
                lt or c - over < floor or m <= tuning.BY_SIZE_ALWAYS_STAYS)
        if need <= arena_bytes:
            return Rounds(d, first, sizes, offsets, capacity, rnd + 1, inputs)
        if 0 < len(pairs) <= tuning.PAIR_BACKOFF_MAX and not last_try:
            # kept pairs' zones fragment the arena: first keep one pair fewer (the last used goes) at the same
            # capacity; lowering the capacity by the overflow of a placement with zones loses them all. Only
            # for a few pairs: on BERT-large (hundreds) halving them tripled the planning time for the same plan
            n_pairs = len(pairs) - 1
            continue
        over = need - arena_bytes
        capacity = (capacity - max(over, capacity // 64)) // a * a
    if floor <= room:
        return _just_in_time(walk, arena_bytes, genes, pinned, sched, floor, inputs.bias)
    raise PlanError(f"no arena placement fits {arena_bytes} bytes (fragmentation); raise the limit")


def _just_in_time(walk, arena_bytes: int, genes, pinned, sched, floor: int, bias) -> Rounds:
    """The last resort, at the floor: every swap-in just in time (a prefetch spans stays it need not)."""
    inputs = WalkInputs(bias, pinned, choose_pairs(walk.gi, sched, floor, genes.keep, facts_of(walk)),
                        genes)
    d = inputs.run(walk, floor, window=1)
    first = floored_firsts(d)
    sizes = [walk.size[t] for t in d.stay_t]
    offsets, need = place_with_pairs(d, first, d.stay_last, sizes, arena_bytes, lambda over: True)
    if need <= arena_bytes:
        return Rounds(d, first, sizes, offsets, floor, tuning.MAX_ROUNDS + 2, inputs)
    raise PlanError(f"no arena placement fits {arena_bytes} bytes (fragmentation); raise the limit")
