"""The size-class genome's polish (polish_classes.py): first-improvement moves over CLS/CNT neighbours."""
from __future__ import annotations

import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.feasibility import min_feasible_limit
from tvm_swap.planner.swapadvisor.encoding import AllocationSpace
from tvm_swap.planner.swapadvisor.ga import Evaluator
from tvm_swap.planner.swapadvisor.polish import PolishTimes
from tvm_swap.planner.swapadvisor.polish_classes import neighbours, polish_classes
from tvm_swap.testing import random_op_times, random_training_graph

from tests.planner.swapadvisor.test_polish_batches import FakePool  # the polish's pool, timing in this process

DEV = get_device("v100-16gb")


def setup(seed, frac):
    g = random_training_graph(seed, n_layers=6 + seed % 3)
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    limit = int(lo + frac * (hi - lo))
    ev = Evaluator(g, random_op_times(g, seed, jitter=0.9), DEV, limit, 256, pool="arena", recompute=True)
    return ev, AllocationSpace(ev.gi, limit), np.asarray(ev.gi.default_schedule())


def ref_climb(ev, space, schedule, alloc, t0, max_evals):
    """The polish one at a time, written out: each neighbour of the best in order, the first faster one wins."""
    best, best_t, n, seen = alloc, t0, 0, {alloc.key()}
    while n < max_evals:
        moved = False
        for b in neighbours(space, best):
            if b.key() in seen or n >= max_evals:
                continue
            seen.add(b.key())
            n += 1
            t = ev.time_of(schedule, b)
            if t < best_t:
                best, best_t, moved = b, t, True
                break
        if not moved:
            break
    return best, best_t, n


def test_neighbours_fit_the_budget():
    ev, space, _ = setup(1, 0.2)
    for a in (space.single_class(), space.minimal_pool(), space.geometric(2.0)):
        for b in neighbours(space, a):
            assert space.pool_bytes(b) <= space.budget


@pytest.mark.parametrize("seed,frac", [(0, 0.15), (1, 0.25), (2, 0.2)])
def test_polish_is_never_slower_and_its_time_is_the_genomes(seed, frac):
    ev, space, schedule = setup(seed, frac)
    for start in (space.single_class(), space.minimal_pool()):
        t0 = ev.time_of(schedule, start)
        for width in (1, 3):
            ev.memo.clear()
            pool = FakePool(ev, width)
            got, t, n = polish_classes(space, schedule, start, t0, 40, None, PolishTimes(ev, pool))
            assert t <= t0 and n <= 40
            assert t == ev.time_of(schedule, got)          # what the polish reports is the genome's time
            assert max(pool.batches, default=0) <= width
            # batched on the workers or one at a time, the same walk
            assert (got.key(), t, n) == (lambda r: (r[0].key(), r[1], r[2]))(
                ref_climb(ev, space, schedule, start, t0, 40))


def test_polish_moves_a_pool_the_search_left_slower():
    """Somewhere among these cases a neighbour is faster than the single-class pool (the size-class search's
    no-search genome): the polish finds one (the planner made no such move before polish_classes)."""
    moved = 0
    for seed in range(3):
        ev, space, schedule = setup(seed, 0.2)
        start = space.single_class()
        t0 = ev.time_of(schedule, start)
        _, t, _ = polish_classes(space, schedule, start, t0, 30, None, PolishTimes(ev))
        moved += t < t0
    assert moved >= 1


def test_other_genomes_and_no_budget_are_left_as_they_are():
    ev, space, schedule = setup(0, 0.2)
    genes = ev.space.zero()
    assert polish_classes(space, schedule, genes, 1.0, 10, None, PolishTimes(ev)) == (genes, 1.0, 0)
    a = space.single_class()
    assert polish_classes(space, schedule, a, 1.0, 0, None, PolishTimes(ev)) == (a, 1.0, 0)
