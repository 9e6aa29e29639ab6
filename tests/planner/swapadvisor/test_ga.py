"""The genetic search: reproducible, never worse than its seeds, softmax survivors, budget respected."""
import json
import time

import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.planner import plan_graph
from tvm_swap.planner.swapadvisor.ga import GASettings, GeneticSearch, Genome
from tvm_swap.planner.feasibility import min_feasible_limit
from tvm_swap.testing import random_dag, random_op_times, random_training_graph

DEV = get_device("v100-16gb")


def tight_limit(g, frac=0.35):
    lo = min_feasible_limit(g)
    full = int(sum(max(256, -(-g.tensors[t].nbytes // 256) * 256) for t in g.used_tensors()))
    return lo + int((full - lo) * frac)


def comparable(plan):
    """The plan JSON without its search record (which holds wall-clock times)."""
    d = plan.to_dict()
    d.pop("search")
    return json.dumps(d, sort_keys=True)


@pytest.fixture(scope="module")
def graph():
    return random_training_graph(5, n_layers=12, momentum=True, skip_prob=0.5)


def test_same_seed_and_generations_give_the_same_plan(graph):
    ot = random_op_times(graph)
    limit = tight_limit(graph)
    kw = dict(op_time=ot, planner="swapadvisor", seed=3, generations=3, population=8)
    a = plan_graph(graph, limit, workers=1, **kw)
    b = plan_graph(graph, limit, workers=1, **kw)
    c = plan_graph(graph, limit, workers=2, **kw)     # worker processes evaluate, the parent draws
    assert comparable(a) == comparable(b) == comparable(c)
    assert a.search["generations"] == 3
    assert [h[2] for h in a.search["history"]] == [h[2] for h in c.search["history"]]


def test_never_worse_than_the_nosearch_plan_and_best_is_monotone():
    for seed in range(3):
        g = random_dag(seed, n_ops=40, update_prob=0.5, locality=12)
        ot = random_op_times(g, seed)
        limit = tight_limit(g, 0.2)
        base = plan_graph(g, limit, op_time=ot, planner="swapadvisor-nosearch")
        best = plan_graph(g, limit, op_time=ot, planner="swapadvisor", generations=4, workers=1, population=8,
                          seed=seed)
        assert best.predicted["time_s"] <= base.predicted["time_s"] * (1 + 1e-12)
        hist = [h[2] for h in best.search["history"]]
        assert all(x >= y for x, y in zip(hist, hist[1:]))
        assert hist[-1] == pytest.approx(best.predicted["time_s"], rel=1e-12)
        assert best.search["seed_times_s"]["nosearch"] == pytest.approx(base.predicted["time_s"], rel=1e-12)


def test_search_improves_on_a_tight_limit():
    g = random_training_graph(11, n_layers=16, skip_prob=0.5, stash_prob=0.6)
    ot = random_op_times(g, 1, flops_per_s=3e12)
    limit = tight_limit(g, 0.15)
    base = plan_graph(g, limit, op_time=ot, planner="swapadvisor-nosearch")
    best = plan_graph(g, limit, op_time=ot, planner="swapadvisor", generations=6, workers=1, population=12)
    assert best.predicted["time_s"] < base.predicted["time_s"]


def test_selection_keeps_the_best_and_favours_fast_genomes():
    g = random_dag(0, n_ops=15)
    s = GeneticSearch(g, random_op_times(g), DEV, tight_limit(g, 0.5), seed=0,
                      settings=GASettings(population=4, temperature=0.05))
    base = s.seed_genomes()[0][1]
    cands = []
    for i, t in enumerate([1.0, 1.5, 1.01, 3.0, 1.02, 2.0]):
        sched = np.roll(base.schedule, 0)
        cnt = base.alloc.cnt.copy()
        cnt[0] += i                                    # distinct keys
        cands.append(Genome(sched, type(base.alloc)(base.alloc.cls.copy(), cnt), t))
    picks = {}
    for _ in range(200):
        kept = s.select(cands, 3)
        assert kept[0].time_s == 1.0
        for k in kept[1:]:
            picks[k.time_s] = picks.get(k.time_s, 0) + 1
    assert picks.get(1.01, 0) > picks.get(2.0, 0) and picks.get(1.02, 0) > picks.get(3.0, 0)


def test_duplicates_are_not_simulated_twice():
    g = random_dag(1, n_ops=20)
    s = GeneticSearch(g, random_op_times(g), DEV, tight_limit(g), seed=0, settings=GASettings(population=4))
    n_seeds = len(s.seed_genomes())
    res = s.run(generations=2, workers=1)
    # the seeds (more than the population here) plus at most 4 children per crossover, one per generation
    assert res.evaluations <= max(4, n_seeds) + 2 * 4
    assert len(s.known) == res.evaluations


@pytest.mark.slow     # wall-clock bounds: meaningful on an idle machine only
def test_budget_stops_the_search():
    g = random_training_graph(2, n_layers=40)
    t0 = time.perf_counter()
    p = plan_graph(g, tight_limit(g), op_time=random_op_times(g), budget_s=1.5, workers=1, population=8)
    wall = time.perf_counter() - t0
    assert p.search["search_s"] <= 1.5 + 0.5
    assert wall < 5.0
    assert p.verified


def test_bad_ga_option_is_a_clear_error():
    from tvm_swap.errors import TvmSwapError

    g = random_dag(0, n_ops=10)
    with pytest.raises(TvmSwapError, match="population"):
        plan_graph(g, tight_limit(g), op_time=random_op_times(g), generations=1, population=1)


def test_selection_survives_hopeless_candidates():
    g = random_dag(0, n_ops=15)
    s = GeneticSearch(g, random_op_times(g), DEV, tight_limit(g, 0.5), seed=0,
                      settings=GASettings(population=4, temperature=0.01))
    base = s.seed_genomes()[0][1]
    cands = []
    for i, t in enumerate([1.0, 1e6, 2e6, 3e6, 4e6]):   # softmax weights underflow to zero
        cnt = base.alloc.cnt.copy()
        cnt[0] += i
        cands.append(Genome(base.schedule.copy(), type(base.alloc)(base.alloc.cls.copy(), cnt), t))
    kept = s.select(cands, 4)
    assert len(kept) == 4 and kept[0].time_s == 1.0


def test_progress_postfix_reports_the_evaluation_rate_and_best_time():
    from tvm_swap.planner.swapadvisor.ga import progress_postfix
    p = progress_postfix(1.23456, 40, 8.0)
    assert p["evals"] == 40 and p["evals/s"] == "5" and p["best_s"] == "1.235"
    assert float(progress_postfix(2.0, 3, 0.0)["evals/s"]) > 0      # no division by zero at the start


def test_seed_schedules_one_tries_the_memory_seeds_on_the_default_schedule_only():
    g = random_training_graph(4, n_layers=6)
    limit = tight_limit(g)
    ot = random_op_times(g)
    from tvm_swap.planner.swapadvisor.ga import Evaluator

    for pool in ("arena", "size-classes"):
        ev = Evaluator(g, ot, DEV, limit, 256, pool=pool) if pool == "arena" else None
        full = GeneticSearch(g, ot, DEV, limit, seed=0, evaluator=ev).seed_genomes()
        quick = GeneticSearch(g, ot, DEV, limit, seed=0, settings=GASettings(seed_schedules=1),
                              evaluator=ev).seed_genomes()
        default = full[0][1].schedule
        assert len(quick) < len(full)
        assert all(np.array_equal(q.schedule, default) for _, q in quick)
        # the same memory seeds as the full list's default-schedule ones ("free+x", "hot+x": the others)
        assert [n for n, _ in quick] == [n for n, _ in full if "+" not in n]
    kw = dict(op_time=ot, planner="swapadvisor", seed=1, generations=1, population=4, workers=1)
    a, b = plan_graph(g, limit, seed_schedules=1, **kw), plan_graph(g, limit, seed_schedules=1, **kw)
    assert comparable(a) == comparable(b) and a.verified
    assert a.search["evaluations"] < plan_graph(g, limit, **kw).search["evaluations"]
    from tvm_swap.errors import TvmSwapError

    with pytest.raises(TvmSwapError, match="seed_schedules"):
        plan_graph(g, limit, seed_schedules=2, **kw)


def test_no_timed_genome_is_a_plan_error_not_a_bare_value_error():
    """Islands whose populations are empty (every genome refused) give a PlanError that says what to do."""
    from types import SimpleNamespace

    from tvm_swap.errors import PlanError
    from tvm_swap.planner.swapadvisor.ga import best_genome

    with pytest.raises(PlanError, match="raise the memory limit"):
        best_genome([SimpleNamespace(pop=[]), SimpleNamespace(pop=[])])
    a, b = SimpleNamespace(time_s=2.0), SimpleNamespace(time_s=1.0)
    assert best_genome([SimpleNamespace(pop=[a]), SimpleNamespace(pop=[]), SimpleNamespace(pop=[b])]) is b
