"""The runtime runs a host op on the thread that issues the program's actions (runtime_ext/host_ops.py), so
nothing after it in the plan's order is issued until it has run: the simulator's host stream models that
(host_sim.issue_gates), and host_split.lift_plan puts the host ops after every device action, where it delays
nothing."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from tvm_swap.cost.devices import get_device, get_host
from tvm_swap.cost.host import host_times
from tvm_swap.planner import plan_graph
from tvm_swap.planner.api import resolve_op_time
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.host_sim import HOST, _run, simulate_plan
from tvm_swap.planner.host_split import optimizer_host_ops
from tvm_swap.planner.simulator import pack_actions
from tvm_swap.testing import random_training_graph


def _planned(seed: int):
    g = random_training_graph(seed=seed, n_layers=5, momentum=True)
    dev = get_device("h200")
    p = plan_graph(g, int(noswap_peak(g) * 0.7), device=dev, planner="swapadvisor-nosearch", workers=1,
                   host_ops="optimizer")
    return g, dev, p


def _host_actions(p):
    host = set(p.host_ops)
    return [i for i, a in enumerate(p.actions) if a.kind == "compute" and a.op in host]


def test_host_ops_come_after_every_device_action():
    for seed in range(4):
        g, dev, p = _planned(seed)
        hi = _host_actions(p)
        assert p.verified and hi and hi == list(range(len(p.actions) - len(hi), len(p.actions)))


def test_an_action_after_a_host_op_starts_once_it_has_run():
    """A slow host op moved before the device's remaining work: everything after it waits for it (the program's
    thread runs it before it issues the next action); on the old model the device ran on beside it."""
    g, dev, p = _planned(0)
    t = resolve_op_time(g, dev, None)
    first = _host_actions(p)[0]
    h = p.actions[first]
    at = max(h.deps, default=-1) + 1        # right after its last dep, before the device's remaining work
    order = list(range(len(p.actions)))
    order.insert(at, order.pop(first))
    new_of = {old: new for new, old in enumerate(order)}
    moved = [replace(p.actions[old], deps=tuple(sorted(new_of[d] for d in p.actions[old].deps))) for old in order]
    last_dev = max(i for i, a in enumerate(moved) if a.kind == "compute" and a.op not in set(p.host_ops))
    assert at < last_dev
    ht = host_times(g, get_host(dev))
    ht[h.op] = 1.0                          # a second on the host: longer than the whole device step
    sim = simulate_plan(g, replace(p, actions=moved), t, dev, host_time=ht)
    for i in range(at + 1, len(moved)):
        if moved[i].kind != "drop":
            assert sim.start[i] >= sim.end[at], (i, moved[i].kind)
    # the old model (no issue rule): the device's last compute started before the host op ended
    pk = pack_actions(g, moved, t)
    stream = np.array([-1 if k == 3 else int(k) if k in (1, 2) else 0 for k in pk.kind])
    stream[at] = HOST
    work = pk.work.copy()
    work[at] = ht[h.op]
    start, end = _run(stream.tolist(), work.tolist(), pk.dep_indptr.tolist(), pk.dep_indices.tolist(), dev)
    assert start[last_dev] < end[at] <= sim.start[last_dev]


def test_at_the_end_the_issue_rule_costs_nothing():
    """lift_plan's plans simulate alike with and without the issue rule: nothing device-side follows a host op."""
    for seed in range(4):
        g, dev, p = _planned(seed)
        t = resolve_op_time(g, dev, None)
        pk = pack_actions(g, p.actions, t)
        stream = np.array([-1 if k == 3 else int(k) if k in (1, 2) else 0 for k in pk.kind])
        hi = _host_actions(p)
        stream[hi] = HOST
        work = pk.work.copy()
        work[hi] = host_times(g, get_host(dev))[[p.actions[i].op for i in hi]]
        _, end = _run(stream.tolist(), work.tolist(), pk.dep_indptr.tolist(), pk.dep_indices.tolist(), dev)
        assert max(end) == simulate_plan(g, p, t, dev).time_s == p.predicted["time_s"]
        assert optimizer_host_ops(g) == sorted(p.host_ops)
