"""Ops on the host (Plan.host_ops): the simulator's host stream, the host-aware bound, the split of a step into
its device part and host ops, and zero-offload's optimizer on the host."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tvm_swap.cost.devices import get_device, get_host
from tvm_swap.errors import TvmSwapError
from tvm_swap.cost.host import host_times
from tvm_swap.planner import plan_graph
from tvm_swap.planner.api import resolve_op_time
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.breakdown import plan_breakdown
from tvm_swap.planner.host_bound import host_lower_bound_detail, split_compute_bound
from tvm_swap.planner.host_sim import _run, simulate_plan
from tvm_swap.planner.host_split import check_host_ops, optimizer_host_ops
from tvm_swap.planner.simulator import pack_actions, simulate
from tvm_swap.zoo import load_zoo

SPEC = "zoo:llama-7b@batch=1,seq=512,layers=2"


@pytest.fixture(scope="module")
def step():
    g = load_zoo(SPEC)
    dev = get_device("h200")
    return g, dev, resolve_op_time(g, dev, None), int(noswap_peak(g) * 0.4)


@pytest.mark.parametrize("planner", ["swapadvisor-nosearch", "vdnn", "zero-offload"])
def test_the_host_loop_times_device_only_plans_as_the_fast_simulator(step, planner):
    g, dev, t, limit = step
    p = plan_graph(g, limit, device=dev, planner=planner, workers=1, zero_update="device") \
        if planner == "zero-offload" else plan_graph(g, limit, device=dev, planner=planner, workers=1)
    fast = simulate(g, p.actions, t, dev)
    pk = pack_actions(g, p.actions, t)
    stream = [-1 if k == 3 else int(k) if k in (1, 2) else 0 for k in pk.kind]
    start, end = _run(stream, pk.work.tolist(), pk.dep_indptr.tolist(), pk.dep_indices.tolist(), dev)
    assert np.allclose(end, fast.end, rtol=0, atol=1e-12) and np.allclose(start, fast.start, rtol=0, atol=1e-12)


def test_zero_offload_runs_adam_on_the_host_and_moves_only_gradients_and_weights(step):
    g, dev, t, limit = step
    p = plan_graph(g, limit, device=dev, planner="zero-offload", workers=1)
    assert p.verified and sorted(p.host_ops) == optimizer_host_ops(g) and p.search["update_on"] == "host"
    bd = plan_breakdown(g, p, t, dev)
    roles = bd["roles"]
    assert roles["master weights"]["in_bytes"] == roles["optimizer state"]["in_bytes"] == 0
    assert roles["master weights"]["out_bytes"] == roles["optimizer state"]["out_bytes"] == 0
    grads = {x for o in optimizer_host_ops(g) for x in g.ops[o].inputs if g.producer()[x] >= 0}
    assert roles["gradients"]["out_bytes"] == sum(g.tensors[x].nbytes for x in grads)
    assert roles["weights"]["out_bytes"] == 0 and roles["weights"]["in_bytes"] > 0
    ht = host_times(g, get_host(dev))
    assert bd["busy_s"]["host"] == pytest.approx(float(ht[list(p.host_ops)].sum()))
    # the host's work is on its stream: the step lasts at least as long, and the bound stays below it
    assert p.predicted["time_s"] >= bd["busy_s"]["host"]
    assert p.predicted["lower_bound_s"] <= p.predicted["time_s"]
    old = plan_graph(g, limit, device=dev, planner="zero-offload", workers=1, zero_update="device")
    assert not old.host_ops and old.predicted["swap_out_bytes"] > p.predicted["swap_out_bytes"]


@pytest.mark.parametrize("choice", ["optimizer", "auto"])
def test_swapadvisor_with_host_updates_is_verified_and_above_its_bound(step, choice):
    g, dev, t, limit = step
    p = plan_graph(g, limit, device=dev, planner="swapadvisor", workers=1, generations=1, host_ops=choice)
    assert p.verified and set(p.host_ops) <= set(optimizer_host_ops(g))
    assert p.predicted["tight_lower_bound_s"] is None or p.predicted["tight_lower_bound_s"] <= p.predicted["time_s"]
    assert p.predicted["lower_bound_s"] <= p.predicted["time_s"]
    again = simulate_plan(g, p, t, dev)
    assert again.time_s == p.predicted["time_s"]


def test_split_compute_bound_is_below_every_real_split():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 6))
        d, h = rng.random(n), rng.random(n) * 3
        c0 = float(rng.random())
        best = min(max(c0 + d[[i for i in range(n) if i not in s]].sum(), h[list(s)].sum())
                   for k in range(n + 1) for s in itertools.combinations(range(n), k))
        b = split_compute_bound(c0, d, h)
        assert c0 <= b <= best + 1e-12


def test_host_bound_drops_state_only_host_ops_touch(step):
    g, dev, t, limit = step
    ht = host_times(g, get_host(dev))
    none = host_lower_bound_detail(g, t, ht, dev, limit, [])
    some = host_lower_bound_detail(g, t, ht, dev, limit, optimizer_host_ops(g))
    assert some["in_bytes"] < none["in_bytes"] and some["host_compute_s"] < none["host_compute_s"]


def test_a_host_op_whose_output_the_device_reads_is_refused_with_what_to_do(step):
    g = step[0]
    first = next(op for op in g.ops if op.id not in optimizer_host_ops(g))   # forward: device ops read its output
    with pytest.raises(TvmSwapError, match="cannot run on the host"):
        check_host_ops(g, [first.id])


def test_host_ops_need_a_device_with_a_host_spec():
    g = load_zoo(SPEC)
    with pytest.raises(TvmSwapError, match="names no host spec"):
        plan_graph(g, "40%", device="v100-16gb", planner="swapadvisor-nosearch", workers=1, host_ops="optimizer")


def test_host_aware_bound_holds_for_random_steps_and_host_subsets():
    """Random training steps (SGD with momentum: the update reads the weight, unlike AdamW here), random subsets
    of their updates on the host: every plan verifies and takes at least the host-aware bound."""
    from tvm_swap.errors import InfeasibleLimitError
    from tvm_swap.testing import random_training_graph

    rng = np.random.default_rng(1)
    checked = 0
    for seed in range(8):
        g = random_training_graph(seed=seed, n_layers=5, momentum=True)
        ups = optimizer_host_ops(g)
        for planner in ("swapadvisor-nosearch", "odswap", "zero-offload"):
            host = [o for o in ups if rng.random() < 0.5] if planner != "zero-offload" else None
            kw = {"host_ops": host} if host is not None else {}
            try:
                p = plan_graph(g, int(noswap_peak(g) * float(rng.uniform(0.5, 0.9))), device="h200",
                               planner=planner, workers=1, **kw)
            except InfeasibleLimitError:
                continue
            assert p.verified
            assert p.predicted["lower_bound_s"] <= p.predicted["time_s"] * (1 + 1e-9), (seed, planner, host)
            checked += 1
    assert checked >= 12


def test_host_updates_without_the_step_counters_update_get_it_too():
    """Llama-13B's last half of the Adam updates on the host read the step counter; its update op left on the
    device kept the counter there and left the host copy stale (the verifier refused the plan: a traceback for
    host_ops=[...]); the policy runs that update on the host too (host_split.close_host_ops)."""
    from tvm_swap.cost.roofline import roofline_times
    from tvm_swap.planner.host_split import close_host_ops
    from tvm_swap.units import parse_limit

    g, dev = load_zoo("zoo:llama-13b@batch=1,seq=4096"), get_device("h200")
    ups = optimizer_host_ops(g)
    prod = g.producer()
    last = ups[len(ups) // 2:]
    counters = {int(prod[new]) for new, old in g.updates.items() if prod[new] >= 0 and int(prod[new]) not in last
                and any(old in g.ops[o].inputs for o in last)}
    assert counters, "the last updates read no tensor another update writes"
    assert close_host_ops(g, last) == sorted(set(last) | counters)
    p = plan_graph(g, int(parse_limit("141GB")), device=dev, planner="swapadvisor", generations=0, workers=1,
                   host_ops=last, op_time=roofline_times(g, dev))
    assert p.verified and set(p.host_ops) == set(last) | counters
