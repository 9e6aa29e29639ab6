"""Arena planning leaves no reference cycles: plan_graph and the search pause the cyclic GC (gc_pause.py, ga.py),
so whatever a walk leaves in a cycle stays until the pause ends (each walk's per-tensor lists and heaps: hundreds
of MB at 10^5 ops, and a GA worker, whose GC stays off, kept them for good)."""
import gc

import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.errors import PlanError
from tvm_swap.planner.api import resolve_op_time
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.graphindex import GraphIndex
from tvm_swap.planner.swapadvisor.arena import (ArenaGenes, arena_min_limit, plan_arena, recompute_candidates,
                                                working_set_floor)
from tvm_swap.planner.swapadvisor.arena.walk import ArenaWalk
from tvm_swap.testing import random_training_graph

DEV = get_device("v100-16gb")


def _unreachable_after(f) -> int:
    """Objects the cyclic GC finds unreachable after f() (run once before, so first-use caches are not counted)."""
    f()
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        f()
        return gc.collect()
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize("seed", [1, 6, 8])
@pytest.mark.parametrize("recompute", [False, True])
def test_an_arena_plan_leaves_no_cycles(seed, recompute):
    g = random_training_graph(seed)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    times = resolve_op_time(g, DEV, None)
    genes = None
    if recompute:
        genes = ArenaGenes(0.0, np.zeros(gi.n_tensors, dtype=np.int64), recompute=recompute_candidates(gi))
    # the lowest limit from the min up whose plan evicts (and, with recompute genes, rebuilds): every path of
    # the walk runs
    for limit in np.linspace(arena_min_limit(gi), noswap_peak(g, alignment=256), 8).astype(np.int64).tolist():
        stats = plan_arena(gi, gi.default_schedule(), limit, genes, times, DEV).stats
        if stats["evictions"] > 0 and (stats["recomputes"] > 0) == recompute:
            break
    else:
        raise AssertionError("no limit evicts (and rebuilds): the test would show nothing")
    assert _unreachable_after(lambda: plan_arena(gi, gi.default_schedule(), limit, genes, times, DEV)) == 0


def test_a_walk_that_fails_leaves_no_cycles():
    g = random_training_graph(3)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    walk = ArenaWalk(gi, gi.default_schedule())
    bias = [0] * gi.n_tensors
    capacity = working_set_floor(gi) // 2

    def fail():
        with pytest.raises(PlanError):
            walk.run(capacity, bias)

    assert _unreachable_after(fail) == 0
