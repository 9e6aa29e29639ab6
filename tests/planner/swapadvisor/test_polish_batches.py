"""The polish on the search's workers (polish.PolishTimes, a batch at a time): the same genes, time and count
as the polish one evaluation at a time (the loops it replaced, kept here as the reference), and no batch
started that would end after the deadline."""
import time

import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.feasibility import min_feasible_limit
from tvm_swap.planner.swapadvisor.executors import Done
from tvm_swap.planner.swapadvisor.ga import Evaluator
from tvm_swap.planner.swapadvisor.polish import (HEADROOMS, KEEPS, SPLITS, PolishTimes, fewer_recomputes,
                                                 polish_memory)
from tvm_swap.testing import random_op_times, random_training_graph

DEV = get_device("v100-16gb")


def ref_polish_memory(ev, schedule, genes, time_s, max_evals=None):
    best, best_t, n = genes, time_s, 0

    def consider(keep, headroom, split):
        nonlocal best, best_t, n
        g = best.copy()
        g.keep, g.headroom, g.split = float(keep), float(headroom), float(split)
        if g.key() == best.key() or (max_evals is not None and n >= max_evals):
            return
        n += 1
        t = ev.time_of(schedule, g)
        if t < best_t:
            best, best_t = g, t

    for keep in (KEEPS if ev.space.has_pairs else (genes.keep,)):
        for headroom in HEADROOMS:
            consider(keep, headroom, genes.split)
    keep, headroom = best.keep, best.headroom
    for split in SPLITS:
        consider(keep, headroom, split)
    return best, best_t, n


def ref_fewer_recomputes(ev, schedule, genes, time_s, max_evals):
    rebuilt = ev.scorer.rebuilt(schedule, genes)
    prod = ev.graph.producer()
    rebuilt.sort(key=lambda t: (-float(ev.op_time[prod[t]]), t))
    best, best_t, n = genes, time_s, 0
    for t in rebuilt:
        if n >= max_evals:
            break
        if not best.recompute[t]:
            continue
        g = best.copy()
        g.recompute[t] = False
        n += 1
        tt = ev.time_of(schedule, g)
        if tt < best_t:
            best, best_t = g, tt
    return best, best_t, n


class FakePool:
    """The search's pool as the polish sees it: `workers` genomes at a time (here in this process)."""

    def __init__(self, ev, workers):
        self.ev, self.workers, self.batches = ev, workers, []

    def submit_many(self, genomes):
        self.batches.append(len(genomes))
        return [Done(self.ev.time_of(g.schedule, g.alloc)) for g in genomes]


def evaluator(seed, frac):
    g = random_training_graph(seed, n_layers=5 + seed % 3)
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    limit = int(lo + frac * (hi - lo))
    return Evaluator(g, random_op_times(g, seed, jitter=0.9), DEV, limit, 256, pool="arena", recompute=True)


def fresh_memo(ev):
    ev.memo.clear()         # (the memo lives with the graph: each run times its genomes itself)


@pytest.mark.parametrize("seed", [3] + [pytest.param(k, marks=pytest.mark.slow) for k in range(3)])
def test_batched_polish_is_the_polish_one_at_a_time(seed):
    ev = evaluator(seed, 0.1 + 0.1 * (seed % 3))
    rng = np.random.default_rng(seed)
    schedule = np.asarray(ev.gi.default_schedule())
    starts = [ev.space.zero()]
    every = ev.space.zero()
    every.recompute = ev.space.rc_able.copy()
    starts.append(every)
    starts.append(ev.space.random(rng))
    for genes in starts:
        t0 = ev.time_of(schedule, genes)
        for max_evals, width in ((None, 3), (7, 2)):
            ref = ref_polish_memory(ev, schedule, genes, t0, max_evals)
            fresh_memo(ev)      # (so each batch below is timed, not found)
            pool = FakePool(ev, width)
            got = polish_memory(ev, schedule, genes, t0, max_evals, None, PolishTimes(ev, pool))
            assert (got[0].key(), got[1], got[2]) == (ref[0].key(), ref[1], ref[2])
            assert max(pool.batches, default=0) <= width
        ref = ref_fewer_recomputes(ev, schedule, genes, t0, 6)
        for width in (1, 3):
            fresh_memo(ev)
            got = fewer_recomputes(ev, schedule, genes, t0, 6, None, PolishTimes(ev, FakePool(ev, width)))
            assert (got[0].key(), got[1], got[2]) == (ref[0].key(), ref[1], ref[2])


def test_no_polish_batch_starts_that_would_end_after_the_deadline():
    ev = evaluator(2, 0.2)
    schedule = np.asarray(ev.gi.default_schedule())
    genes = ev.space.zero()
    t0 = ev.time_of(schedule, genes)
    times = PolishTimes(ev, FakePool(ev, 2))
    times.last_s = 30.0                 # the last batch took 30 s: one started now would end past the deadline
    assert polish_memory(ev, schedule, genes, t0, None, time.perf_counter() + 10, times) == (genes, t0, 0)
    times.last_s = 0.0
    assert polish_memory(ev, schedule, genes, t0, None, time.perf_counter() + 600, times)[2] > 0


def test_coarse_grid_first_takes_about_half_the_evaluations():
    # small graphs polish every other keep and headroom first, then the whole grid next to the best of those
    ev = evaluator(3, 0.2)
    schedule = np.asarray(ev.gi.default_schedule())
    genes = ev.space.zero()
    t0 = ev.time_of(schedule, genes)
    whole = polish_memory(ev, schedule, genes, t0)
    coarse = polish_memory(ev, schedule, genes, t0, coarse=True)
    grid = (len(KEEPS) if ev.space.has_pairs else 1) * len(HEADROOMS) + len(SPLITS)
    assert whole[2] >= grid - 2 and coarse[2] <= grid // 2 + 4
    assert coarse[1] <= t0 and whole[1] <= coarse[1] * 1.03


def test_a_small_graphs_polish_costs_at_most_a_share_of_a_small_search():
    # a search of a few genomes (the fuzz's: population 4, no generation) once paid for the whole grid, ~60
    # evaluations, several times its own; the grid now gets POLISH_SHARE of the search's evaluations (the flips
    # their own share)
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.planner.swapadvisor.polish import POLISH_SHARE

    polished = 0
    for seed in (1, 3):                 # (one start each: the grid's share and the flips' share)
        ev = evaluator(seed, 0.1)
        p = plan_graph(ev.graph, ev.space.mem_limit, device=DEV, op_time=ev.op_time, planner="swapadvisor", seed=0,
                       generations=0, population=4, workers=1)
        pol = p.search.get("polish")
        if pol:
            polished += 1
            assert pol["evaluations"] <= 2 * int(POLISH_SHARE * p.search["evaluations"])
    assert polished


def test_the_search_budget_is_what_the_setup_left(monkeypatch):
    # under a wall-clock budget the search gets what is left once the islands and the bounds are set up (the
    # tight bound alone takes seconds on 10^4 ops): it was computed before them, so a plan overran its budget
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.planner.swapadvisor import planners

    start, seen = [], []
    real_option, real_evolve = planners.recompute_option, planners.evolve

    def option(ctx, planner):               # (called as plan_swapadvisor starts: its context and the moment)
        start.append((time.perf_counter(), ctx.budget_s))
        return real_option(ctx, planner)

    def slow_bound(ctx):
        time.sleep(2.0)
        return False

    def spy(islands, budget_s=60.0, **kw):
        seen.append((time.perf_counter(), budget_s))
        return real_evolve(islands, budget_s=budget_s, **kw)

    monkeypatch.setattr(planners, "recompute_option", option)
    monkeypatch.setattr(planners, "swap_only_falls_short", slow_bound)
    monkeypatch.setattr(planners, "evolve", spy)
    ev = evaluator(1, 0.1)
    plan_graph(ev.graph, ev.space.mem_limit, device=DEV, op_time=ev.op_time, planner="swapadvisor", seed=0,
               budget_s=8.0, workers=1)
    (t0, budget), (t_search, search_budget) = start[0], seen[0]
    assert t_search - t0 >= 2.0
    left = max(0.1 * budget, budget - (t_search - t0))     # (at least a tenth of the budget: planners.py)
    assert search_budget <= left * (1 - planners.POLISH_TIME_SHARE) + 0.2


class RecordingPool(FakePool):
    """FakePool that keeps the genes it was asked to time, in order."""

    def __init__(self, ev, workers):
        super().__init__(ev, workers)
        self.asked = []

    def submit_many(self, genomes):
        self.asked += [g.alloc for g in genomes]
        return super().submit_many(genomes)


def test_near_grid_times_the_points_next_to_the_genes_first():
    """Under a budget (near=True) the grid starts at the genes' own (keep, headroom), ring by ring, and is the whole
    grid: the same best as the grid in its order when all of it fits, the neighbours first when it does not."""
    ev = evaluator(3, 0.2)
    if not ev.space.has_pairs:
        pytest.skip("the instance has no kept pairs to move")
    schedule = np.asarray(ev.gi.default_schedule())
    genes = ev.space.zero()
    genes.keep, genes.headroom = KEEPS[3], HEADROOMS[2]
    t0 = ev.time_of(schedule, genes)
    fresh_memo(ev)
    pool = RecordingPool(ev, 1)
    near = polish_memory(ev, schedule, genes, t0, 8, None, PolishTimes(ev, pool), near=True)
    assert near[2] == 8
    assert all(abs(KEEPS.index(g.keep) - 3) <= 1 and abs(HEADROOMS.index(g.headroom) - 2) <= 1
               for g in pool.asked)          # the 8 neighbours of (3, 2)
    fresh_memo(ev)
    whole_near = polish_memory(ev, schedule, genes, t0, None, None, None, near=True)
    whole = polish_memory(ev, schedule, genes, t0)
    assert whole_near[1] == whole[1] and whole_near[2] == whole[2]


def test_a_budget_keeps_the_final_plans_time_once(monkeypatch):
    """Under a budget the polish that follows the search keeps the final plan's time (3 batches before the budget
    ends), so the search does not keep it too (evolve's final_reserve=0): with the time of 3 batches left, the
    first generation still times the next batches (it stopped 3 batches early before); and it reports the last
    batch's duration once the workers were up (SearchResult.batch_s), which the polish plans with, not the search's
    average, which counts their start. A fake clock: each batch takes 1 s, the first 5 s (the workers start)."""
    from types import SimpleNamespace

    from tvm_swap.planner.swapadvisor import ga

    clock = [0.0]
    monkeypatch.setattr(ga, "time", SimpleNamespace(perf_counter=lambda: clock[0]))

    class G:
        time_s = float("inf")

    genomes = [G() for _ in range(12)]
    isl = SimpleNamespace(pop=list(genomes))
    done = []

    def evaluate(items):
        clock[0] += 5.0 if not done else 1.0
        done.extend(items)
        for _, g in items:
            g.time_s = 1.0

    for reserve, want in ((3, 6), (0, 9)):
        done.clear()
        clock[0] = 0.0
        isl.pop = list(genomes)
        batch_s = ga._time_first_generation([isl], evaluate, ([(isl, g) for g in genomes], []), (0.0, 13.5), 1,
                                            lambda: False, reserve)
        assert (len(done), batch_s) == (want, 1.0), reserve
