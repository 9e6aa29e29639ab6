"""ga.genome_times: genome times kept with the graph per scorer setting, so a second search on the same graph
and settings (swapadvisor with recompute off after on: its swap-only island is that very search) simulates
nothing again, and gives the plan a fresh graph gives, evaluation counts included."""
import json

import pytest

from tvm_swap.planner import plan_graph
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.swapadvisor.arena import ArenaScorer
from tvm_swap.planner.swapadvisor.swapplan import SwapPlanScorer
from tvm_swap.testing import random_op_times, random_training_graph


def _fresh(g):
    from tvm_swap.graph import DataflowGraph

    return DataflowGraph(g.name, list(g.tensors), list(g.ops), list(g.outputs), dict(g.updates), dict(g.meta))


def _same(a, b) -> bool:
    da, db = a.to_dict(), b.to_dict()
    for d in (da, db):
        d["search"] = {k: v for k, v in d["search"].items() if k not in ("search_s", "history")}
    return json.dumps(da, sort_keys=True) == json.dumps(db, sort_keys=True)


def _counting(monkeypatch, cls):
    calls = []
    real = cls.time_of
    monkeypatch.setattr(cls, "time_of", lambda self, *a: calls.append(1) or real(self, *a))
    return calls


@pytest.mark.parametrize("seed", [0, 1])
def test_swap_only_after_the_hybrid_search_simulates_nothing_again(monkeypatch, seed):
    g = random_training_graph(seed, n_layers=8)
    t = random_op_times(g, seed)
    limit = int(0.6 * noswap_peak(g))
    kw = dict(op_time=t, seed=seed, generations=2, workers=1, population=6)
    plan_graph(g, limit, recompute="on", **kw)
    calls = _counting(monkeypatch, ArenaScorer)
    off = plan_graph(g, limit, recompute="off", **kw)
    assert calls == []                                       # every genome of its search was timed before
    alone = plan_graph(_fresh(g), limit, recompute="off", **kw)
    assert calls                                             # a fresh graph remembers nothing
    assert _same(off, alone) and off.search["evaluations"] == alone.search["evaluations"] > 0
    # another limit is another setting: nothing is shared
    n = len(calls)
    plan_graph(g, int(0.7 * noswap_peak(g)), recompute="off", **kw)
    assert len(calls) > n


def test_the_size_class_search_reuses_the_seed_times_of_its_keep_updated_choice(monkeypatch):
    import tvm_swap.planner.swapadvisor.ga as ga

    g = random_training_graph(2, n_layers=8)
    t = random_op_times(g, 2)
    limit = int(0.6 * noswap_peak(g))
    kw = dict(op_time=t, seed=0, generations=1, workers=1, pool="size-classes")
    calls = _counting(monkeypatch, SwapPlanScorer)
    plan = plan_graph(g, limit, **kw)
    remembered = len(calls)
    class Forgets(dict):
        def __setitem__(self, k, v):
            pass

    monkeypatch.setattr(ga, "genome_times", lambda *a: Forgets())   # nothing remembered, not even within a plan
    forgetful = plan_graph(_fresh(g), limit, **kw)
    assert _same(plan, forgetful)
    # the choice between keeping updated params or not times each mode's seeds; the search then times its
    # mode's seeds again only without the memo
    assert remembered < len(calls) - remembered
