"""On the CPU emulation: the runtime runs a host op on the thread that issues the program (its kernel between
tvm_swap.host_begin / host_end), so no compute after it in the plan's order starts before it has run. That is the
rule the simulator's host stream models (planner/host_sim.issue_gates), and why host_split.lift_plan puts the host
ops after every device action."""
from __future__ import annotations

from dataclasses import replace

import tvm_swap
from runtime_ext.trace import stamps
from swap_models import assert_steps_match_unlimited, mlp

FAST = dict(planner="swapadvisor", generations=1, workers=1, profile=False)


def _host_actions(plan):
    host = set(plan.host_ops)
    return [i for i, a in enumerate(plan.actions) if a.kind == "compute" and a.op in host]


def _hoist_first_host_op(plan):
    """The first host op right after its last dep (still a valid plan): device computes now follow it."""
    first = _host_actions(plan)[0]
    at = max(plan.actions[first].deps, default=-1) + 1
    order = list(range(len(plan.actions)))
    order.insert(at, order.pop(first))
    new_of = {old: new for new, old in enumerate(order)}
    acts = [replace(plan.actions[o], deps=tuple(sorted(new_of[d] for d in plan.actions[o].deps))) for o in order]
    return replace(plan, actions=acts)


def test_lifted_plans_run_their_host_ops_last():
    ex = mlp(train=True)
    m = tvm_swap.build(ex.mod, mem_limit="40%", params=ex.params, host_ops="optimizer", **FAST)
    hi = _host_actions(m.plan)
    assert hi == list(range(len(m.plan.actions) - len(hi), len(m.plan.actions)))


def test_no_compute_after_a_host_op_starts_before_it_has_run():
    ex = mlp(train=True)
    m = tvm_swap.build(ex.mod, mem_limit="40%", params=ex.params, host_ops="optimizer",
                       _plan_hook=_hoist_first_host_op, **FAST)
    h = _host_actions(m.plan)[0]
    later = [i for i in range(h + 1, len(m.plan.actions)) if m.plan.actions[i].kind == "compute"
             and m.plan.actions[i].op not in set(m.plan.host_ops)]
    assert later, "the hoisted host op has no device compute after it"
    m.executor.trace = True
    assert_steps_match_unlimited(m, ex.mod, list(ex.inputs.values()), list(ex.params.values()), steps=2,
                                 what="a host op before device computes: ")
    st = stamps(m.executor.traces[-1])
    for d in m.plan.actions[h].deps:                 # it waited for the copies out it reads
        assert st[h]["start"] >= st[d]["end"]
    # and the thread issued nothing after it until it had run (a compute is stamped where it waits or records
    # an event: the call sites the program has for it)
    seen = [i for i in later if st.get(i)]
    assert seen
    for i in seen:
        assert min(st[i].values()) >= st[h]["end"], (i, st[i], st[h])
