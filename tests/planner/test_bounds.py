"""Bounds: hand-computed examples, and soundness against valid plans on random graphs."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_swap.cost.devices import DeviceSpec, get_device
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.planner.bounds import (ideal_time, lower_bound, lower_bound_detail, must_move_bytes,
                                     noswap_peak, noswap_profile)
from tvm_swap.planner.simulator import simulate
from tvm_swap.testing import (random_dag, random_op_times, random_topological_order,
                              random_training_graph, simple_plan_for)
from tvm_swap.verify import verify_plan

LINK = DeviceSpec("test", 1, 1, 1, h2d_bandwidth=10.0, d2h_bandwidth=5.0, duplex_bandwidth=12.0)
A = 1024


def graph_of(tensors, ops, outputs=(), updates=None):
    ts = [TensorInfo(i, n, b, (1,), "float32", k) for i, (n, b, k) in enumerate(tensors)]
    os_ = [OpInfo(i, f"op{i}", "k", tuple(ins), tuple(outs), 0.0, ws) for i, (ins, outs, ws) in enumerate(ops)]
    g = DataflowGraph("g", ts, os_, list(outputs), dict(updates or {}))
    g.validate()
    return g


def test_ideal_time_is_the_sum_of_compute():
    g = random_dag(0, n_ops=5)
    assert ideal_time(g, [1.0, 2.0, 0.5, 0.25, 0.25]) == 4.0


def test_unlimited_memory_bound_is_compute_or_io():
    # x (input, 100 B) -> a -> y (output, 50 B)
    g = graph_of([("x", 100, "input"), ("a", 10, "activation"), ("y", 50, "output")],
                 [([0], [1], 0), ([1], [2], 0)], outputs=[2])
    d = lower_bound_detail(g, [1.0, 2.0], LINK, mem_limit=10**9)
    assert d["in_bytes"] == 100 and d["out_bytes"] == 50
    assert d["h2d_s"] == pytest.approx(10.0) and d["d2h_s"] == pytest.approx(10.0)
    assert d["link_s"] == pytest.approx(150 / 12.0)
    assert lower_bound(g, [1.0, 2.0], LINK, 10**9) == pytest.approx(150 / 12.0)
    assert lower_bound(g, [20.0, 2.0], LINK, 10**9) == pytest.approx(22.0)


def test_params_that_do_not_fit_must_cross():
    # two params of A bytes read by one op with a working set of 2A (input x and output y)
    g = graph_of([("p", A, "param"), ("q", A, "param"), ("x", A, "input"), ("y", A, "output")],
                 [([0, 1, 2], [3], 0)], outputs=[3])
    # room for the working set and one param: the other crosses in
    mv = must_move_bytes(g, mem_limit=3 * A)
    assert mv["persistent_in"] == A and mv["inputs_in"] == A and mv["outputs_out"] == A
    # room for both: nothing persistent needs to move
    assert must_move_bytes(g, mem_limit=4 * A)["persistent_in"] == 0
    # half a param of room: a fraction can be "kept" by the relaxation, never more
    assert must_move_bytes(g, mem_limit=2 * A + A // 2)["persistent_in"] == pytest.approx(1.5 * A)


def test_workspace_takes_room_from_residents():
    g = graph_of([("p", A, "param"), ("x", A, "input"), ("y", A, "output")],
                 [([0, 1], [2], A)], outputs=[2])
    assert must_move_bytes(g, mem_limit=4 * A)["persistent_in"] == 0
    assert must_move_bytes(g, mem_limit=3 * A)["persistent_in"] == A


def test_alignment_counts_against_the_limit():
    g = graph_of([("p", 10, "param"), ("x", 10, "input"), ("y", 10, "output")], [([0, 1], [2], 0)], outputs=[2])
    # each tensor takes 256 bytes aligned: 2 x 256 of working set leaves 100 of p's 256 bytes,
    # so the relaxation keeps at most 100/256 of p's 10 bytes
    assert must_move_bytes(g, mem_limit=612, alignment=256)["persistent_in"] == pytest.approx(10 - 10 * 100 / 256)
    assert must_move_bytes(g, mem_limit=768, alignment=256)["persistent_in"] == 0


def test_updated_params_cross_out_when_they_cannot_stay():
    # op0: p_new = sgd(p, x); the update replaces p
    g = graph_of([("p", A, "param"), ("x", A, "input"), ("p_new", A, "output")],
                 [([0, 1], [2], 0)], outputs=[2], updates={2: 0})
    roomy = must_move_bytes(g, mem_limit=10 * A)
    # periodicity is per size class: p_new stays in another object of p's class, nothing must move
    assert roomy["updates_out"] == 0 and roomy["persistent_in"] == 0
    tight = must_move_bytes(g, mem_limit=A // 2)
    assert tight["updates_out"] == pytest.approx(A / 2) and tight["persistent_in"] == A


def test_update_whose_producer_does_not_read_the_param_is_not_forced_to_move():
    # p is read by op0 only; op1 makes p_new without reading p: p may leave a gap, so it is free
    g = graph_of([("p", A, "param"), ("x", A, "input"), ("a", A, "activation"), ("p_new", A, "output")],
                 [([0, 1], [2], 0), ([2], [3], 0)], outputs=[3], updates={3: 0})
    assert must_move_bytes(g, mem_limit=2 * A)["persistent_in"] == 0


def test_noswap_peak_by_hand():
    # x -> a -> c -> d (output); a dies after op1; workspace A on op1
    g = graph_of([("x", A, "input"), ("a", A, "activation"), ("c", A, "activation"), ("d", A, "output")],
                 [([0], [1], 0), ([1], [2], A), ([2], [3], 0)], outputs=[3])
    assert noswap_profile(g).tolist() == [2 * A, 4 * A, 3 * A]
    assert noswap_peak(g) == 4 * A
    assert noswap_peak(g, alignment=4096) == 3 * 4096 + A   # x, a, c and the workspace during op1


def brute_force_profile(g, order, alignment):
    al = lambda b: max(alignment, -(-b // alignment) * alignment)  # noqa: E731
    prod = g.producer()
    pos = {o: i for i, o in enumerate(order)}
    keep = set(g.outputs) | set(g.updates)
    used = set(g.used_tensors())
    out = []
    for i, o in enumerate(order):
        live = 0
        for t in used:
            if prod[t] < 0:
                live += al(g.tensors[t].nbytes)
                continue
            born = pos[prod[t]]
            readers = [pos[c] for c in g.consumers()[t]]
            dies = len(order) - 1 if t in keep else max([born] + readers)
            if born <= i <= dies:
                live += al(g.tensors[t].nbytes)
        out.append(live + g.ops[o].workspace)
    return out


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from([64, 256, 4096]))
def test_noswap_profile_matches_brute_force(seed, alignment):
    g = random_dag(seed, n_ops=15, update_prob=0.5, workspace_prob=0.3)
    order = random_topological_order(g, seed)
    assert noswap_profile(g, order, alignment).tolist() == brute_force_profile(g, order, alignment)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), training=st.booleans(), reuse=st.booleans(), swap=st.booleans(),
       keep=st.booleans())
def test_lower_bound_is_sound_for_valid_plans(seed, training, reuse, swap, keep):
    g = (random_training_graph(seed, n_layers=1 + seed % 6, momentum=seed % 2 == 0) if training
         else random_dag(seed, n_ops=20, update_prob=0.5, workspace_prob=0.2))
    plan = simple_plan_for(g, random_topological_order(g, seed), reuse=reuse, swap_activations=swap,
                           keep_params=keep)
    assert verify_plan(g, plan) == []
    t = random_op_times(g, seed)
    dev = get_device("v100-16gb")
    limit = plan.pool.total_bytes()
    d = lower_bound_detail(g, t, dev, limit)
    stats = plan.swap_stats(g.tensor_bytes())
    assert stats["swap_in_bytes"] >= d["in_bytes"] - 1e-6
    assert stats["swap_out_bytes"] >= d["out_bytes"] - 1e-6
    sim = simulate(g, plan, t, dev)
    assert sim.time_s >= d["lower_bound_s"] * (1 - 1e-12)
    assert sim.time_s >= ideal_time(g, t) * (1 - 1e-12)


def test_keeping_params_resident_is_what_the_bound_allows():
    # with the pool of a plan that keeps every param resident, the bound asks for no param traffic
    g = random_dag(11, n_ops=30, n_params=5, update_prob=0.0)
    plan = simple_plan_for(g, keep_params=True)
    assert plan.initial_residents
    mv = must_move_bytes(g, plan.pool.total_bytes())
    assert mv["persistent_in"] == 0
    # and at a tenth of the no-swap peak, params must move
    assert must_move_bytes(g, noswap_peak(g) // 10)["persistent_in"] > 0
    assert np.isfinite(lower_bound(g, random_op_times(g, 0), get_device("v100-16gb"), noswap_peak(g) // 10))


def test_the_update_bound_is_attained_by_a_valid_plan():
    """p stays on the device across iterations with no copy: sgd writes p_new into another object of
    p's class, which plays p's object in the next iteration."""
    from tvm_swap.plan import Action, Plan, Pool

    g = graph_of([("p", A, "param"), ("x", A, "input"), ("p_new", A, "output")],
                 [([0, 1], [2], 0)], outputs=[2], updates={2: 0})
    acts = [Action("swap_in", tensor=1, obj=2),
            Action("compute", op=0, deps=(0,), out_objs=(1,)),
            Action("drop", tensor=0, obj=0, deps=(1,)), Action("drop", tensor=1, obj=2, deps=(1,))]
    plan = Plan("g", g.fingerprint(), "hand", 3 * A, {}, [0], Pool([A], [3]), [0, 0, 0], [(0, 0)], acts)
    assert verify_plan(g, plan) == []
    mv = must_move_bytes(g, 3 * A)
    stats = plan.swap_stats(g.tensor_bytes())
    assert (stats["swap_in_bytes"], stats["swap_out_bytes"]) == (mv["in_bytes"], mv["out_bytes"]) == (A, 0)
