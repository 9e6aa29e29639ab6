"""The simulator and the plan's prediction with recompute actions: a recompute costs its op's time on the
compute stream, and the timeline counts its outputs as memory in use."""
import numpy as np

from tvm_swap.cost.devices import get_device
from tvm_swap.planner.api import predict
from tvm_swap.planner.simulator import simulate
from tvm_swap.planner.timeline import memory_timeline

from recompute_plans import A, rc_plan  # noqa: E402


def test_recompute_costs_its_op_time_on_the_compute_stream():
    g, plan = rc_plan()
    op_time = np.array([1.0, 2.0, 4.0])
    dev = get_device("v100-16gb")
    sim = simulate(g, plan.actions, op_time, dev)
    assert sim.stream_busy_s["compute"] == 1.0 + 2.0 + 1.0 + 4.0   # op0 twice
    i_re = next(i for i, a in enumerate(plan.actions) if a.kind == "recompute")
    assert sim.end[i_re] - sim.start[i_re] == 1.0
    assert sim.start[i_re] >= sim.end[i_re - 2]                     # after op1 on the FIFO compute stream
    pred = predict(g, plan, op_time, dev)
    assert pred["recompute_count"] == 1 and pred["recompute_bytes"] == A and pred["recompute_s"] == 1.0
    plan.predicted = pred
    s = plan.summary()
    assert (s["recompute_count"], s["recompute_bytes"], s["recompute_s"]) == (1, A, 1.0)


def test_timeline_counts_recomputed_outputs():
    g, plan = rc_plan()
    op_time = np.array([1.0, 2.0, 4.0])
    sim = simulate(g, plan.actions, op_time, get_device("v100-16gb"))
    tl = memory_timeline(g, plan, sim)
    i_re = next(i for i, a in enumerate(plan.actions) if a.kind == "recompute")
    t_mid = (sim.start[i_re] + sim.end[i_re]) / 2
    k = int(np.searchsorted(tl["time"], t_mid, side="right")) - 1
    # during the recompute: x, p, b and the rebuilt a are on the device (4 objects of A)
    assert tl["bytes"][k] == 4 * A


def test_the_tight_bound_is_not_claimed_for_plans_that_recompute():
    g, plan = rc_plan()
    pred = predict(g, plan, np.array([1.0, 2.0, 4.0]), get_device("v100-16gb"))
    assert pred["tight_lower_bound_s"] is None and pred["lower_bound_s"] <= pred["time_s"]
