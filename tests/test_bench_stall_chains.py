"""bench.stall_chains: every compute stall gets one cause, so the causes sum to the stalls stall_breakdown counts,
on arena plans of random training graphs at tight limits (where swap-ins come late)."""
import pytest

from bench.stall_breakdown import breakdown
from bench.stall_chains import chains
from tvm_swap.cost.devices import get_device
from tvm_swap.planner.feasibility import min_feasible_limit
from tvm_swap.testing import random_op_times, random_training_graph

DEV = get_device("v100-16gb")


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_the_causes_sum_to_the_stalls(seed):
    from tvm_swap.planner.api import plan_graph

    g = random_training_graph(seed, n_layers=4 + seed % 3, momentum=seed % 2 == 1)
    t = random_op_times(g, seed, flops_per_s=1e14)    # fast kernels: the link is the bottleneck, so stalls
    plan = plan_graph(g, int(min_feasible_limit(g) * 1.1), device=DEV, op_time=t, planner="swapadvisor-nosearch",
                      pool="arena")
    got = chains(g, plan.actions, t, DEV)
    want = sum(breakdown(g, plan.actions, t, DEV)["stalls"].values())
    assert want > 0
    assert sum(got.values()) == pytest.approx(want, rel=1e-9, abs=1e-15)
    assert all(v > 0 for v in got.values())


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_removing_waits_for_bytes_keeps_the_plan_and_never_slows_it(seed):
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.planner.simulator import simulate

    from bench.stall_chains import relaxed

    g = random_training_graph(seed, n_layers=4 + seed % 3, momentum=seed % 2 == 1)
    t = random_op_times(g, seed, flops_per_s=1e14)
    plan = plan_graph(g, int(min_feasible_limit(g) * 1.1), device=DEV, op_time=t, planner="swapadvisor-nosearch",
                      pool="arena")
    got = relaxed(g, plan.actions, t, DEV)
    assert got["as planned"] == pytest.approx(simulate(g, plan, t, DEV).time_s, rel=1e-12)
    eps = 1e-12 * got["as planned"]
    assert got["drops not waiting for copies out"] <= got["as planned"] + eps
    assert got["no arrival waiting for bytes"] <= got["swap-ins not waiting for bytes"] + eps <= got["as planned"] + 2 * eps


@pytest.mark.parametrize("seed", [0, 3])
def test_the_windows_add_up_to_the_plans_stalls_and_bytes(seed):
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.planner.arena_usage import held_after_kernels

    from bench.stall_chains import windows

    g = random_training_graph(seed, n_layers=4 + seed % 3, momentum=seed % 2 == 1)
    t = random_op_times(g, seed, flops_per_s=1e14)
    plan = plan_graph(g, int(min_feasible_limit(g) * 1.1), device=DEV, op_time=t, planner="swapadvisor-nosearch",
                      pool="arena")
    rows = windows(plan, g, t, DEV, 7)
    assert len(rows) == 7 and rows[0]["from_s"] == 0.0
    assert rows[-1]["to_s"] == pytest.approx(plan.predicted["time_s"], rel=1e-12)
    assert sum(r["stall_s"] for r in rows) == pytest.approx(sum(breakdown(g, plan.actions, t, DEV)["stalls"].values()),
                                                            rel=1e-9, abs=1e-15)
    assert sum(r["h2d_gb"] for r in rows) * 1e9 == pytest.approx(plan.predicted["swap_in_bytes"], rel=1e-9)
    assert sum(r["d2h_gb"] for r in rows) * 1e9 == pytest.approx(plan.predicted["swap_out_bytes"], rel=1e-9)
    assert max(r["held_gib"] for r in rows) * 2 ** 30 == held_after_kernels(plan).max()
    assert all(0.0 <= r[k] <= 1.0 + 1e-9 for r in rows for k in ("h2d_busy", "d2h_busy"))
