"""The byte breakdown of a plan (tvm_swap.planner.breakdown): roles from the graph, totals that match the plan."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from tvm_swap.cost.devices import get_device
from tvm_swap.plan import Action
from tvm_swap.planner import plan_graph
from tvm_swap.planner.api import resolve_op_time
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.breakdown import ROLES, format_breakdown, plan_breakdown, tensor_roles
from tvm_swap.zoo import load_zoo

SPEC = "zoo:llama-7b@batch=1,seq=512,layers=1"


def _roles_by_name(g):
    return {t.name: r for t, r in zip(g.tensors, tensor_roles(g))}


def test_roles_follow_who_reads_each_tensor():
    g = load_zoo(SPEC)
    roles = _roles_by_name(g)
    assert roles["l0.wq"] == roles["l0.wq_new"] == "weights"            # read by forward and backward
    assert roles["l0.wq.master"] == roles["l0.wq.master_new"] == "master weights"   # read by AdamW only
    assert roles["l0.wq.adam_m"] == roles["l0.wq.adam_v_new"] == "optimizer state"
    assert roles["l0.wq.grad"] == "gradients" and roles["l0.h1"] == "activations"
    assert roles["input_ids"] == "other"
    n = Counter(roles.values())
    assert n["weights"] == n["master weights"] and n["optimizer state"] == 2 * n["weights"] + 2   # + the step


def test_breakdown_totals_are_the_plans_and_flag_avoidable_copies():
    g = load_zoo(SPEC)
    dev = get_device("h200")
    t = resolve_op_time(g, dev, None)
    p = plan_graph(g, int(noswap_peak(g) * 0.5), device=dev, planner="swapadvisor-nosearch", workers=1)
    bd = plan_breakdown(g, p, t, dev)
    assert bd["in_bytes"] == p.predicted["swap_in_bytes"] > 0
    assert bd["out_bytes"] == p.predicted["swap_out_bytes"]
    assert set(bd["roles"]) == set(ROLES)
    assert bd["time_s"] == p.predicted["time_s"]
    assert bd["busy_s"]["compute"] == np.float64(t.sum())
    assert bd["bound"]["tight_in_bytes"] <= bd["in_bytes"]
    assert all(r["in_again_bytes"] == 0 and r["out_host_has_bytes"] == 0 for r in bd["roles"].values())
    # the same tensor copied out twice: the second copy is one the host already holds
    i = next(i for i, a in enumerate(p.actions) if a.kind == "swap_out")
    a = p.actions[i]
    twice = replace(p, actions=[*p.actions[:i + 1], Action("swap_out", tensor=a.tensor, obj=a.obj, deps=(i,)),
                                *p.actions[i + 1:]])
    twice.actions = [x if k <= i + 1 else replace(x, deps=tuple(d + (d > i) for d in x.deps))
                     for k, x in enumerate(twice.actions)]
    bd2 = plan_breakdown(g, twice, t, dev)
    role = tensor_roles(g)[a.tensor]
    assert bd2["roles"][role]["out_host_has_bytes"] == g.tensors[a.tensor].nbytes
    assert "bound must move" in format_breakdown(bd2)
