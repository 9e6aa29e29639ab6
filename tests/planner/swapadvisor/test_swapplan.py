"""The swap planner: its plans pass the independent verifier at any feasible limit, evict by furthest next
use, repeat every iteration, and the GA's fast scorer gives exactly the final plan's time."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvm_swap.cost.devices import get_device
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.planner.bounds import lower_bound
from tvm_swap.planner.swapadvisor.encoding import Allocation, AllocationSpace
from tvm_swap.planner.feasibility import minimal_pool
from tvm_swap.planner.graphindex import GraphIndex
from tvm_swap.planner.simulator import pack_actions, simulate
from tvm_swap.planner.swapadvisor.swapplan import SwapPlanScorer, plan_swaps
from tvm_swap.testing import random_dag, random_op_times, random_topological_order, random_training_graph
from tvm_swap.verify import verify_plan

DEV = get_device("v100-16gb")
S = 1 << 20


def plan_of(g, limit, alloc_name="minimal_pool", schedule=None, keep_updated=True):
    gi = GraphIndex.build(g, keep_updated=keep_updated)
    space = AllocationSpace(gi, limit)
    alloc = getattr(space, alloc_name)()
    sched = gi.default_schedule() if schedule is None else np.asarray(schedule)
    sp = plan_swaps(gi, space, sched, alloc)
    return sp.to_plan(g, "swapadvisor-test", limit, DEV), gi, space


def limits(g):
    gi = GraphIndex.build(g)
    full = int(gi.size[gi.used].sum()) + gi.workspace
    lo = minimal_pool(gi).limit
    return {"100%": full, "50%": max(lo, full // 2), "min": lo}


def graphs():
    out = []
    for seed in range(4):
        out.append(random_dag(seed, n_ops=30, update_prob=0.5, workspace_prob=0.2))
        out.append(random_dag(seed + 50, n_ops=30))                      # params never updated: kept resident
        out.append(random_training_graph(seed, n_layers=6, momentum=seed % 2 == 0))
    return out


@pytest.mark.parametrize("which", ["100%", "50%", "min"])
def test_plans_verify_on_random_graphs(which):
    for g in graphs():
        limit = limits(g)[which]
        for alloc in ("minimal_pool", "single_class", "exact_sizes", "geometric"):
            plan, _, _ = plan_of(g, limit, alloc)
            assert verify_plan(g, plan, limit) == [], (g.name, which, alloc)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["dag", "kept", "train"]), frac=st.floats(0, 1),
       order_seed=st.integers(0, 100))
def test_plans_verify_for_random_schedules_and_limits(seed, kind, frac, order_seed):
    if kind == "train":
        g = random_training_graph(seed, n_layers=4, momentum=True, skip_prob=0.5)
    else:
        g = random_dag(seed, n_ops=20, update_prob=0.5 if kind == "dag" else 0.0, locality=10)
    lim = limits(g)
    limit = lim["min"] + int((lim["100%"] - lim["min"]) * frac)
    gi = GraphIndex.build(g, keep_updated=True)
    space = AllocationSpace(gi, limit)
    rng = np.random.default_rng(seed)
    sched = np.array(random_topological_order(g, order_seed))
    for alloc in (space.random(rng), space.minimal_pool()):
        plan = plan_swaps(gi, space, sched, alloc).to_plan(g, "t", limit, DEV)
        assert verify_plan(g, plan, limit) == []
        t = simulate(g, plan.actions, random_op_times(g), DEV).time_s
        assert t >= lower_bound(g, random_op_times(g), DEV, limit) * (1 - 1e-9)


def hand_graph():
    """x -> a -> b -> c -> d; then e = f(d, a), f = f(e, b), y = f(f, c). Every tensor is S bytes.

    Before op3 (c -> d) the class holds a (next use op4), b (op5) and c (op3's input)."""
    names = ["x", "a", "b", "c", "d", "e", "f", "y"]
    kinds = ["input"] + ["activation"] * 6 + ["output"]
    tensors = [TensorInfo(i, n, S, (S // 4,), "float32", k) for i, (n, k) in enumerate(zip(names, kinds))]
    ix = {n: i for i, n in enumerate(names)}
    spec = [("x", "a"), ("a", "b"), ("b", "c"), ("c", "d"), ("da", "e"), ("eb", "f"), ("fc", "y")]
    ops = [OpInfo(i, f"op{i}", "k", tuple(ix[c] for c in ins), (ix[out],), 1e9) for i, (ins, out) in enumerate(spec)]
    g = DataflowGraph("hand", tensors, ops, [ix["y"]], {})
    g.validate()
    return g, ix


def test_eviction_picks_the_furthest_next_use():
    g, ix = hand_graph()
    limit = 3 * S                       # one class of 3 objects: op4 touches d, a and e
    gi = GraphIndex.build(g)
    space = AllocationSpace(gi, limit)
    assert space.minimal_pool().cnt.tolist() == [3]
    plan = plan_swaps(gi, space, gi.default_schedule(), space.minimal_pool()).to_plan(g, "t", limit, DEV)
    assert verify_plan(g, plan, limit) == []
    outs = [a.tensor for a in plan.actions if a.kind == "swap_out"]
    # at op3, a (needed at op4) and b (op5) are candidates: b, the furthest, goes first; then c for e
    assert outs[:2] == [ix["b"], ix["c"]]
    assert ix["a"] not in outs
    ins = [a.tensor for a in plan.actions if a.kind == "swap_in"]
    assert ins == [ix["x"], ix["b"], ix["c"]]


def test_swap_in_is_issued_right_after_its_object_frees():
    g, ix = hand_graph()
    limit = 3 * S
    plan, gi, space = plan_of(g, limit)
    acts = plan.actions
    pos = {(a.kind, a.tensor if a.kind != "compute" else a.op): i for i, a in enumerate(acts)}
    # b comes back for op5 into an object that d or a leave after op4 (their last use): the swap-in is
    # issued right after those drops, before op5
    freed = {acts[pos[("drop", ix[t])]].obj for t in "da"}
    i = pos[("swap_in", ix["b"])]
    assert acts[i].obj in freed
    assert max(pos[("drop", ix["d"])], pos[("drop", ix["a"])]) < i < pos[("compute", 5)]
    assert pos[("compute", 4)] < i


def test_no_swapping_when_everything_fits():
    for g in graphs():
        plan, gi, _ = plan_of(g, limits(g)["100%"], "exact_sizes")
        prod = g.producer()
        to_host = set(g.outputs) | set(g.updates)
        outs = [a.tensor for a in plan.actions if a.kind == "swap_out"]
        ins = [a.tensor for a in plan.actions if a.kind == "swap_in"]
        assert set(outs) <= to_host and len(outs) == len(set(outs))
        assert all(prod[t] < 0 for t in ins) and len(ins) == len(set(ins))


def test_kept_params_stay_resident_and_the_plan_repeats():
    g = random_dag(7, n_ops=40, n_params=4, update_prob=0.0)
    kept = {t for t in g.used_tensors() if g.is_persistent(t)}
    assert kept
    plan, _, _ = plan_of(g, limits(g)["100%"], "exact_sizes")
    assert {t for t, _ in plan.initial_residents} == kept
    assert not any(a.kind == "swap_in" and a.tensor in kept for a in plan.actions)
    # replay: the end state is the start state
    state = dict(plan.initial_residents)
    for a in plan.actions:
        if a.kind == "compute":
            state.update(zip(g.ops[a.op].outputs, a.out_objs))
        elif a.kind == "swap_in":
            state[a.tensor] = a.obj
        elif a.kind == "drop":
            del state[a.tensor]
    assert sorted(state.items()) == sorted(plan.initial_residents)


def test_kept_params_under_pressure_still_repeat():
    for seed in range(6):
        g = random_dag(seed, n_ops=60, n_params=6, update_prob=0.0)
        limit = limits(g)["min"]
        plan, _, _ = plan_of(g, limit, "single_class")
        assert verify_plan(g, plan, limit) == []


def test_updated_params_stay_on_the_device_when_everything_fits():
    g = random_training_graph(3, n_layers=5, momentum=True)
    plan, _, _ = plan_of(g, limits(g)["100%"], "exact_sizes")
    assert verify_plan(g, plan) == []
    olds = set(g.updates.values())
    assert {t for t, _ in plan.initial_residents} == {t for t in g.used_tensors() if g.is_persistent(t)}
    assert olds <= {t for t, _ in plan.initial_residents}
    # no param traffic: nothing persistent comes in, no update goes out
    assert not any(a.kind == "swap_in" and g.is_persistent(a.tensor) for a in plan.actions)
    assert not any(a.kind == "swap_out" and a.tensor in g.updates for a in plan.actions)
    # each update ends in another object of its param's class: the runtime must rename objects
    assert plan.next_object_map(g.updates, g.op_outputs()) != list(range(plan.pool.num_objects))


def test_old_rule_swaps_updates_out_and_keeps_objects():
    g = random_training_graph(3, n_layers=5, momentum=True)
    gi = GraphIndex.build(g, keep_updated=False)
    space = AllocationSpace(gi, limits(g)["100%"])
    plan = plan_swaps(gi, space, gi.default_schedule(), space.exact_sizes()).to_plan(g, "t", space.mem_limit, DEV)
    assert verify_plan(g, plan) == []
    assert plan.initial_residents == []
    outs = {a.tensor for a in plan.actions if a.kind == "swap_out"}
    assert set(g.updates) <= outs
    assert plan.next_object_map(g.updates, g.op_outputs()) == list(range(plan.pool.num_objects))


@pytest.mark.parametrize("which", ["50%", "min"])
def test_a_kept_param_read_from_the_host_has_its_update_swapped_out(which):
    # the host copy a swap-in reads must be last iteration's update, so that update goes out every iteration
    checked = 0
    for seed in range(8):
        g = random_training_graph(seed, n_layers=6, momentum=seed % 2 == 0)
        limit = limits(g)[which]
        for alloc in ("minimal_pool", "exact_sizes", "single_class"):
            plan, _, _ = plan_of(g, limit, alloc)
            assert verify_plan(g, plan, limit) == []
            init = {t for t, _ in plan.initial_residents}
            new_of = {old: new for new, old in g.updates.items()}
            ins = {a.tensor for a in plan.actions if a.kind == "swap_in"}
            outs = {a.tensor for a in plan.actions if a.kind == "swap_out"}
            for p in init & ins & set(new_of):
                assert new_of[p] in outs
                checked += 1
            # an update not resident at the end reaches the host
            end_init = init & set(new_of)
            for p, new in new_of.items():
                if p not in end_init:
                    assert new in outs
    assert checked > 0


def test_scorer_matches_the_built_plan_exactly():
    for g in graphs():
        ot = random_op_times(g)
        for which in ("50%", "min"):
            limit = limits(g)[which]
            gi = GraphIndex.build(g, keep_updated=True)
            space = AllocationSpace(gi, limit)
            scorer = SwapPlanScorer(gi, space, ot, DEV)
            sched = np.array(random_topological_order(g, 3))
            for alloc in space.seeds():
                built = plan_swaps(gi, space, sched, alloc)
                a = pack_actions(g, built.actions, ot)
                b = scorer.packed(sched, alloc)
                assert np.array_equal(a.kind, b.kind) and np.array_equal(a.work, b.work)
                assert np.array_equal(a.dep_indptr, b.dep_indptr) and np.array_equal(a.dep_indices, b.dep_indices)
                assert scorer.time_of(sched, alloc) == simulate(g, built.actions, ot, DEV).time_s


def test_more_memory_never_makes_the_default_plan_much_slower():
    g = random_training_graph(2, n_layers=20)
    ot = random_op_times(g)
    lim = limits(g)
    times = []
    for frac in (0.0, 0.3, 0.6, 1.0):
        limit = lim["min"] + int((lim["100%"] - lim["min"]) * frac)
        plan, _, _ = plan_of(g, limit, "exact_sizes")
        times.append(simulate(g, plan.actions, ot, DEV).time_s)
    assert times[-1] <= times[0]
    assert times[-1] <= min(times) * 1.05


def test_allocation_below_need_is_refused_clearly():
    g, _ = hand_graph()
    gi = GraphIndex.build(g)
    space = AllocationSpace(gi, 3 * S)
    from tvm_swap.errors import PlanError

    with pytest.raises(PlanError, match="fewer than op"):
        plan_swaps(gi, space, gi.default_schedule(), Allocation(np.zeros(1, np.int64), np.array([2])))


def test_swapadvisor_keeps_updated_params_when_that_is_faster_and_on_request():
    from tvm_swap.planner.api import plan_graph

    g = random_training_graph(4, n_layers=8, momentum=True)
    ot = random_op_times(g)
    olds = set(g.updates.values())
    kw = dict(op_time=ot, planner="swapadvisor", generations=1, workers=1, pool="size-classes")
    free = plan_graph(g, "100%", **kw)          # plenty of memory: keeping them saves every param copy
    assert olds <= {t for t, _ in free.initial_residents}
    off = plan_graph(g, "100%", keep_updated=False, **kw)
    assert not olds & {t for t, _ in off.initial_residents}
    assert free.predicted["time_s"] <= off.predicted["time_s"]
