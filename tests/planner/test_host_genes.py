"""Host placement as a choice of the search (planner/swapadvisor/host_genes.py): a gene per op that may run on
the host, seeded from host_policy's candidates, scored by the simulator's host stream."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.planner import plan_graph
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.context import PlanningContext
from tvm_swap.planner.host_policy import candidates, plan_on_host_split
from tvm_swap.planner.host_sim import simulate_plan
from tvm_swap.planner.host_split import host_eligible, optimizer_host_ops
from tvm_swap.planner.swapadvisor.host_genes import repair

MB = 1 << 20


def two_layer_step(grad_scale: bool = False) -> DataflowGraph:
    """Two dense layers and SGD. The first update in graph order (W2's) is ruinous on the host (flops its
    roofline runs at the host's peak for seconds); the second (W1's) is cheap there. grad_scale: dW1 passes
    through an elementwise scaling before its update."""
    names = [("x", "input"), ("W1", "param"), ("W2", "param"), ("h1", "activation"), ("h2", "activation"),
             ("loss", "output"), ("dh2", "gradient"), ("dW2", "gradient"), ("dh1", "gradient"),
             ("dW1", "gradient"), ("W2new", "param"), ("W1new", "param"), ("dW1s", "gradient")]
    ts = [TensorInfo(i, n, 4 if n == "loss" else MB, (1,) if n == "loss" else (MB // 4,), "float32", k)
          for i, (n, k) in enumerate(names)]
    dw1 = 12 if grad_scale else 9
    ops = [OpInfo(0, "fwd1", "dense", (0, 1), (3,), 1e9), OpInfo(1, "fwd2", "dense", (3, 2), (4,), 1e9),
           OpInfo(2, "loss", "loss", (4,), (5,), 1e6), OpInfo(3, "loss_grad", "loss_grad", (4,), (6,), 1e6),
           OpInfo(4, "bwd2", "dense_bwd", (6, 3, 2), (7, 8), 2e9),
           OpInfo(5, "sgd2", "sgd", (2, 7), (10,), 1e15),
           OpInfo(6, "bwd1", "dense_bwd", (8, 0, 1), (9,), 2e9)]
    if grad_scale:
        ops.append(OpInfo(7, "scale1", "multiply", (9,), (12,), 2.6e5))
    ops.append(OpInfo(len(ops), "sgd1", "sgd", (1, dw1), (11,), 1e6))
    used = ts if grad_scale else ts[:12]
    return DataflowGraph("two_layer_step", used, ops, outputs=[5, 10, 11], updates={10: 2, 11: 1})


def limit(g: DataflowGraph) -> int:
    """Below the no-swap need (else plan_graph plans no swapping, and nothing on the host)."""
    return int(0.8 * noswap_peak(g))


def op_times(g: DataflowGraph) -> np.ndarray:
    """1 ms per op on the device, but W1's update: 50 ms there (a device op the host does in microseconds)."""
    t = np.full(g.num_ops, 1e-3)
    t[max(optimizer_host_ops(g))] = 50e-3
    return t


def test_the_search_finds_a_host_placement_the_policy_does_not_give():
    g, dev = two_layer_step(), get_device("h200")
    t = op_times(g)
    ctx = PlanningContext(g, t, dev, limit(g), 256, 0, 10.0, 2, 1, False,
                          {"executor": "processes", "ray_address": None}, "arena")
    policy = [tuple(c) for c in candidates(ctx, "auto")]
    ups = optimizer_host_ops(g)
    # every placement, planned as the search scores it: W1's update alone on the host is the fastest
    times = {}
    for k in range(len(ups) + 1):
        for s in itertools.combinations(ups, k):
            p = plan_on_host_split(PlanningContext(**{**ctx.__dict__, "generations": 0}), "swapadvisor", list(s))
            times[s] = simulate_plan(g, p, t, dev).time_s
    best = min(times, key=times.get)
    assert best == (ups[1],) and best not in policy
    assert times[best] < min(times[c] for c in policy)
    p = plan_graph(g, ctx.mem_limit, device=dev, op_time=t, planner="swapadvisor", generations=2, workers=1,
                   host_ops="auto")
    assert p.verified and tuple(sorted(p.host_ops)) == best
    assert p.predicted["time_s"] == pytest.approx(times[best], rel=1e-9)
    assert p.predicted["lower_bound_s"] <= p.predicted["time_s"]
    hp = p.search["host_policy"]
    assert hp["best_from"].startswith("generation") and hp["evaluations"] > len(policy)


def test_generations_zero_plans_the_policys_candidates_only():
    g, dev = two_layer_step(), get_device("h200")
    p = plan_graph(g, limit(g), device=dev, op_time=op_times(g),
                   planner="swapadvisor", generations=0, workers=1, host_ops="auto")
    assert p.search["host_policy"]["generations"] == 0 and not p.host_ops


def test_memory_bound_ops_feeding_only_updates_are_eligible_and_repaired():
    g = two_layer_step(grad_scale=True)
    scale, ups = 7, optimizer_host_ops(g)
    assert host_eligible(g) == sorted(ups + [scale])
    # the scaling on the host with its update on the device would hand the device a host op's output
    assert repair(g, [scale]) == []
    assert repair(g, [scale, ups[1]]) == [scale, ups[1]]
    t = op_times(g)
    dev = get_device("h200")
    p = plan_graph(g, limit(g), device=dev, op_time=t, planner="swapadvisor",
                   generations=0, workers=1, host_ops=[scale, ups[1]])
    assert p.verified and set(p.host_ops) == {scale, ups[1]}
    assert p.predicted["lower_bound_s"] <= p.predicted["time_s"]


def test_a_bad_host_generations_option_is_refused():
    from tvm_swap.errors import TvmSwapError

    g = two_layer_step()
    with pytest.raises(TvmSwapError, match="host_generations"):
        plan_graph(g, limit(g), device="h200", op_time=op_times(g),
                   planner="swapadvisor", generations=1, workers=1, host_ops="auto", host_generations=-1)


def test_auto_on_a_step_with_nothing_for_the_host_is_the_planners_own_plan(monkeypatch):
    """Issue 28: with no op that may run on the host (no optimizer update: an inference step), host_ops="auto"
    plans as the planner does without it, and screens no placement (it planned the one empty placement with the
    seeds, then again with the search: a quarter of the fuzz's graphs); a bad host_generations is still refused."""
    from tvm_swap.errors import TvmSwapError
    from tvm_swap.planner import host_policy
    from tvm_swap.testing import random_dag, random_op_times

    rng = np.random.default_rng(3)
    g = random_dag(rng, n_ops=30, n_params=3, n_inputs=1, sizes=[MB, 3 * MB], update_prob=0.0, name="infer")
    assert not host_eligible(g)
    t = random_op_times(g, rng)

    def screened(*a, **k):
        raise AssertionError("a placement search on a step with nothing for the host")
    monkeypatch.setattr(host_policy, "_search_placement", screened)
    kw = dict(device="h200", op_time=t, planner="swapadvisor", generations=1, workers=1, seed=4)
    p = plan_graph(g, limit(g), host_ops="auto", **kw)
    q = plan_graph(g, limit(g), **kw)
    assert p.search.pop("host_policy") == {"choice": "auto", "host_ops": 0, "eligible": 0}
    def drop(d):
        return {**d, "search": {k: v for k, v in d["search"].items() if k not in ("search_s", "history")}}
    assert drop(p.to_dict()) == drop(q.to_dict()) and p.verified and not p.host_ops
    with pytest.raises(TvmSwapError, match="host_generations"):
        plan_graph(g, limit(g), host_ops="auto", host_generations=-1, **kw)
