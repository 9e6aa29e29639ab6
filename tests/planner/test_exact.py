"""The exact stage-model MILP: its plans verify, bracket correctly, and match hand-solved optima."""
import pytest

from tvm_swap.cost.devices import DeviceSpec, get_device
from tvm_swap.errors import TvmSwapError
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.exact import MAX_OPS, solve_exact
from tvm_swap.planner.feasibility import min_feasible_limit
from tvm_swap.planner.simulator import simulate
from tvm_swap.planner.tight_bound import tight_lower_bound
from tvm_swap.testing import random_dag, random_op_times, random_training_graph
from tvm_swap.verify import verify_plan

LINK = DeviceSpec("test", 1, 1, 1, h2d_bandwidth=1000.0, d2h_bandwidth=500.0, duplex_bandwidth=1200.0)
DEV = get_device("v100-16gb")


def graph_of(tensors, ops, outputs=(), updates=None):
    ts = [TensorInfo(i, n, b, (1,), "float32", k) for i, (n, b, k) in enumerate(tensors)]
    os_ = [OpInfo(i, f"op{i}", "k", tuple(ins), tuple(outs), 0.0, ws) for i, (ins, outs, ws) in enumerate(ops)]
    g = DataflowGraph("g", ts, os_, list(outputs), dict(updates or {}))
    g.validate()
    return g


def test_one_op_costs_its_input_compute_and_output():
    g = graph_of([("x", 1000, "input"), ("y", 500, "output")], [([0], [1], 0)], outputs=[1])
    r = solve_exact(g, [2.0], LINK, mem_limit=10**6, time_limit_s=10)
    assert r.status == "optimal"
    assert verify_plan(g, r.plan, 10**6) == []
    want = 1000 / 1000.0 + 2.0 + 500 / 500.0
    assert r.objective_s == pytest.approx(want, rel=1e-6)
    assert simulate(g, r.plan, [2.0], LINK).time_s == pytest.approx(want)


def test_a_param_that_fits_stays_resident_and_costs_nothing():
    # p (param, not updated) is read by op0: keeping it resident saves its copy every iteration
    g = graph_of([("p", 1000, "param"), ("x", 10, "input"), ("y", 10, "output")], [([0, 1], [2], 0)],
                 outputs=[2])
    r = solve_exact(g, [1.0], LINK, mem_limit=10**6, time_limit_s=10)
    assert r.status == "optimal" and [t for t, _ in r.plan.initial_residents] == [0]
    assert verify_plan(g, r.plan, 10**6) == []
    assert r.objective_s == pytest.approx(10 / 1000 + 1.0 + 10 / 500, rel=1e-6)


def test_too_large_graphs_are_refused_with_the_limit():
    g = random_dag(0, n_ops=MAX_OPS + 1)
    with pytest.raises(TvmSwapError, match=str(MAX_OPS)):
        solve_exact(g, random_op_times(g), DEV, 10**12)


@pytest.mark.parametrize("seed", range(4))
def test_plans_verify_and_sit_above_the_tight_bound(seed):
    g = random_training_graph(seed, n_layers=1 + seed % 2) if seed % 2 else random_dag(seed, n_ops=4, update_prob=0.5)
    t = random_op_times(g, seed)
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    # the stage model is a restriction: it may find no plan at a tight limit, but it must at the no-swap peak
    for frac in (0.3, 0.6, 1.0):
        limit = int(lo + frac * (hi - lo))
        r = solve_exact(g, t, DEV, limit, time_limit_s=20)
        if r.status != "infeasible":
            break
    assert r.plan is not None, r.status
    assert verify_plan(g, r.plan, limit) == []
    sim = simulate(g, r.plan, t, DEV).time_s
    assert sim >= tight_lower_bound(g, t, DEV, limit) * (1 - 1e-9)
    if r.status == "optimal":
        # the simulator overlaps across stage borders, so it is close to (mostly below) the stage model
        assert sim <= r.objective_s * 1.05


@pytest.mark.parametrize("seed", range(3))
def test_cpsat_and_highs_reach_the_same_stage_optimum(seed):
    g = random_dag(seed, n_ops=4, update_prob=0.4) if seed % 2 == 0 else random_training_graph(seed, n_layers=1)
    t = random_op_times(g, seed)
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    for frac in (0.5, 1.0):
        limit = int(lo + frac * (hi - lo))
        a = solve_exact(g, t, DEV, limit, time_limit_s=20, backend="cpsat")
        b = solve_exact(g, t, DEV, limit, time_limit_s=20, backend="highs")
        assert a.status == b.status
        if a.status == "optimal":
            break
    assert a.status == "optimal" and a.backend == "cpsat" and b.backend == "highs"
    # both within the 0.1% gap limit of the model's optimum; CP-SAT's ticks round durations up by < 1e-6
    assert a.objective_s == pytest.approx(b.objective_s, rel=3e-3)
    for r in (a, b):
        assert verify_plan(g, r.plan, limit) == []


def test_a_warm_start_is_the_free_solves_first_incumbent():
    g = random_dag(3, n_ops=9, update_prob=0.4)
    t = random_op_times(g, 3)
    limit = int(min_feasible_limit(g) + 0.4 * (noswap_peak(g) - min_feasible_limit(g)))
    order = list(range(g.num_ops))             # the graph's own (topological) order
    fixed = solve_exact(g, t, DEV, limit, time_limit_s=20, schedule=order, backend="cpsat")
    assert fixed.status == "optimal" and fixed.plan.schedule == order
    free = solve_exact(g, t, DEV, limit, time_limit_s=0.5, backend="cpsat", warm_start=fixed)
    assert free.plan is not None and free.objective_s <= fixed.objective_s * (1 + 1e-9)
    assert verify_plan(g, free.plan, limit) == []
    other = solve_exact(random_dag(4, n_ops=5), random_op_times(random_dag(4, n_ops=5)), DEV, 10**12,
                        time_limit_s=5, backend="cpsat")
    with pytest.raises(TvmSwapError, match="another model"):
        solve_exact(g, t, DEV, limit, time_limit_s=1, backend="cpsat", warm_start=other)


def test_backend_choices_are_checked():
    g = random_dag(0, n_ops=3)
    with pytest.raises(TvmSwapError, match="cpsat"):
        solve_exact(g, random_op_times(g), DEV, 10**12, backend="gurobi")
    with pytest.raises(TvmSwapError, match="CP-SAT"):
        solve_exact(g, random_op_times(g), DEV, 10**12, backend="highs", warm_schedule=list(range(g.num_ops)))


def test_the_live_cuts_keep_the_optimum():
    # valid inequalities: with and without them the model has the same optimum (at limits that force copies)
    g = random_dag(5, n_ops=6, update_prob=0.4)
    t = random_op_times(g, 1)
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    for frac in (0.2, 0.5):
        limit = int(lo + frac * (hi - lo))
        a = solve_exact(g, t, DEV, limit, time_limit_s=20, backend="cpsat", live_cuts=True)
        b = solve_exact(g, t, DEV, limit, time_limit_s=20, backend="cpsat", live_cuts=False)
        assert a.status == b.status == "optimal"
        assert a.objective_s == pytest.approx(b.objective_s, rel=2e-3)
        assert a.objective_s > sum(t) * 1.2       # copies cost time here, so the cuts had something to bind


@pytest.mark.parametrize("spec", [(79, 0.4, (0, 1, 3, 4, 2, 5, 6, 7)), (163, 0.8, tuple(range(8)))])
def test_a_kept_param_read_back_from_the_host_has_its_update_copied_out(spec):
    """The host copy a swap-in reads must hold last iteration's update: a param kept on the device between
    iterations and also swapped in needs its update swapped out within the iteration (nothing else refreshes
    the host copy in the simulated time)."""
    seed, frac, order = spec
    g = random_training_graph(seed, n_layers=2 + (seed // 2) % 3, momentum=(seed // 2) % 2 == 1)
    t = random_op_times(g, 0)
    lo = min_feasible_limit(g)
    limit = int(lo + frac * (noswap_peak(g) - lo))
    r = solve_exact(g, t, DEV, limit, time_limit_s=30, schedule=list(order) if order else None, workers=1)
    assert r.plan is not None and verify_plan(g, r.plan, limit) == []
    kept = {p for p, _ in r.plan.initial_residents}
    ins = {a.tensor for a in r.plan.actions if a.kind == "swap_in"}
    outs = {a.tensor for a in r.plan.actions if a.kind == "swap_out"}
    for new, old in g.updates.items():
        if old in kept and old in ins:
            assert new in outs, f"{g.tensors[old].name} is read from a stale host copy"


@pytest.mark.parametrize("seed", range(4))
def test_dominance_rows_and_first_copy_cuts_keep_the_optimum(seed):
    # they remove only dominated or non-integer solutions: with and without them the stage optimum is the same
    # (limits that force copies; training graphs exercise kept params, updates and the end state)
    g = random_dag(10 + seed, n_ops=6, update_prob=0.4) if seed % 2 == 0 else \
        random_training_graph(seed, n_layers=1, momentum=seed == 3)
    t = random_op_times(g, seed)
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    solved = 0
    for frac in (0.2, 0.5, 1.0):      # (1.0: the no-swap peak, so that every seed compares at least one limit)
        limit = int(lo + frac * (hi - lo))
        a = solve_exact(g, t, DEV, limit, time_limit_s=20, backend="cpsat", workers=1, dominance=True,
                        copy_cuts=True)
        b = solve_exact(g, t, DEV, limit, time_limit_s=20, backend="cpsat", workers=1, dominance=False,
                        copy_cuts=False)
        assert a.status == b.status
        if a.status == "infeasible":
            continue
        assert a.status == "optimal"
        assert a.objective_s == pytest.approx(b.objective_s, rel=2e-3)
        assert verify_plan(g, a.plan, limit) == []
        solved += 1
    assert solved, "no limit had a plan: the test compared nothing"


def test_a_deterministic_limit_stops_the_solve_with_its_best_plan():
    g = random_dag(3, n_ops=9, update_prob=0.4)
    t = random_op_times(g, 3)
    limit = int(min_feasible_limit(g) + 0.4 * (noswap_peak(g) - min_feasible_limit(g)))
    fixed = solve_exact(g, t, DEV, limit, time_limit_s=20, schedule=list(range(g.num_ops)), backend="cpsat")
    free = solve_exact(g, t, DEV, limit, time_limit_s=60, backend="cpsat", warm_start=fixed, det_limit=1e-4,
                       workers=1)
    assert free.status == "time_limit" and free.solve_s < 30
    assert free.plan is not None and verify_plan(g, free.plan, limit) == []
