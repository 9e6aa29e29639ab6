"""The offload baselines a user would pick instead (tflms, save-on-cpu, save-on-cpu-async): verified plans on
small graphs, each one's policy, and a clear refusal naming what the policy needs."""
import subprocess
import sys

import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.errors import InfeasibleLimitError
from tvm_swap.planner import plan_graph
from tvm_swap.planner.baselines.offload import saved_activations
from tvm_swap.planner.baselines.tflms import AHEAD_GRID, threshold_grid
from tvm_swap.planner.baselines.vdnn import forward_ops
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.testing import random_op_times, random_training_graph
from tvm_swap.verify import verify_plan

DEV = get_device("v100-16gb")
OFFLOAD = ["tflms", "save-on-cpu", "save-on-cpu-async"]


def graph(seed=3, layers=8):
    g = random_training_graph(seed, n_layers=layers, momentum=True)
    return g, random_op_times(g, seed)


def plan(g, t, planner, limit, **kw):
    return plan_graph(g, limit, device=DEV, op_time=t, planner=planner, workers=1, **kw)


def need_of(g, t, planner):
    """The smallest limit the planner accepts, read from its refusal at half the no-swap peak."""
    with pytest.raises(InfeasibleLimitError) as e:
        plan(g, t, planner, int(noswap_peak(g) * 0.5))
    return e.value.min_feasible


def swapped(p, kind):
    return [a.tensor for a in p.actions if a.kind == kind]


@pytest.mark.parametrize("planner", OFFLOAD)
@pytest.mark.parametrize("seed", [1, 3, 6])
def test_plans_verify_at_their_own_need_and_refuse_below_it(planner, seed):
    g, t = graph(seed)
    need = need_of(g, t, planner)
    assert need > noswap_peak(g) * 0.5
    p = plan(g, t, planner, need)
    assert p.verified and p.planner == planner and verify_plan(g, p, mem_limit=need) == []
    assert p.pool.total_bytes() <= need
    assert p.predicted["time_s"] >= p.predicted["ideal_time_s"] * (1 - 1e-9)
    with pytest.raises(InfeasibleLimitError, match=planner) as e:
        plan(g, t, planner, need - 1)
    assert e.value.min_feasible == need and "raise mem_limit" in str(e.value)


@pytest.mark.parametrize("planner", OFFLOAD)
def test_only_activations_move(planner):
    g, t = graph(3)
    p = plan(g, t, planner, need_of(g, t, planner))
    outs = swapped(p, "swap_out")
    assert outs, "at its own need the policy offloads something"
    moved = {g.tensors[x].kind for x in outs + swapped(p, "swap_in")}
    assert moved <= {"activation", "output", "input"}, moved
    assert not any(g.is_persistent(x) for x in outs + swapped(p, "swap_in"))


def test_save_on_cpu_copies_out_every_saved_activation_once():
    g, t = graph(4)
    saved = saved_activations(g, forward_ops(g))
    for planner in ("save-on-cpu", "save-on-cpu-async"):
        p = plan(g, t, planner, noswap_peak(g) * 2)          # even with room to spare: it is a fixed policy
        outs = swapped(p, "swap_out")
        produced = [x for x in saved if g.producer()[x] >= 0]     # inputs already have a host copy
        assert sorted(x for x in outs if x in saved) == sorted(produced), planner
        assert len(set(outs)) == len(outs), "one copy out per tensor"
        assert set(saved) <= set(swapped(p, "swap_in"))


def test_sync_copies_block_compute_and_cost_time():
    g, t = graph(5, layers=10)
    limit = noswap_peak(g) * 2
    sync, asyn = plan(g, t, "save-on-cpu", limit), plan(g, t, "save-on-cpu-async", limit)
    assert sync.predicted["swap_out_bytes"] == asyn.predicted["swap_out_bytes"]
    assert sync.predicted["time_s"] > asyn.predicted["time_s"], "the side stream hides copies the sync one waits on"
    # every compute after a swap-out waits for it (the synchronous pack hook)
    acts = sync.actions
    for i, a in enumerate(acts):
        if a.kind == "swap_out":
            nxt = next((j for j in range(i + 1, len(acts)) if acts[j].kind == "compute"), None)
            assert nxt is None or i in acts[nxt].deps


def test_tflms_tunes_its_threshold_over_the_grid():
    g, t = graph(3)
    need = need_of(g, t, "tflms")
    p = plan(g, t, "tflms", need, tflms_autotune="off")
    grid = p.search["grid"]
    assert p.search["autotune"] is None
    assert [(r["ahead"], r["threshold"]) for r in grid] == [(a, th) for a in AHEAD_GRID
                                                             for th in threshold_grid(g.num_ops)]
    fitting = [r for r in grid if r["time_s"] is not None]
    assert fitting and all(r["need_bytes"] <= need for r in fitting)
    fastest = min(fitting, key=lambda r: r["time_s"])
    assert (p.search["threshold"], p.search["ahead"]) == (fastest["threshold"], fastest["ahead"])
    assert p.predicted["time_s"] == pytest.approx(min(r["time_s"] for r in fitting))
    # a threshold beyond the graph swaps nothing
    far = plan(g, t, "tflms", noswap_peak(g) * 2, tflms_thresholds=[10 * g.num_ops])
    assert not swapped(far, "swap_out") or set(swapped(far, "swap_out")) <= set(g.outputs)


def test_tflms_autotune_finds_the_largest_fitting_threshold_then_lead():
    """TFLMS 2's auto-tuner (binary searches, see tflms.py): the largest threshold that fits at the shortest lead,
    then the largest lead that fits at it; the plan is the faster of that and the grid's best."""
    from tvm_swap.planner.baselines.offload import PolicyLayout, policy_need
    from tvm_swap.planner.baselines.tflms import tflms_policy
    from tvm_swap.planner.context import PlanningContext

    g, t = graph(5, layers=10)
    limit = int(need_of(g, t, "tflms") * 1.15)
    p = plan(g, t, "tflms", limit)
    tuned = p.search["autotune"]
    assert tuned is not None and tuned["time_s"] is not None and tuned["need_bytes"] <= limit
    ctx = PlanningContext(g, t, DEV, limit)
    layout = PolicyLayout.build(ctx)

    def fits(th, ah):
        return policy_need(ctx, layout, tflms_policy(ctx, layout, th, ah))[0] <= limit

    th, ah, n = tuned["threshold"], tuned["ahead"], g.num_ops
    lo = min(AHEAD_GRID)
    assert fits(th, lo) and (th == n or not fits(th + 1, lo))
    assert fits(th, ah) and (ah == n or not fits(th, ah + 1))
    assert th not in threshold_grid(n), "pick a limit where the grid misses the largest fitting threshold"
    grid_best = min(r["time_s"] for r in p.search["grid"] if r["time_s"] is not None)
    assert p.predicted["time_s"] == pytest.approx(min(grid_best, tuned["time_s"]))
    off = plan(g, t, "tflms", limit, tflms_autotune="off")
    assert off.predicted["time_s"] == pytest.approx(grid_best) and off.search["autotune"] is None


def test_tflms_autotune_search_is_tflms_binary_search():
    from tvm_swap.planner.baselines.tflms import autotune

    calls = []

    def fits(th, ah):
        calls.append((th, ah))
        return th <= 37 and ah <= 5 + (th < 37)

    assert autotune(fits, 1, 1, 100) == (37, 5)
    assert len(calls) <= 2 * 8 + 1                      # two binary searches over [1, 100]
    assert autotune(lambda th, ah: False, 1, 1, 100) is None


def test_inference_graphs_offload_nothing():
    from tvm_swap.zoo import load_zoo

    g = load_zoo("zoo:resnet-152-inference@batch=1")
    t = random_op_times(g, 2)
    for planner in OFFLOAD:
        p = plan(g, t, planner, noswap_peak(g) * 2)
        assert p.verified and p.search["offloaded"] == 0, planner
        assert {g.tensors[x].kind for x in swapped(p, "swap_in")} == {"input"}     # the image, once
        assert set(swapped(p, "swap_out")) == set(g.outputs)                      # the logits


def test_tflms_most_aggressive_setting_needs_the_least():
    """The early refusal rests on this: no grid point needs less than (smallest threshold, shortest lead)."""
    from tvm_swap.planner.baselines.offload import PolicyLayout, policy_need
    from tvm_swap.planner.baselines.tflms import tflms_policy
    from tvm_swap.planner.context import PlanningContext

    for seed in (1, 3, 6):
        g, t = graph(seed)
        ctx = PlanningContext(g, t, DEV, 10**15)
        layout = PolicyLayout.build(ctx)
        grid = threshold_grid(g.num_ops)
        needs = {(a, th): policy_need(ctx, layout, tflms_policy(ctx, layout, th, a))[0]
                 for a in AHEAD_GRID for th in grid}
        assert needs[(min(AHEAD_GRID), min(grid))] == min(needs.values())


def test_bad_tflms_option_is_a_clear_error():
    from tvm_swap.errors import TvmSwapError

    g, t = graph(3)
    with pytest.raises(TvmSwapError, match="tflms"):
        plan(g, t, "tflms", noswap_peak(g), tflms_thresholds=[0])
    with pytest.raises(TvmSwapError, match="tflms_autotune"):
        plan(g, t, "tflms", noswap_peak(g), tflms_autotune="maybe")


def test_cli_takes_the_new_planners(tmp_path):
    g, _ = graph(3)
    path = tmp_path / "g.json"
    g.save(path)
    for planner in OFFLOAD:
        r = subprocess.run([sys.executable, "-m", "tvm_swap.cli", "plan", str(path), "--mem-limit", "200%",
                            "--planner", planner, "-o", str(tmp_path / f"{planner}.json")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([sys.executable, "-m", "tvm_swap.cli", "plan", str(path), "--mem-limit", "1%",
                            "--planner", planner], capture_output=True, text=True)
        assert r.returncode == 1 and "smallest feasible limit" in r.stderr and "Traceback" not in r.stderr


def test_tflms_swap_ins_wait_for_their_control_op():
    """TFLMS gates a swap-in on an op (a control edge): it may not start before the op issued before it ends."""
    g, t = graph(5, layers=10)
    p = plan(g, t, "tflms", need_of(g, t, "tflms"), tflms_thresholds=[2])
    acts = p.actions
    ins = [i for i, a in enumerate(acts) if a.kind == "swap_in"]
    assert ins, "a threshold of 2 ops must swap something"
    for i in ins:
        before = [j for j in range(i) if acts[j].kind == "compute"]
        assert not before or before[-1] in acts[i].deps
    asyn = plan(g, t, "save-on-cpu-async", noswap_peak(g) * 2)       # not gated: a side-stream prefetch
    assert any(not any(acts2.kind == "compute" for acts2 in [asyn.actions[d] for d in a.deps])
               for a in asyn.actions if a.kind == "swap_in")


@pytest.mark.parametrize("planner", ["tflms", "save-on-cpu", "zero-offload"])
def test_a_policys_need_is_walked_once_per_graph_and_is_what_a_fresh_walk_gives(planner, monkeypatch):
    """policy_need keeps its answer with the graph (it depends on no limit and no op times): planned again at
    another limit, the planner does not walk the roomy pool again, and its plans are a fresh graph's."""
    from tvm_swap.graph import DataflowGraph
    from tvm_swap.planner.baselines import offload

    def comparable(p):
        d = p.to_dict()
        d["search"].pop("search_s", None)
        return d

    g, t = graph(5, 10)
    walks = []
    real = offload.PolicyWalker.run_ops
    monkeypatch.setattr(offload.PolicyWalker, "run_ops", lambda self: walks.append(1) or real(self))
    need = need_of(g, t, planner)
    for lim in (need, need + (noswap_peak(g) - need) // 2):
        n0 = len(walks)
        p = plan(g, t, planner, lim)
        n1 = len(walks)
        fresh = plan(DataflowGraph(g.name, g.tensors, g.ops, list(g.outputs), dict(g.updates), dict(g.meta)),
                     t, planner, lim)
        assert comparable(p) == comparable(fresh)
        assert n1 - n0 < len(walks) - n1          # the fresh graph walked its needs again
