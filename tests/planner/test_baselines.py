"""The baseline planners (noswap, odswap, vdnn): valid plans at any feasible limit, and each one's policy."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvm_swap.cost.devices import get_device
from tvm_swap.errors import InfeasibleLimitError
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.planner.baselines.common import default_pool
from tvm_swap.plan import aligned_bytes
from tvm_swap.planner.registry import BASELINE_NAMES, PLANNERS
from tvm_swap.planner.baselines import (forward_ops, noswap_need, offload_candidates, plan_noswap,
                                        plan_odswap, plan_vdnn)
from tvm_swap.planner.bounds import ideal_time, lower_bound
from tvm_swap.planner.context import PlanningContext
from tvm_swap.planner.simulator import simulate
from tvm_swap.testing import random_dag, random_op_times, random_training_graph
from tvm_swap.verify import check_plan

DEV = get_device("v100-16gb")
A = 256
S = 1 << 20   # one size for hand graphs, so a class is "objects of S bytes"


def ctx_for(g, limit, **kw):
    return PlanningContext(g, random_op_times(g, 0), DEV, int(limit), **kw)


def make_graph(spec, outputs, updates=None, kernels=None):
    """spec: tensors as (name, kind[, nbytes]); ops as (name, [input names], [output names])."""
    tensors_spec, ops_spec = spec
    ids = {}
    tensors = []
    for i, (name, kind, *nb) in enumerate(tensors_spec):
        ids[name] = i
        tensors.append(TensorInfo(i, name, nb[0] if nb else S, (1,), "float32", kind))
    ops = [OpInfo(i, name, (kernels or {}).get(name, name), tuple(ids[x] for x in ins), tuple(ids[x] for x in outs),
                  flops=1e6)
           for i, (name, ins, outs) in enumerate(ops_spec)]
    g = DataflowGraph("hand", tensors, ops, [ids[x] for x in outputs],
                      {ids[n]: ids[o] for n, o in (updates or {}).items()})
    g.validate()
    return g


def training_graph(seed, layers=30):
    return random_training_graph(seed, n_layers=layers, momentum=seed % 2 == 1)


def liveness_peak(g, alignment=A):
    """Brute force: the most aligned bytes alive at once on the default schedule when nothing is swapped.
    Arguments (params, inputs) live the whole call, results (outputs, updates) from production to the end,
    everything else from production to its last use."""
    n = g.num_ops
    prod = g.producer()
    results = set(g.outputs) | set(g.updates)
    peak = 0
    for i in range(n):
        live = 0
        for t in g.used_tensors():
            uses = [j for j, op in enumerate(g.ops) if t in op.inputs or t in op.outputs]
            start = 0 if prod[t] < 0 else uses[0]
            end = n - 1 if (prod[t] < 0 or t in results) else uses[-1]
            if start <= i <= end:
                live += aligned_bytes(g.tensors[t].nbytes, alignment)
        peak = max(peak, live)
    return peak


# ---------------------------------------------------------------- every baseline, every limit
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("frac", [1.0, 0.6, 0.35])
@pytest.mark.parametrize("name", BASELINE_NAMES)
def test_baselines_verify_on_training_graphs(name, frac, seed):
    g = training_graph(seed)
    limit = int(noswap_need(g, A) * frac)
    ctx = ctx_for(g, limit)
    if name == "noswap" and frac < 1.0:
        with pytest.raises(InfeasibleLimitError) as e:
            plan_noswap(ctx)
        assert e.value.min_feasible == noswap_need(g, A)
        return
    if name in ("tflms", "save-on-cpu", "save-on-cpu-async", "zero-offload", "checkpoint-sqrt"):
        # fixed policies (the first three keep weights, gradients and optimizer state on the device,
        # zero-offload every activation): below their need they refuse, naming a limit that is enough
        try:
            plan = PLANNERS[name](ctx)
        except InfeasibleLimitError as e:
            assert e.min_feasible > limit
            limit = e.min_feasible
            ctx = ctx_for(g, limit)
            plan = PLANNERS[name](ctx)
    else:
        plan = PLANNERS[name](ctx)
    assert plan.planner == name and plan.predicted == {}
    assert plan.pool.total_bytes() <= limit
    check_plan(g, plan)
    sim = simulate(g, plan, ctx.op_time, DEV)
    assert sim.time_s >= ideal_time(g, ctx.op_time) * (1 - 1e-9)   # never faster than unlimited memory
    assert sim.time_s >= lower_bound(g, ctx.op_time, DEV, limit) * (1 - 1e-9)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), frac=st.floats(0.05, 1.2), training=st.booleans(),
       name=st.sampled_from(["noswap", "odswap", "vdnn"]))
def test_baselines_verify_or_name_their_minimum(seed, frac, training, name):
    """Any graph, any limit: a verified plan within the limit, or InfeasibleLimitError whose minimum works."""
    if training:
        g = random_training_graph(seed, n_layers=3 + seed % 12, momentum=seed % 3 == 0)
    else:
        g = random_dag(seed, n_ops=5 + seed % 40, update_prob=0.5, workspace_prob=0.3)
    limit = max(1, int(noswap_need(g, A) * frac))
    try:
        plan = PLANNERS[name](ctx_for(g, limit))
    except InfeasibleLimitError as e:
        assert e.min_feasible > limit
        plan = PLANNERS[name](ctx_for(g, e.min_feasible))  # the named minimum is enough
        limit = e.min_feasible
    assert plan.pool.total_bytes() <= limit
    check_plan(g, plan)


@pytest.mark.parametrize("name", ["odswap", "vdnn"])
def test_pool_floor_is_the_named_minimum(name):
    g = random_dag(3, n_ops=30, update_prob=0.5, workspace_prob=0.3)
    floor = default_pool(ctx_for(g, 10**15)).min_bytes()
    with pytest.raises(InfeasibleLimitError) as e:
        PLANNERS[name](ctx_for(g, floor - 1))
    assert e.value.min_feasible == floor
    check_plan(g, PLANNERS[name](ctx_for(g, floor)))


# ---------------------------------------------------------------- default_pool
def test_default_pool_grows_between_floor_and_no_eviction_count():
    g = training_graph(4)
    big = default_pool(ctx_for(g, 10**15))
    assert big.pool.class_count == big.max_count              # unlimited: nothing ever evicts
    for frac in (0.3, 0.5, 0.7, 0.9):
        lay = default_pool(ctx_for(g, big.pool.total_bytes() * frac))
        assert lay.pool.total_bytes() <= big.pool.total_bytes() * frac
        assert all(lo <= c <= hi for lo, c, hi in zip(lay.min_count, lay.pool.class_count, lay.max_count))
        # what the rounding left is less than the smallest class that could still grow
        spare = big.pool.total_bytes() * frac - lay.pool.total_bytes()
        growable = [b for b, c, hi in zip(lay.pool.class_bytes, lay.pool.class_count, lay.max_count) if c < hi]
        assert not growable or spare < min(growable)


def test_default_pool_classes_are_exact_sizes_with_one_op_floor():
    g = make_graph(([("x", "input", 1000), ("a", "activation", 5000), ("b", "activation", 1000),
                     ("c", "output", 5000)],
                    [("f", ["x"], ["a", "b"]), ("g", ["a", "b"], ["c"])]), outputs=["c"])
    lay = default_pool(ctx_for(g, 10**9))
    assert lay.pool.class_bytes == [1024, 5120]
    assert lay.min_count == [2, 2]   # op f: x, b in 1024; op g: a, c in 5120


# ---------------------------------------------------------------- noswap
def test_noswap_is_the_liveness_peak_on_hand_graphs():
    chain = make_graph(([("x", "input"), ("w", "param"), ("a", "activation"), ("b", "activation"),
                         ("c", "activation"), ("y", "output")],
                        [("f1", ["x", "w"], ["a"]), ("f2", ["a"], ["b"]), ("f3", ["b", "w"], ["c"]),
                         ("f4", ["c"], ["y"])]), outputs=["y"])
    diamond = make_graph(([("x", "input"), ("a", "activation"), ("b", "activation"), ("c", "activation"),
                           ("d", "activation"), ("y", "output")],
                          [("f", ["x"], ["a"]), ("g", ["a"], ["b"]), ("h", ["a"], ["c"]), ("i", ["b"], ["d"]),
                           ("j", ["c", "d"], ["y"])]), outputs=["y"])
    train = make_graph(([("x", "input"), ("w", "param"), ("h", "activation"), ("loss", "output"),
                         ("dh", "gradient"), ("dw", "gradient"), ("w2", "output")],
                        [("fwd", ["x", "w"], ["h"]), ("loss", ["h"], ["loss"]), ("lgrad", ["h"], ["dh"]),
                         ("bwd", ["dh", "x", "w"], ["dw"]), ("sgd", ["w", "dw"], ["w2"])]),
                       outputs=["loss", "w2"], updates={"w2": "w"})
    for g in (chain, diamond, train):
        need = noswap_need(g, A)
        assert need == liveness_peak(g), g.ops
        plan = plan_noswap(ctx_for(g, need))
        assert plan.pool.total_bytes() == need
        check_plan(g, plan)
    assert noswap_need(chain, A) == 4 * S       # x and w all along, and two tensors at a time
    assert noswap_need(train, A) == 5 * S       # x, w and loss, plus h and dh; then dw and w2 take their storage


@pytest.mark.parametrize("seed", [0, 1, 5])
def test_noswap_reuses_storage(seed):
    g = training_graph(seed)
    need = noswap_need(g, A)
    assert need < sum(aligned_bytes(t.nbytes, A) for t in g.tensors)
    assert need >= liveness_peak(g)        # no placement beats the peak of what is alive


def test_noswap_moves_only_inputs_and_results_when_params_are_fixed():
    g = random_training_graph(2, n_layers=12, with_updates=False)
    plan = plan_noswap(ctx_for(g, noswap_need(g, A)))
    check_plan(g, plan)
    stats = plan.swap_stats(g.tensor_bytes())
    inputs = sum(t.nbytes for t in g.tensors if t.kind == "input")
    results = sum(g.tensors[t].nbytes for t in g.outputs)
    assert stats["swap_in_bytes"] == inputs        # params stay, nothing is re-fetched
    assert stats["swap_out_bytes"] == results
    assert {t for t, _ in plan.initial_residents} == {t.id for t in g.tensors if t.kind == "param"}


def test_noswap_keeps_updated_params_on_the_device():
    # periodicity per size class: each update ends in another object of its param's class, no param traffic
    g = random_training_graph(2, n_layers=12, momentum=True)
    plan = plan_noswap(ctx_for(g, noswap_need(g, A)))
    check_plan(g, plan)
    persistent = {t for t in g.used_tensors() if g.is_persistent(t)}
    assert {t for t, _ in plan.initial_residents} == persistent
    assert not any(a.kind == "swap_in" and a.tensor in persistent for a in plan.actions)
    assert not any(a.kind == "swap_out" and a.tensor in g.updates for a in plan.actions)
    assert plan.next_object_map(g.updates, g.op_outputs()) != list(range(plan.pool.num_objects))


def test_noswap_names_its_need():
    g = training_graph(0, layers=8)
    need = noswap_need(g, A)
    with pytest.raises(InfeasibleLimitError, match="noswap keeps everything resident") as e:
        plan_noswap(ctx_for(g, need - 1))
    assert e.value.min_feasible == need


# ---------------------------------------------------------------- odswap
def lru_graph():
    """With 3 objects, op3's output finds x (last used at op1), a (at op2) and b resident: LRU evicts x,
    although a is needed later (op5) than x (op4), so furthest-next-use would evict a. Afterwards at most
    3 tensors are alive, so nothing else is evicted."""
    return make_graph(([("in", "input"), ("x", "activation"), ("a", "activation"), ("b", "activation"),
                        ("c", "output"), ("d", "activation"), ("e", "output")],
                       [("op0", ["in"], ["x"]), ("op1", ["x"], ["a"]), ("op2", ["a"], ["b"]),
                        ("op3", ["b"], ["c"]), ("op4", ["x"], ["d"]), ("op5", ["a", "d"], ["e"])]),
                      outputs=["c", "e"])


def test_odswap_evicts_least_recently_used():
    g = lru_graph()
    x, a = 1, 2
    plan = plan_odswap(ctx_for(g, 3 * aligned_bytes(S, A)))
    check_plan(g, plan)
    assert plan.pool.class_count == [3]
    kinds = [(act.kind, act.tensor) for act in plan.actions if act.kind != "compute"]
    assert ("swap_out", x) in kinds and ("swap_in", x) in kinds
    assert ("swap_out", a) not in kinds and ("swap_in", a) not in kinds
    op3 = next(i for i, act in enumerate(plan.actions) if act.kind == "compute" and act.op == 3)
    out_x = next(i for i, act in enumerate(plan.actions) if act.kind == "swap_out" and act.tensor == x)
    assert out_x < op3


def test_odswap_prefetches_one_op_ahead_into_free_objects():
    # An input used late: with room to spare it is swapped in while the op before its user runs.
    g = make_graph(([("x", "input"), ("w", "input"), ("a", "activation"), ("b", "activation"),
                     ("y", "output")],
                    [("f", ["x"], ["a"]), ("g", ["a"], ["b"]), ("h", ["b", "w"], ["y"])]), outputs=["y"])
    plan = plan_odswap(ctx_for(g, 10 * aligned_bytes(S, A)))
    check_plan(g, plan)
    w_in = next(i for i, act in enumerate(plan.actions) if act.kind == "swap_in" and act.tensor == 1)
    g_op = next(i for i, act in enumerate(plan.actions) if act.kind == "compute" and act.op == 1)
    assert w_in < g_op      # issued before op g, so it overlaps g instead of stalling h
    no_pf = plan_odswap(ctx_for(g, 10 * aligned_bytes(S, A), options={"odswap_prefetch": False}))
    w_in2 = next(i for i, act in enumerate(no_pf.actions) if act.kind == "swap_in" and act.tensor == 1)
    assert w_in2 > g_op


@pytest.mark.parametrize("seed", [0, 3])
def test_odswap_slower_as_memory_shrinks(seed):
    g = training_graph(seed)
    t = random_op_times(g, 0)
    need = noswap_need(g, A)
    times = []
    for frac in (1.0, 0.35):
        ctx = PlanningContext(g, t, DEV, int(need * frac))
        plan = plan_odswap(ctx)
        times.append(simulate(g, plan, t, DEV).time_s)
    assert times[0] >= ideal_time(g, t) * (1 - 1e-9)
    assert times[1] > times[0]


# ---------------------------------------------------------------- vdnn
def cnn_graph():
    """Two conv layers + a loss; backward reads each conv's input again."""
    return make_graph(
        ([("x", "input"), ("w1", "param"), ("w2", "param"), ("h1", "activation"), ("h2", "activation"),
          ("y", "input"), ("loss", "output"), ("dh2", "gradient"), ("dh1", "gradient"), ("dw2", "gradient"),
          ("dw1", "gradient"), ("w1n", "output"), ("w2n", "output")],
         [("conv1", ["x", "w1"], ["h1"]), ("conv2", ["h1", "w2"], ["h2"]), ("loss", ["h2", "y"], ["loss"]),
          ("loss_grad", ["h2", "y"], ["dh2"]), ("conv2_grad", ["dh2", "h1", "w2"], ["dh1", "dw2"]),
          ("conv1_grad", ["dh1", "x", "w1"], ["dw1"]), ("sgd1", ["w1", "dw1"], ["w1n"]),
          ("sgd2", ["w2", "dw2"], ["w2n"])]),
        outputs=["loss", "w1n", "w2n"], updates={"w1n": "w1", "w2n": "w2"},
        kernels={"conv1": "fused_conv2d_add_relu", "conv2": "fused_conv2d_add_relu",
                 "conv2_grad": "conv2d_backward", "conv1_grad": "conv2d_backward"})


def test_vdnn_finds_forward_and_layer_inputs():
    g = cnn_graph()
    assert forward_ops(g) == {0, 1, 2}
    assert offload_candidates(g, forward_ops(g)) == [0, 3]      # x and h1 (conv inputs backward needs)
    # Without layer kernels, every forward activation backward needs (h1 and h2).
    plain = make_graph(([("x", "input"), ("h1", "activation"), ("h2", "activation"), ("loss", "output"),
                         ("d", "output")],
                        [("f1", ["x"], ["h1"]), ("f2", ["h1"], ["h2"]), ("l", ["h2"], ["loss"]),
                         ("b", ["h2", "h1"], ["d"])]), outputs=["loss", "d"])
    assert offload_candidates(plain, forward_ops(plain)) == [1, 2]


def test_vdnn_offloads_in_forward_and_prefetches_in_backward():
    g = cnn_graph()
    plan = plan_vdnn(ctx_for(g, 10**9))
    check_plan(g, plan)
    pos = {}
    for i, act in enumerate(plan.actions):
        pos.setdefault((act.kind, act.op if act.kind == "compute" else act.tensor), []).append(i)
    loss_op, conv2_grad, conv1_grad = pos[("compute", 2)][0], pos[("compute", 4)][0], pos[("compute", 5)][0]
    h1, x = 3, 0
    # h1 is copied out during forward (while conv2 runs) and dropped before the loss
    assert pos[("swap_out", h1)][0] < pos[("compute", 1)][0]
    assert pos[("drop", h1)][0] < loss_op
    # and swapped back in during backward one layer ahead: while loss_grad, the layer before its user, runs
    loss_grad = pos[("compute", 3)][0]
    assert loss_op < pos[("swap_in", h1)][0] < loss_grad
    # x (an input: the host has it) is only dropped in forward, then prefetched while conv2_grad runs
    assert ("swap_out", x) not in pos
    assert pos[("drop", x)][0] < loss_op
    assert loss_grad < pos[("swap_in", x)][-1] < conv2_grad < conv1_grad


@pytest.mark.parametrize("seed", [0, 1])
def test_vdnn_offloads_layer_inputs_on_training_graphs(seed):
    g = training_graph(seed)
    plan = plan_vdnn(ctx_for(g, noswap_need(g, A)))
    check_plan(g, plan)
    fwd = forward_ops(g)
    loss_action = next(i for i, a in enumerate(plan.actions) if a.kind == "compute" and a.op == max(fwd))
    out_fwd = {a.tensor for a in plan.actions[:loss_action] if a.kind == "swap_out"}
    in_bwd = {a.tensor for a in plan.actions[loss_action:] if a.kind == "swap_in"}
    produced = [t for t in offload_candidates(g, fwd) if g.producer()[t] >= 0]
    assert produced and set(produced) <= out_fwd and set(produced) <= in_bwd


def test_vdnn_falls_back_at_tight_limits():
    # Fixed params that cannot all stay: swapped in per layer; what still does not fit is evicted on demand.
    g = random_training_graph(2, n_layers=30, with_updates=False)
    floor = default_pool(ctx_for(g, 10**15)).min_bytes()
    plan = plan_vdnn(ctx_for(g, floor))
    check_plan(g, plan)
    assert plan.search["params_resident"] is False
    params = {t.id for t in g.tensors if t.kind == "param"}
    assert len([a for a in plan.actions if a.kind == "swap_in" and a.tensor in params]) > len(params)
    roomy = plan_vdnn(ctx_for(g, 2 * noswap_need(g, A)))
    assert roomy.search["params_resident"] is True


# ---------------------------------------------------------------- the periodic start state
@pytest.mark.parametrize("name", [n for n in BASELINE_NAMES if n != "zero-offload"])
def test_params_stay_resident_when_memory_allows(name):
    """With room to spare and params nothing updates (inference), every param is an initial resident (but for
    zero-offload, whose policy keeps every param on the host: tests/planner/test_baselines_zero_offload.py)."""
    g = random_training_graph(6, n_layers=10, with_updates=False)
    plan = PLANNERS[name](ctx_for(g, 4 * noswap_need(g, A)))
    check_plan(g, plan)
    params = {t.id for t in g.tensors if t.kind == "param"}
    assert {t for t, _ in plan.initial_residents} == params
    swapped_params = {a.tensor for a in plan.actions if a.kind == "swap_in"} & params
    assert not swapped_params
