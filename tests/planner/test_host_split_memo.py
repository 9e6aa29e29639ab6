"""host_split.device_graph keeps one device graph per host set with the step's graph: the placement search's
final search finds the genome times its screening computed (ga.genome_times), and plans as before."""
from __future__ import annotations

import numpy as np

from tvm_swap.cost.devices import get_device
from tvm_swap.graph import DataflowGraph
from tvm_swap.planner import host_split, plan_graph
from tvm_swap.planner.api import resolve_op_time
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.host_split import device_graph, optimizer_host_ops
from tvm_swap.planner.swapadvisor.arena.scorer import ArenaScorer
from tvm_swap.testing import random_training_graph


def _step():
    g = random_training_graph(np.random.default_rng(5), n_layers=6, width_bytes=[1 << 20, 3 << 20],
                              with_updates=True, momentum=True, name="memo")
    return g, get_device("h100")


def _fresh(g: DataflowGraph) -> DataflowGraph:
    return DataflowGraph(g.name, list(g.tensors), list(g.ops), list(g.outputs), dict(g.updates), dict(g.meta))


def test_one_device_graph_per_host_set():
    g, _ = _step()
    ups = optimizer_host_ops(g)
    a, keep = device_graph(g, ups)
    b, keep2 = device_graph(g, list(reversed(ups)))
    assert a is b and keep == keep2 and keep is not keep2          # (the caller's list is its own)
    assert device_graph(g, ups[:1])[0] is not a
    assert device_graph(_fresh(g), ups)[0] is not a                 # kept with the graph, not globally
    assert a.to_dict() == host_split._device_graph(g, set(ups))[0].to_dict()


def test_the_placement_search_reuses_its_screened_seed_times_and_plans_as_without(monkeypatch):
    g, dev = _step()
    limit = int(noswap_peak(g) * 0.6)
    calls = []
    real = ArenaScorer.time_of
    monkeypatch.setattr(ArenaScorer, "time_of", lambda self, *a: calls.append(1) or real(self, *a))

    def plan(graph):
        calls.clear()
        p = plan_graph(graph, limit, device=dev, op_time=resolve_op_time(g, dev, None), planner="swapadvisor",
                       seed=3, generations=1, workers=1, host_ops="auto", host_generations=1)
        d = p.to_dict()
        d["search"] = {k: v for k, v in d["search"].items() if k not in ("search_s", "history")}
        return d, len(calls)

    kept, n_kept = plan(_fresh(g))
    monkeypatch.setattr(host_split, "device_graph",                 # a new device graph per call (as before)
                        lambda graph, ops: host_split._device_graph(graph, host_split.check_host_ops(graph, ops)))
    import tvm_swap.planner.host_policy as policy

    monkeypatch.setattr(policy, "device_graph", host_split.device_graph)
    rebuilt, n_rebuilt = plan(_fresh(g))
    assert kept == rebuilt
    assert kept["search"]["host_policy"]["host_ops"] > 0
    assert n_kept < n_rebuilt, (n_kept, n_rebuilt)
