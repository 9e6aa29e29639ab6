"""The polish's recompute flips (polish.fewer_recomputes): the best plan's rebuilds turned back into swaps, the
most expensive first, each kept where the simulation is faster; and the polish on graphs above POLISH_MAX_OPS,
within POLISH_SHARE of the search's evaluations."""
import time

import numpy as np

from tvm_swap.cost.devices import get_device
from tvm_swap.planner.api import plan_graph
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.feasibility import min_feasible_limit
from tvm_swap.planner.simulator import simulate
from tvm_swap.planner.swapadvisor.arena import plan_arena
from tvm_swap.planner.swapadvisor.ga import Evaluator
from tvm_swap.planner.swapadvisor.polish import POLISH_MAX_OPS, POLISH_SHARE, POLISH_TIME_SHARE, fewer_recomputes, polish_memory
from tvm_swap.testing import random_op_times, random_training_graph
from tvm_swap.verify import verify_plan

DEV = get_device("v100-16gb")


def instance(seed: int, n_layers: int, frac: float):
    g = random_training_graph(seed, n_layers=n_layers)
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    return g, random_op_times(g, seed, jitter=0.9), int(lo + frac * (hi - lo))


def verified_plan(g, t, limit, ev, schedule, genes):
    plan = plan_arena(ev.gi, schedule, limit, genes, t, DEV).to_plan(g, "swapadvisor", limit, DEV)
    assert not verify_plan(g, plan, limit)
    return plan


def recompute_everything():
    """48 ops at 0.3 of the way from the floor to the no-swap peak, the default schedule, and the genome that
    recomputes every candidate: (graph, op times, limit, evaluator, schedule, genome, its time)."""
    g, t, limit = instance(10, 14, 0.3)
    ev = Evaluator(g, t, DEV, limit, 256, pool="arena", recompute=True)
    schedule = np.asarray(ev.gi.default_schedule())
    every = ev.space.zero()
    every.recompute = ev.space.rc_able.copy()
    return g, t, limit, ev, schedule, every, ev.time_of(schedule, every)


def test_recomputing_everything_loses_to_recomputing_some():
    # 48 ops at 0.3 of the way from the floor to the no-swap peak, default schedule: recomputing every
    # candidate rebuilds 4 tensors (31.9 ms), swapping only 29.4 ms; flipping the rebuilds one by one, most
    # expensive first, keeps 2 of them (25.7 ms), faster than either
    g, t, limit, ev, schedule, every, before = recompute_everything()
    rebuilt = ev.scorer.rebuilt(schedule, every)
    genes, after, n = fewer_recomputes(ev, schedule, every, before, 100)
    assert n == len(rebuilt) > 0                   # one evaluation per rebuilt tensor
    assert after < before and after < ev.time_of(schedule, ev.space.zero())
    left = ev.scorer.rebuilt(schedule, genes)
    assert 0 < len(left) < len(rebuilt) and set(left) <= set(rebuilt)
    plan = verified_plan(g, t, limit, ev, schedule, genes)
    assert simulate(g, plan, t, DEV).time_s == after
    assert sum(a.kind == "recompute" for a in plan.actions) < sum(
        a.kind == "recompute" for a in verified_plan(g, t, limit, ev, schedule, every).actions)
    assert fewer_recomputes(ev, schedule, genes, after, 100)[1] == after    # nothing left to gain by one flip


def test_fewer_recomputes_keeps_to_its_budget_and_leaves_swap_only_genomes_alone():
    g, t, limit, ev, schedule, every, before = recompute_everything()
    _, after, n = fewer_recomputes(ev, schedule, every, before, 1)
    assert n == 1 and after <= before
    swap_only = ev.space.zero()
    assert fewer_recomputes(ev, schedule, swap_only, 1.0, 100) == (swap_only, 1.0, 0)


def test_polish_flips_recomputes_in_the_search():
    g, t, limit = instance(10, 14, 0.3)
    on = plan_graph(g, limit, device=DEV, op_time=t, planner="swapadvisor", seed=0, generations=2, workers=1)
    off = plan_graph(g, limit, device=DEV, op_time=t, planner="swapadvisor", seed=0, generations=2, workers=1,
                     polish="off")
    pol = on.search["polish"]
    assert "recompute_flips" in pol and pol["evaluations"] >= pol["recompute_flips"]
    assert on.predicted["time_s"] == pol["to_s"] <= off.predicted["time_s"]


def test_polish_runs_on_large_graphs_within_its_share_of_the_search():
    g, t, limit = instance(3, 30, 0.1)
    assert len(g.ops) > POLISH_MAX_OPS
    on = plan_graph(g, limit, device=DEV, op_time=t, planner="swapadvisor", seed=0, generations=1, workers=1)
    off = plan_graph(g, limit, device=DEV, op_time=t, planner="swapadvisor", seed=0, generations=1, workers=1,
                     polish="off")
    pol = on.search["polish"]
    # (the climb within its share; the deadline move, polish_schedule.py, one evaluation per start beside it)
    climb = pol["evaluations"] - pol.get("deadline_evaluations", 0)
    assert 0 < climb <= POLISH_SHARE * on.search["evaluations"]
    assert pol.get("deadline_evaluations", 0) <= 2
    assert on.search["evaluations"] == off.search["evaluations"]        # the search itself is the same
    assert pol["from_s"] == off.predicted["time_s"]
    assert on.predicted["time_s"] == pol["to_s"] <= pol["from_s"]


def test_recompute_on_stays_never_slower_than_off_on_large_graphs():
    # off's polish is repeated as off makes it (its islands' best, its share), the hybrid's best polished beside
    for seed in (3, 4):
        g, t, limit = instance(seed, 30, 0.1)
        kw = dict(device=DEV, op_time=t, planner="swapadvisor", seed=0, generations=1, workers=1)
        on, off = plan_graph(g, limit, **kw), plan_graph(g, limit, recompute="off", **kw)
        assert on.search["polish"]["evaluations"] >= off.search["polish"]["evaluations"]
        assert on.predicted["time_s"] <= off.predicted["time_s"]


def test_no_polish_evaluation_starts_after_the_deadline():
    # under a wall-clock budget the polish gets what the search leaves (planners.plan_swapadvisor): a deadline
    # that has passed stops both the grid and the flips before their first evaluation
    g, t, limit, ev, schedule, every, before = recompute_everything()
    passed = time.perf_counter() - 1.0
    assert fewer_recomputes(ev, schedule, every, before, 100, passed) == (every, before, 0)
    assert polish_memory(ev, schedule, every, before, None, passed) == (every, before, 0)
    assert fewer_recomputes(ev, schedule, every, before, 100, time.perf_counter() + 600)[2] > 0


def test_a_wall_clock_budget_holds_for_search_and_polish_together():
    g, t, limit = instance(3, 30, 0.1)
    t0 = time.perf_counter()
    plan = plan_graph(g, limit, device=DEV, op_time=t, planner="swapadvisor", seed=0, budget_s=2.0, workers=1)
    planned = time.perf_counter() - t0
    assert plan.search["search_s"] <= 2.0 * (1 - POLISH_TIME_SHARE) + 0.1     # the search left the polish its share
    assert planned < 2.0 + 1.5                        # plan and verify: the budget and a little, not 1.5x it
