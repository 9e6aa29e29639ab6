"""The wrap index (planner/wrap_keep.py): only the updated params made last and read first stay on the device
across the iteration boundary, an evicted one is copied out at the start instead of its update at the end; its
plans verify, the GA's scorer gives their exact time, and the size-class polish reaches it (wrap_move)."""
import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.feasibility import minimal_pool
from tvm_swap.planner.graphindex import ROLE_KEEP_NEW, ROLE_TO_HOST, GraphIndex
from tvm_swap.planner.simulator import pack_actions, simulate
from tvm_swap.planner.swapadvisor.arena.arena_plan import plan_arena
from tvm_swap.planner.swapadvisor.encoding import (Allocation, AllocationSpace, WrapAllocation,
                                                   WrapAllocationSpace)
from tvm_swap.planner.swapadvisor.ga import Evaluator
from tvm_swap.planner.swapadvisor.polish_classes import neighbours, wrap_move
from tvm_swap.planner.swapadvisor.swapplan import SwapPlanScorer, plan_swaps
from tvm_swap.planner.wrap_keep import wrap_index, wrap_pairs
from tvm_swap.testing import random_op_times, random_topological_order, random_training_graph
from tvm_swap.verify import verify_plan

DEV = get_device("v100-16gb")


def _graph(seed):
    return random_training_graph(seed, n_layers=6, momentum=seed % 2 == 0)


def _names(g, pairs):
    return sorted((g.tensors[a].name, g.tensors[b].name) for a, b in pairs)


def _limits(g):
    gi = GraphIndex.build(g, keep_updated=False)
    lo = minimal_pool(gi).limit
    full = int(gi.size[gi.used].sum()) + gi.workspace
    return [lo, (lo + full) // 2]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_only_the_update_made_last_and_read_first_is_kept(seed):
    # the first layer's weight is read by the first op and updated by the last: the one pair kept
    g = _graph(seed)
    assert _names(g, wrap_pairs(GraphIndex.build(g, keep_updated=True))) == [("W1", "W1_new")]
    gi = wrap_index(g)
    plain = GraphIndex.of(g, keep_updated=False)
    assert gi.early_out and gi.keep_updated
    kept = np.flatnonzero(gi.role == ROLE_KEEP_NEW).tolist()
    assert [g.tensors[t].name for t in kept] == ["W1_new"]
    for new in g.updates:
        if g.tensors[new].name != "W1_new":
            assert gi.role[new] == plain.role[new] == ROLE_TO_HOST
    assert wrap_index(g) is gi                      # cached with the graph


def _wrap_plans(seed):
    """(graph, limit, plan) of every wrap-index plan of the size-class seeds at two limits."""
    g = _graph(seed)
    gi = wrap_index(g)
    for limit in _limits(g):
        space = WrapAllocationSpace(gi, limit)
        for alloc in space.seeds():
            sched = gi.default_schedule()
            yield g, limit, plan_swaps(gi, space, sched, alloc).to_plan(g, "t", limit, DEV)


def test_an_evicted_wrap_param_is_copied_out_at_the_start_and_its_update_stays():
    # before the early copy-out, W1 read back from the host needed W1_new copied out at the end of the iteration
    # (after the last kernel: the BRNN's 0.36 s tail); now W1's own value goes out before the first kernel
    checked = 0
    for seed in range(6):
        for g, limit, plan in _wrap_plans(seed):
            assert verify_plan(g, plan, limit) == []
            w1 = next(t for t in g.updates.values() if g.tensors[t].name == "W1")
            w1_new = next(n for n, o in g.updates.items() if o == w1)
            if w1 not in {t for t, _ in plan.initial_residents}:
                continue
            kinds = [a.kind.value for a in plan.actions]
            first = kinds.index("compute")
            outs = [k for k, a in enumerate(plan.actions) if a.kind.value == "swap_out" and a.tensor == w1]
            back = any(a.kind.value == "swap_in" and a.tensor == w1 for a in plan.actions)
            assert not any(a.kind.value == "swap_out" and a.tensor == w1_new for a in plan.actions)
            if back:
                assert outs and outs[0] < first
                checked += 1
            else:
                assert not outs
    assert checked > 0


def test_the_scorer_gives_the_wrap_plans_exact_time():
    for seed in range(4):
        g = _graph(seed)
        gi = wrap_index(g)
        ot = random_op_times(g, seed)
        sched = np.array(random_topological_order(g, seed))
        for limit in _limits(g):
            space = WrapAllocationSpace(gi, limit)
            scorer = SwapPlanScorer(gi, space, ot, DEV)
            for alloc in space.seeds():
                built = plan_swaps(gi, space, sched, alloc)
                a, b = pack_actions(g, built.actions, ot), scorer.packed(sched, alloc)
                assert np.array_equal(a.dep_indptr, b.dep_indptr) and np.array_equal(a.dep_indices, b.dep_indices)
                assert scorer.time_of(sched, alloc) == simulate(g, built.actions, ot, DEV).time_s


def test_the_polish_moves_a_plain_pool_onto_the_wrap_index_and_the_arena_plans_it():
    for seed in range(4):
        g = _graph(seed)
        t = random_op_times(g, seed)
        limit = int(0.7 * noswap_peak(g))
        ev = Evaluator(g, t, DEV, limit, 256, pool="arena", recompute=False)
        space = AllocationSpace(ev.gi, limit)
        plain = space.minimal_pool()
        (wrapped,) = wrap_move(space, plain)
        assert type(wrapped) is WrapAllocation and wrapped.key() != plain.key()
        assert np.array_equal(wrapped.cls, plain.cls) and np.array_equal(wrapped.cnt, plain.cnt)
        assert [type(a) for a in wrap_move(space, wrapped)] == [Allocation]
        assert neighbours(space, plain)[-1].key() == wrapped.key()     # last: taken at a local optimum only
        assert {type(a) for a in neighbours(space, wrapped)} == {Allocation, WrapAllocation}
        sched = ev.gi.default_schedule()
        ap = plan_arena(ev.gi, sched, limit, wrapped, t, DEV)
        plan = ap.to_plan(g, "t", limit, DEV)
        assert ap.stats["wrap"] and verify_plan(g, plan, limit) == []
        assert ev.time_of(sched, wrapped) == simulate(g, plan.actions, t, DEV).time_s


def test_no_wrap_move_where_updated_params_may_not_stay(monkeypatch):
    # the planner option keep_updated=False (the size-class island's space is marked), or the rule off
    from tvm_swap.planner import graphindex
    from tvm_swap.planner.swapadvisor.ga import GASettings
    from tvm_swap.planner.swapadvisor.islands import size_class_island

    g = _graph(0)
    t = random_op_times(g, 0)
    limit = int(0.7 * noswap_peak(g))
    ev = Evaluator(g, t, DEV, limit, 256, pool="arena", recompute=False)
    isl = size_class_island(g, t, DEV, limit, 256, 0, GASettings(population=4), ev, keep_updated=False)
    plain = isl.space.minimal_pool()
    assert wrap_move(isl.space, plain) == []
    assert not any(type(a) is WrapAllocation for a in neighbours(isl.space, plain))
    space = AllocationSpace(ev.gi, limit)
    assert [type(a) for a in wrap_move(space, plain)] == [WrapAllocation]
    monkeypatch.setattr(graphindex, "KEEP_UPDATED", False)
    assert wrap_move(space, plain) == []


def test_under_a_budget_the_plain_rival_island_may_take_the_wrap_move():
    from tvm_swap.planner.swapadvisor.ga import GASettings
    from tvm_swap.planner.swapadvisor.islands import size_class_islands

    g = _graph(0)
    t = random_op_times(g, 0)
    limit = int(0.7 * noswap_peak(g))
    ev = Evaluator(g, t, DEV, limit, 256, pool="arena", recompute=False)
    s = GASettings(population=4)
    rivals = size_class_islands(g, t, DEV, limit, 256, 0, s, ev, choose_now=False)
    plain = next(isl for isl in rivals if type(isl.space) is AllocationSpace)
    assert [type(a) for a in wrap_move(plain.space, plain.space.minimal_pool())] == [WrapAllocation]
    forced = size_class_islands(g, t, DEV, limit, 256, 0, s, ev, keep_updated=False, choose_now=False)
    assert [wrap_move(isl.space, isl.space.minimal_pool()) for isl in forced] == [[]]
