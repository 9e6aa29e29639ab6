"""The compiled arena pack (packed_jit.pack_arena) gives exactly the arrays of the numpy one it replaced
(packed_builder.pack_numpy, kept as the reference): same kinds, work and deps, so GA times and plans did not
change. Decisions of random swap and recompute genomes and schedules, from the min limit up (kept pairs, splits,
rebuilds, in-place outputs, drops before the first op), and the stays' byte ranges as placed."""
import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.errors import PlanError
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.graphindex import GraphIndex
from tvm_swap.planner.swapadvisor.arena import ArenaSpace, arena_min_limit
from tvm_swap.planner.swapadvisor.arena.decide import decide_arena
from tvm_swap.planner.swapadvisor.packed_builder import pack_decisions, pack_numpy
from tvm_swap.planner.swapadvisor.packed_jit import pack_arena
from tvm_swap.testing import random_dag, random_op_times, random_topological_order, random_training_graph

DEV = get_device("v100-16gb")


def _same(a, b) -> None:
    for f in ("kind", "work", "dep_indptr", "dep_indices"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f


@pytest.mark.parametrize("seed", range(10))
def test_pack_arena_is_the_numpy_pack(seed):
    g = random_training_graph(seed, n_layers=3 + seed % 5, momentum=bool(seed % 3)) if seed % 3 else \
        random_dag(seed, n_ops=10 + 6 * seed)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    ot = random_op_times(g, seed)
    nbytes = g.tensor_bytes().astype(np.float64)
    lo = arena_min_limit(gi)
    top = max(lo, noswap_peak(g))
    rng = np.random.default_rng(seed)
    compared = 0
    for lim in (lo, (2 * lo + top) // 3, (lo + 2 * top) // 3, top):
        space = ArenaSpace(gi, lim, recompute=True, op_time=ot, device=DEV)
        for k in range(6):
            sched = np.asarray(random_topological_order(g, seed * 10 + k) if k % 2 else gi.default_schedule())
            genes = space.random(rng) if k else space.zero(keep=1.0)
            if k == 4:
                genes.split = 0.4
            try:
                walk, d, offsets, sizes, _, _ = decide_arena(gi, sched, lim, genes, ot, DEV)
            except PlanError:
                continue
            args = (walk.n, sched, d.out_stays, d.swap_outs, d.drops, d.swap_ins, gi.op_ptr, gi.op_tensors,
                    gi.op_nin, ot, nbytes)
            ref = pack_numpy(*args, ranges=(offsets, sizes), recomputes=d.recomputes)
            _same(pack_arena(*args, (offsets, sizes), d.recomputes), ref)
            _same(pack_decisions(*args, ranges=(offsets, sizes), recomputes=d.recomputes), ref)
            compared += 1
    assert compared >= 10


def test_pack_arena_refuses_outputs_that_do_not_match():
    """As the numpy pack: output stays that do not match the ops' outputs are a ValueError, not a crash."""
    g = random_dag(0, n_ops=12)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    ot = random_op_times(g, 0)
    walk, d, offsets, sizes, _, _ = decide_arena(gi, gi.default_schedule(), noswap_peak(g), None, ot, DEV)
    short = [list(objs) for objs in d.out_stays]
    short[-1] = short[-1][:-1]
    args = (walk.n, gi.default_schedule(), short, d.swap_outs, d.drops, d.swap_ins, gi.op_ptr, gi.op_tensors,
            gi.op_nin, ot, g.tensor_bytes().astype(np.float64))
    for pack in (pack_numpy, pack_decisions):
        with pytest.raises(ValueError, match="output objects"):
            pack(*args, ranges=(offsets, sizes), recomputes=d.recomputes)
