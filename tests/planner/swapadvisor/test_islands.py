"""The arena search's islands (islands.py, ga.evolve): the hybrid search's two and the size-class search; each
evolves exactly as its search alone, the result is the fastest island's best, shared genomes are simulated once,
and a time budget still gives a verified plan."""
import numpy as np

from tvm_swap.devices import get_device
from tvm_swap.plan import Arena
from tvm_swap.planner import plan_graph
from tvm_swap.planner.swapadvisor.ga import Evaluator, GASettings, GeneticSearch, Genome, evolve
from tvm_swap.planner.swapadvisor.islands import hybrid_islands, size_class_island
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.testing import random_op_times, random_training_graph

DEV = get_device("v100-16gb")


def _case(seed, frac=0.6):
    g = random_training_graph(seed, n_layers=8)
    t = random_op_times(g, seed)
    limit = int(frac * noswap_peak(g))
    return g, t, limit


def _evaluator(g, t, limit, recompute):
    return Evaluator(g, t, DEV, limit, 256, pool="arena", recompute=recompute)


def _population(isl):
    return [(g.key(), g.time_s) for g in isl.pop]


def test_each_island_evolves_exactly_as_its_search_alone():
    s = GASettings(population=8)
    for seed in range(3):
        g, t, limit = _case(seed)
        islands = hybrid_islands(g, t, DEV, limit, 256, seed, s, _evaluator(g, t, limit, True))
        assert [i.name for i in islands] == ["swap-only", "hybrid"]
        res = evolve(islands, generations=2, workers=1)
        off = GeneticSearch(g, t, DEV, limit, 256, seed, s, evaluator=_evaluator(g, t, limit, False))
        off_res = off.run(generations=2, workers=1)
        hyb = GeneticSearch(g, t, DEV, limit, 256, seed, s, evaluator=_evaluator(g, t, limit, True))
        hyb_res = hyb.run(generations=2, workers=1)
        assert _population(islands[0]) == _population(off)
        assert _population(islands[1]) == _population(hyb)
        assert res.best.time_s == min(off_res.best.time_s, hyb_res.best.time_s)
        if off_res.best.time_s <= hyb_res.best.time_s:         # a tie goes to the swap-only plan
            assert res.best is islands[0].pop[0]
        # the hybrid island's swap-only seeds were simulated once, for both islands
        assert res.evaluations == len(islands[0].known)
        assert res.evaluations < off_res.evaluations + hyb_res.evaluations
        # a genome is counted for the island that sent it first: the swap-only island never costs more than off
        # (less when the hybrid island bred one of its genomes first: all-off recompute genes share its key)
        assert islands[0].evaluations <= off_res.evaluations


def test_all_off_recompute_genes_share_the_swap_only_key_and_time():
    g, t, limit = _case(0)
    ev = _evaluator(g, t, limit, True)
    islands = hybrid_islands(g, t, DEV, limit, 256, 0, GASettings(population=4), ev)
    sched = islands[0].gi.default_schedule()
    swap_only = islands[0].space.zero()
    hybrid = islands[1].space.zero()
    assert swap_only.recompute is None and hybrid.recompute is not None and not hybrid.recompute.any()
    assert Genome(sched, swap_only).key() == Genome(sched, hybrid).key()
    assert ev.time_of(sched, swap_only) == ev.time_of(sched, hybrid)
    deeper = hybrid.copy()
    deeper.depth = 1                  # a different genome of the hybrid space keeps a key of its own
    assert Genome(sched, deeper).key() != Genome(sched, hybrid).key()
    some = hybrid.copy()
    some.recompute = ev.space.rc_able.copy()
    assert Genome(sched, some).key() != Genome(sched, hybrid).key()


def test_no_recompute_candidate_means_the_swap_only_search_alone():
    g, t, limit = _case(1)
    ev = _evaluator(g, t, limit, True)
    ev.space.rc_able = np.zeros_like(ev.space.rc_able)
    islands = hybrid_islands(g, t, DEV, limit, 256, 0, GASettings(population=4), ev)
    assert [i.name for i in islands] == ["swap-only"]


def test_a_time_budget_shares_the_islands_and_still_plans():
    g, t, limit = _case(2, 0.7)
    p = plan_graph(g, limit, DEV, t, planner="swapadvisor", pool="arena", recompute="on", budget_s=3.0, workers=1,
                   seed=0)
    assert p.verified
    isl = {i["name"]: i for i in p.search["islands"]}
    assert set(isl) == {"swap-only", "hybrid", "size-classes", "partly-cooled"}    # (a small graph: polish on)
    assert all(i["evaluations"] > 0 for i in isl.values())
    assert p.search["polish"]["from_s"] == min(i["best_s"] for i in isl.values())
    assert p.predicted["time_s"] == p.search["polish"]["to_s"] <= p.search["polish"]["from_s"]


def test_the_size_class_island_evolves_exactly_as_the_size_class_search_alone():
    s = GASettings(population=6)
    g, t, limit = _case(14, 0.6)
    ev = _evaluator(g, t, limit, False)
    islands = [GeneticSearch(g, t, DEV, limit, 256, 0, s, evaluator=ev),
               size_class_island(g, t, DEV, limit, 256, 0, s, ev)]
    res = evolve(islands, generations=2, workers=1)
    alone = GeneticSearch(g, t, DEV, limit, 256, 0, s,
                          evaluator=Evaluator(g, t, DEV, limit, 256, keep_updated=False, pool="size-classes"))
    alone_res = alone.run(generations=2, workers=1)
    arena = GeneticSearch(g, t, DEV, limit, 256, 0, s, evaluator=_evaluator(g, t, limit, False))
    arena_res = arena.run(generations=2, workers=1)
    assert _population(islands[1]) == _population(alone)          # same genomes, same times
    assert _population(islands[0]) == _population(arena)
    assert res.best.time_s == min(alone_res.best.time_s, arena_res.best.time_s)


def test_no_size_class_island_below_the_size_class_floor():
    g, t, limit = _case(0, 0.5)           # feasible in an arena, not with size classes
    assert size_class_island(g, t, DEV, limit, 256, 0, GASettings(population=4), _evaluator(g, t, limit, False)) \
        is None


def test_the_arena_search_is_never_slower_than_the_size_class_search():
    # random graphs where the arena search alone ended slower than the size-class search at 2 generations
    for seed, frac in ((11, 0.8), (14, 0.6), (18, 0.8)):
        g = random_training_graph(seed, n_layers=8)
        t = random_op_times(g, seed)
        limit = int(frac * noswap_peak(g))
        kw = dict(planner="swapadvisor", generations=2, workers=1, seed=0, recompute="off")
        arena = plan_graph(g, limit, DEV, t, pool="arena", **kw)
        sc = plan_graph(g, limit, DEV, t, pool="size-classes", keep_updated=False, **kw)
        assert arena.verified and isinstance(arena.pool, Arena)
        assert arena.predicted["time_s"] <= sc.predicted["time_s"]
