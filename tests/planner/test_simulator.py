"""The three-stream simulator: hand-computed cases, and agreement with a slow reference simulation."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_swap.cost.devices import DeviceSpec, get_device
from tvm_swap.errors import PlanError
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.plan import Action
from tvm_swap.planner.simulator import (DROP, KIND_CODE, pack_actions, pack_arrays, simulate,
                                        simulate_packed, simulate_time)
from tvm_swap.testing import random_dag, random_op_times, random_training_graph, simple_plan_for

LINK = DeviceSpec("test", 10**12, 1e12, 1e12, h2d_bandwidth=12e9, d2h_bandwidth=12e9, duplex_bandwidth=20e9)


def tiny_graph(sizes, n_ops):
    """Tensors of the given sizes (all params) and n_ops ops with no edges: enough for the simulator."""
    tensors = [TensorInfo(i, f"t{i}", int(b), (1,), "float32", "param") for i, b in enumerate(sizes)]
    ops = [OpInfo(i, f"op{i}", "k", (), ()) for i in range(n_ops)]
    return DataflowGraph("tiny", tensors, ops)


def C(op, *deps):
    return Action("compute", op=op, deps=tuple(deps))


def OUT(t, *deps):
    return Action("swap_out", tensor=t, obj=0, deps=tuple(deps))


def IN(t, *deps):
    return Action("swap_in", tensor=t, obj=0, deps=tuple(deps))


def DR(t, *deps):
    return Action("drop", tensor=t, obj=0, deps=tuple(deps))


# ---------------------------------------------------------------- hand-computed cases
def test_one_op_takes_its_time():
    g = tiny_graph([], 1)
    r = simulate(g, [C(0)], [1e-3], LINK)
    assert r.time_s == pytest.approx(1e-3)
    assert r.stream_busy_s == pytest.approx({"compute": 1e-3, "d2h": 0.0, "h2d": 0.0})


def test_compute_overlaps_an_independent_swap():
    g = tiny_graph([12e6], 2)
    # swap-in 12 MB at 12 GB/s = 1 ms runs under op0's 2 ms; op1 needs it and op0 (FIFO)
    r = simulate(g, [IN(0), C(0), C(1, 0)], [2e-3, 1e-3], LINK)
    assert r.end[0] == pytest.approx(1e-3)
    assert r.start[2] == pytest.approx(2e-3)
    assert r.time_s == pytest.approx(3e-3)


def test_duplex_link_is_shared_ten_plus_ten():
    g = tiny_graph([10e9, 10e9], 0)
    r = simulate(g, [OUT(0), IN(1)], [], LINK)
    # 12 GB/s each way alone, 20 GB/s both ways: 10 + 10, so 10 GB takes 1 s each
    assert r.end[0] == pytest.approx(1.0)
    assert r.end[1] == pytest.approx(1.0)


def test_rate_rises_when_the_other_direction_stops():
    g = tiny_graph([10e9, 5e9], 0)
    r = simulate(g, [OUT(0), IN(1)], [], LINK)
    assert r.end[1] == pytest.approx(0.5)                  # 5 GB at 10 GB/s
    assert r.end[0] == pytest.approx(0.5 + 5e9 / 12e9)     # the other 5 GB alone at 12 GB/s


def test_rate_drops_when_the_other_direction_starts():
    g = tiny_graph([12e9, 5e9], 1)
    # h2d starts at 0.5 s (after the compute); d2h ran 0.5 s alone (6 GB), then shares
    r = simulate(g, [OUT(0), C(0), IN(1, 1)], [0.5], LINK)
    assert r.start[2] == pytest.approx(0.5)
    assert r.end[2] == pytest.approx(1.0)                  # 5 GB at 10 GB/s
    assert r.end[0] == pytest.approx(1.0 + 1e9 / 12e9)     # 6 - 5 = 1 GB left alone


def test_asymmetric_link_gives_the_slow_side_its_rate():
    dev = DeviceSpec("asym", 1, 1, 1, h2d_bandwidth=12e9, d2h_bandwidth=5e9, duplex_bandwidth=14e9)
    g = tiny_graph([5e9, 9e9], 0)
    r = simulate(g, [OUT(0), IN(1)], [], dev)
    assert r.end[0] == pytest.approx(1.0)                  # d2h keeps 5, h2d gets the other 9
    assert r.end[1] == pytest.approx(1.0)


def test_deps_delay_a_swap_until_the_compute_ends():
    g = tiny_graph([12e6], 1)
    r = simulate(g, [C(0), OUT(0, 0)], [5e-3], LINK)
    assert r.start[1] == pytest.approx(5e-3)
    assert r.time_s == pytest.approx(6e-3)


def test_fifo_head_of_line_blocks_a_ready_copy():
    g = tiny_graph([12e6, 12e6], 1)
    # B has no deps but is behind A on the h2d stream, and A waits for the 5 ms compute
    r = simulate(g, [C(0), IN(0, 0), IN(1)], [5e-3], LINK)
    assert r.start[2] == pytest.approx(6e-3)
    assert r.time_s == pytest.approx(7e-3)


def test_drop_ends_with_its_last_dep_and_gates_a_swap_in():
    g = tiny_graph([12e6, 12e6], 2)
    acts = [C(0), OUT(0, 0), DR(0, 0, 1), IN(1, 2), C(1, 3)]
    r = simulate(g, acts, [1e-3, 1e-3], LINK)
    assert r.end[2] == pytest.approx(2e-3)       # after the 1 ms swap-out that followed op0
    assert r.start[3] == pytest.approx(2e-3)
    assert r.end[4] == pytest.approx(4e-3)


def test_drop_without_deps_ends_at_zero_and_chained_drops_resolve():
    g = tiny_graph([1, 1], 1)
    r = simulate(g, [DR(0), C(0), DR(1, 1), DR(0, 2), C(0, 3)], [1.0], LINK)
    assert r.end[0] == 0.0
    assert r.end[3] == pytest.approx(1.0)
    assert r.time_s == pytest.approx(2.0)


def test_accepts_a_plan_and_a_dict_device():
    g = random_dag(3, n_ops=10)
    plan = simple_plan_for(g)
    t = random_op_times(g, 3)
    a = simulate(g, plan, t, get_device("v100-16gb"))
    b = simulate(g, plan.actions, t, plan.device)
    assert a.time_s == b.time_s > 0


def test_bad_input_is_refused_with_a_reason():
    g = tiny_graph([1], 1)
    with pytest.raises(PlanError, match="earlier"):
        simulate(g, [C(0, 0)], [1.0], LINK)
    with pytest.raises(PlanError, match="op_time"):
        simulate(g, [C(0)], [1.0, 2.0], LINK)
    with pytest.raises(PlanError, match="not in the graph"):
        simulate(g, [IN(5)], [1.0], LINK)
    with pytest.raises(PlanError, match="positive"):
        simulate(g, [C(0)], [1.0], DeviceSpec("z", 1, 1, 1, 0.0, 1.0, 1.0))


# ---------------------------------------------------------------- reference simulation
def reference_simulate(kinds, work, deps, d_solo, h_solo, dup):
    """Plain time-stepping event simulation, written independently of the fast one."""
    n = len(kinds)
    stream_of = {"compute": 0, "swap_out": 1, "swap_in": 2}
    queues = [[i for i in range(n) if stream_of.get(kinds[i]) == s] for s in range(3)]
    head = [0, 0, 0]
    running = [None, None, None]       # [action, remaining work]
    start = [None] * n
    end = [None] * n
    t = 0.0
    d_both = min(d_solo, max(dup / 2, dup - h_solo))
    h_both = min(h_solo, max(dup / 2, dup - d_solo))
    while True:
        changed = True
        while changed:
            changed = False
            for i in range(n):
                if kinds[i] == "drop" and end[i] is None and all(end[d] is not None for d in deps[i]):
                    end[i] = start[i] = max((end[d] for d in deps[i]), default=0.0)
                    changed = True
            for s in range(3):
                if running[s] is None and head[s] < len(queues[s]):
                    i = queues[s][head[s]]
                    if all(end[d] is not None for d in deps[i]):
                        start[i] = t
                        running[s] = [i, work[i]]
                        head[s] += 1
                        changed = True
                        if work[i] == 0:
                            end[i] = t
                            running[s] = None
        if all(r is None for r in running):
            break
        both = running[1] is not None and running[2] is not None
        rate = [1.0, d_both if both else d_solo, h_both if both else h_solo]
        dt = min(r[1] / rate[s] for s, r in enumerate(running) if r is not None)
        t += dt
        for s, r in enumerate(running):
            if r is not None:
                r[1] -= dt * rate[s]
                if r[1] <= 1e-9 * max(1.0, work[r[0]]):
                    end[r[0]] = t
                    running[s] = None
    assert all(e is not None for e in end), "reference stalled"
    return np.array(start), np.array(end)


@st.composite
def random_action_lists(draw):
    """Any kinds and any earlier deps: the simulator must not care whether memory is valid."""
    n = draw(st.integers(1, 25))
    kinds = draw(st.lists(st.sampled_from(["compute", "swap_out", "swap_in", "drop"]), min_size=n, max_size=n))
    work, deps = [], []
    for i, k in enumerate(kinds):
        if k == "compute":
            work.append(draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5])))
        elif k == "drop":
            work.append(0.0)
        else:
            work.append(draw(st.sampled_from([0.0, 6.0, 12.0, 20.0, 31.0])))
        deps.append(sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=3))) if i else []))
    links = draw(st.sampled_from([(12.0, 12.0, 20.0), (12.0, 12.0, 24.0), (5.0, 12.0, 14.0), (10.0, 6.0, 30.0)]))
    return kinds, work, deps, links


@settings(max_examples=300, deadline=None)
@given(random_action_lists())
def test_fast_simulator_agrees_with_reference(case):
    kinds, work, deps, (d_bw, h_bw, dup) = case
    indptr = np.cumsum([0] + [len(d) for d in deps])
    indices = [d for ds in deps for d in ds]
    p = pack_arrays([KIND_CODE[k] for k in kinds], work, indptr, indices)
    dev = DeviceSpec("r", 1, 1, 1, h2d_bandwidth=h_bw, d2h_bandwidth=d_bw, duplex_bandwidth=dup)
    r = simulate_packed(p, dev)
    assert simulate_time(p, dev) == r.time_s
    s_ref, e_ref = reference_simulate(kinds, work, deps, d_bw, h_bw, dup)
    np.testing.assert_allclose(r.end, e_ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(r.start, s_ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_fast_simulator_agrees_with_reference_on_plans(seed):
    g = random_training_graph(seed, n_layers=6, momentum=True)
    plan = simple_plan_for(g)
    t = random_op_times(g, seed)
    dev = get_device("v100-16gb")
    r = simulate(g, plan, t, dev)
    p = r.packed
    deps = [p.dep_indices[p.dep_indptr[i]:p.dep_indptr[i + 1]].tolist() for i in range(p.num_actions)]
    kinds = [a.kind for a in plan.actions]
    _, e_ref = reference_simulate(kinds, p.work.tolist(), deps, dev.d2h_bandwidth, dev.h2d_bandwidth,
                                  dev.duplex_bandwidth)
    np.testing.assert_allclose(r.end, e_ref, rtol=1e-9, atol=1e-12)
    assert (r.end[p.kind != DROP] >= r.start[p.kind != DROP]).all()


def test_packed_fields_match_the_actions():
    g = random_dag(5, n_ops=12)
    plan = simple_plan_for(g)
    t = random_op_times(g, 5)
    p = pack_actions(g, plan, t)
    for i, a in enumerate(plan.actions):
        assert p.kind[i] == KIND_CODE[a.kind]
        assert list(p.dep_indices[p.dep_indptr[i]:p.dep_indptr[i + 1]]) == list(a.deps)
        if a.kind == "compute":
            assert p.work[i] == t[a.op]
        elif a.kind != "drop":
            assert p.work[i] == g.tensors[a.tensor].nbytes


# ---------------------------------------------------------------- memory timeline
def test_memory_timeline_by_hand():
    from tvm_swap.plan import Plan, Pool
    from tvm_swap.planner.timeline import memory_timeline, peak_in_use

    S = 12_000_000  # a multiple of 256: 1 ms on the 12 GB/s link
    kinds = [("x", "input"), ("p", "param"), ("a", "activation"), ("b", "output")]
    tensors = [TensorInfo(i, n, S, (1,), "float32", k) for i, (n, k) in enumerate(kinds)]
    ops = [OpInfo(0, "f", "f", (0,), (2,)), OpInfo(1, "g", "g", (2, 1), (3,))]
    g = DataflowGraph("hand", tensors, ops, outputs=[3])
    acts = [IN(0), Action("compute", op=0, deps=(0,), out_objs=(1,)), DR(0, 1), IN(1, 2),
            Action("compute", op=1, deps=(3,), out_objs=(2,)), Action("drop", tensor=2, obj=1, deps=(4,)),
            DR(1, 4), Action("swap_out", tensor=3, obj=2, deps=(4,)), Action("drop", tensor=3, obj=2, deps=(7,))]
    plan = Plan("hand", g.fingerprint(), "hand", 4 * S, {}, [0, 1], Pool([S], [3], workspace_bytes=256),
                [0] * 4, [], acts)
    sim = simulate(g, plan, [2e-3, 2e-3], LINK)
    tl = memory_timeline(g, plan, sim)
    # x [0,3] ms, a [1,6], p [3,6] (arrives in x's object as x leaves), b [4,7]
    at = lambda key, ms: tl[key][np.searchsorted(tl["time"], ms * 1e-3 * (1 + 1e-12), side="right") - 1]  # noqa: E731
    expect = {0.5: 1, 2.0: 2, 3.5: 2, 5.0: 3, 6.5: 1, 7.5: 0}
    for ms, n in expect.items():
        assert at("bytes", ms) == n * S, ms
    assert tl["peak_bytes"] == 3 * S
    assert {k: int(v.max()) for k, v in tl["by_kind"].items()} == {"input": S, "param": S, "activation": S,
                                                                    "output": S}
    assert peak_in_use(g, plan, sim) == 3 * S + 256
    assert peak_in_use(g, plan, sim, include_workspace=False) == 3 * S


@pytest.mark.parametrize("seed", range(3))
def test_memory_timeline_of_random_plans_stays_in_the_pool(seed):
    from tvm_swap.planner.timeline import memory_timeline
    from tvm_swap.testing import random_topological_order

    g = random_dag(seed, n_ops=25, n_params=4, update_prob=0.5)
    plan = simple_plan_for(g, random_topological_order(g, seed), reuse=True, swap_activations=seed % 2 == 1,
                           keep_params=True)
    sim = simulate(g, plan, random_op_times(g, seed), get_device("v100-16gb"))
    tl = memory_timeline(g, plan, sim)
    objects = plan.pool.total_bytes() - plan.pool.workspace_bytes
    assert 0 < tl["peak_bytes"] <= objects
    # what is left at the end is exactly the residents the next iteration starts with
    obj_bytes = plan.pool.object_bytes()
    assert tl["bytes"][-1] == sum(int(obj_bytes[o]) for _, o in plan.initial_residents)
    assert (tl["tensor_bytes"] <= tl["bytes"]).all()
    total_by_kind = sum(v for v in tl["by_kind"].values())
    assert (total_by_kind == tl["tensor_bytes"]).all()


@pytest.mark.slow   # a wall-clock assertion: only with the slow tests
def test_simulator_is_fast_on_3e4_actions():
    """The GA's budget: well under 20 ms for 3x10^4 actions on a workstation; 150 ms here is a regression."""

    rng = np.random.default_rng(0)
    n = 30000
    kind = rng.choice([0, 1, 2, 3], size=n, p=[0.34, 0.16, 0.16, 0.34]).astype(np.int8)
    kind[0] = 0
    work = np.where(kind == 0, rng.uniform(1e-4, 1e-3, n), rng.uniform(1e5, 1e7, n))
    work[kind == DROP] = 0
    lens = rng.integers(0, 3, n)
    lens[0] = 0
    owner = np.repeat(np.arange(n), lens)
    deps = np.maximum(0, owner - 1 - rng.integers(0, 50, len(owner)))
    deps = np.where((kind[owner] == DROP) & (kind[deps] == DROP), 0, deps)   # like the builder's drops
    p = pack_arrays(kind, work, np.concatenate([[0], np.cumsum(lens)]), deps)
    dev = get_device("v100-16gb")
    best = min(_timed(lambda: simulate_packed(p, dev)) for _ in range(3))
    assert best < 0.15, f"simulate took {best * 1e3:.1f} ms for {n} actions"


def _timed(f):
    import time

    t = time.perf_counter()
    f()
    return time.perf_counter() - t


# ---------------------------------------------------------------- exact happens-before (issue 11)
@pytest.mark.parametrize("seed", range(4))
def test_no_action_starts_before_what_it_waits_for_ends_exactly(seed):
    """In floating point too: a compute's start is not recomputed as end - duration (an ulp early)."""
    rng = np.random.default_rng(seed)
    for _ in range(50):
        n = 60
        kind = rng.choice([0, 1, 2, 3], size=n, p=[0.4, 0.2, 0.2, 0.2]).astype(np.int8)
        work = np.where(kind == 0, rng.uniform(1e-5, 1e-3, n), np.where(kind == 3, 0.0, rng.uniform(1e3, 1e7, n)))
        deps, indptr = [], [0]
        for i in range(n):
            deps += sorted(set(rng.integers(0, i, size=min(i, 2)).tolist())) if i else []
            indptr.append(len(deps))
        r = simulate_packed(pack_arrays(kind, work, indptr, deps), LINK)
        last = {}
        for i in range(n):
            for d in deps[indptr[i]:indptr[i + 1]]:
                assert r.start[i] >= r.end[d], (i, d, r.start[i] - r.end[d])
            if kind[i] != DROP:
                if kind[i] in last:
                    assert r.start[i] >= r.end[last[kind[i]]]
                last[kind[i]] = i


@pytest.mark.parametrize("seed", [137, 148, 154, 189, 198])
def test_planned_peak_is_within_the_pool_and_limit(seed):
    """Cases where a drop's end landed an ulp after the start of the compute that waited on it, so the
    timeline counted both tenants of one object (peak 6 objects in a pool of 5)."""
    from tvm_swap.errors import InfeasibleLimitError
    from tvm_swap.planner import min_feasible_limit, plan_graph
    from tvm_swap.planner.bounds import noswap_peak

    rng = np.random.default_rng(seed)
    g = (random_dag(seed, n_ops=int(rng.integers(5, 60)), update_prob=0.5) if seed % 2
         else random_training_graph(seed, n_layers=int(rng.integers(1, 10))))
    lo, hi = min_feasible_limit(g), noswap_peak(g) * 1.2
    limit = int(rng.uniform(lo, max(lo, hi)))
    checked = []
    for planner in ("swapadvisor-nosearch", "odswap", "vdnn", "noswap", "swapadvisor"):
        try:
            p = plan_graph(g, limit, op_time=random_op_times(g, seed), planner=planner, generations=2, workers=1,
                           seed=seed, population=8)
        except InfeasibleLimitError:
            if planner in ("odswap", "vdnn", "noswap"):   # the baselines' size-class pools may need more
                continue
            raise
        assert p.predicted["peak_bytes"] <= p.predicted["pool_bytes"] <= limit, planner
        checked.append(planner)
    # the limit is at least the smallest feasible one: both SwapAdvisor planners must have met it
    assert {"swapadvisor-nosearch", "swapadvisor"} <= set(checked), checked
