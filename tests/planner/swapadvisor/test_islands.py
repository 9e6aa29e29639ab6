"""The arena search's islands (islands.py, ga.evolve): the hybrid search's two and the size-class search; each
evolves exactly as its search alone, the result is the fastest island's best, shared genomes are simulated once,
and a time budget still gives a verified plan."""
import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.plan import Arena
from tvm_swap.planner import plan_graph
from tvm_swap.planner.swapadvisor.ga import Evaluator, GASettings, GeneticSearch, Genome, evolve
from tvm_swap.planner.context import PlanningContext
from tvm_swap.planner.swapadvisor.islands import hybrid_islands, island_summary, size_class_island, size_class_islands
from tvm_swap.planner.swapadvisor.planners import _keep_updated_or_not
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
    # (a small graph, polish on: the hybrid and partly-cooled islands where their seeds say they pay)
    assert {"swap-only", "size-classes"} <= set(isl) <= {"swap-only", "hybrid", "size-classes", "partly-cooled"}
    assert all(i["evaluations"] > 0 for i in isl.values())
    assert p.search["polish"]["from_s"] == min(i["best_s"] for i in isl.values())
    assert p.predicted["time_s"] == p.search["polish"]["to_s"] <= p.search["polish"]["from_s"]


def _plain_population(isl):
    """(schedule, classes, counts, time) per genome: a KeptAllocation keys apart from the size-class search's own
    Allocation of the same classes and counts, which plans the same way there (keep_updated index)."""
    return [(g.schedule.tobytes(), g.alloc.cls.tobytes(), g.alloc.cnt.tobytes(), g.time_s) for g in isl.pop]


@pytest.mark.parametrize("keep", [False, True, None])
def test_the_size_class_island_evolves_exactly_as_the_size_class_search_alone(keep):
    # None: the island chooses as the size-class planner (planners._keep_updated_or_not), here keeping
    s = GASettings(population=6)
    g = random_training_graph(5, n_layers=6)
    t = random_op_times(g, 5)
    limit = int(0.9 * noswap_peak(g))
    ev = _evaluator(g, t, limit, False)
    islands = [GeneticSearch(g, t, DEV, limit, 256, 0, s, evaluator=ev),
               size_class_island(g, t, DEV, limit, 256, 0, s, ev, keep)]
    res = evolve(islands, generations=2, workers=1)
    ctx = PlanningContext(g, t, DEV, limit, 256, 0, generations=2, workers=1,
                          options={} if keep is None else {"keep_updated": keep})
    alone = GeneticSearch(g, t, DEV, limit, 256, 0, s, evaluator=_keep_updated_or_not(ctx))
    assert alone.gi.keep_updated == (keep is not False)
    alone_res = alone.run(generations=2, workers=1)
    arena = GeneticSearch(g, t, DEV, limit, 256, 0, s, evaluator=_evaluator(g, t, limit, False))
    arena_res = arena.run(generations=2, workers=1)
    assert _plain_population(islands[1]) == _plain_population(alone)          # same genomes, same times
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


@pytest.mark.parametrize("seed,frac", [(5, 0.9), (9, 0.7), (15, 0.7)])
def test_the_arena_search_is_never_slower_than_the_size_class_search_that_keeps_updated_params(seed, frac):
    # random graphs where the size-class planner keeps updated params and, with the island reading them from
    # the host (keep_updated=False), the arena search ended slower than it (1 generation, population 4)
    g = random_training_graph(seed, n_layers=6)
    t = random_op_times(g, seed)
    limit = int(frac * noswap_peak(g))
    kw = dict(planner="swapadvisor", generations=1, workers=1, seed=0, recompute="off", population=4, polish="off")
    sc = plan_graph(g, limit, DEV, t, pool="size-classes", **kw)
    assert {p for p, _ in sc.initial_residents} & set(g.updates.values()), "the size-class plan keeps no update"
    arena = plan_graph(g, limit, DEV, t, pool="arena", **kw)
    assert arena.verified and isinstance(arena.pool, Arena)
    assert arena.predicted["time_s"] <= sc.predicted["time_s"]


def test_rival_size_class_islands_keep_the_mode_the_size_class_planner_chooses():
    # under a budget the keep-updated choice is made in the first generation (two rival islands), not serially
    # before the search: the island left is the one size_class_island would have built (same seeds, same times)
    s = GASettings(population=6)
    g = random_training_graph(5, n_layers=6)
    t = random_op_times(g, 5)
    limit = int(0.9 * noswap_peak(g))
    ev = _evaluator(g, t, limit, False)
    rivals = size_class_islands(g, t, DEV, limit, 256, 0, s, ev, choose_now=False)
    assert len(rivals) == 2 and all(isl.rivals == "size-classes" for isl in rivals)
    res = evolve([GeneticSearch(g, t, DEV, limit, 256, 0, s, evaluator=ev)] + rivals, generations=1, workers=1)
    left = [isl for isl in rivals if isl.pop]
    assert len(left) == 1 and res.generations == 1
    chosen = size_class_island(g, t, DEV, limit, 256, 0, s, _evaluator(g, t, limit, False))
    assert type(left[0].space) is type(chosen.space)
    assert [i["name"] for i in island_summary(rivals)] == ["size-classes"]
