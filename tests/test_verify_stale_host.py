"""A swap-in must read a current host copy: an updated param (or optimizer state) kept on the device between
iterations has, from the second iteration on, an old value on the host unless its update is copied out (the
runtime renames that copy to the param's) or the param itself is copied out, before the read, this iteration.
The verifier refuses the read otherwise; odswap and vdnn, which do read kept params back, pay for the copy-out."""
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.limits.mem_limit import no_swap_bytes
from tvm_swap.plan import Action, Plan, Pool, aligned_bytes
from tvm_swap.planner import plan_graph
from tvm_swap.planner.builder import ActionBuilder
from tvm_swap.planner.simulator import simulate
from tvm_swap.testing import random_op_times, random_training_graph
from tvm_swap.verify import verify_plan


def kept_plan(g, reread: int, copy: str | None = None) -> Plan:
    """Graph order; every used tensor in an exact-size object of its own; params and optimizer state start
    resident and their updates stay resident (periodic by size class). `reread` leaves the device after its
    first reader and is swapped back in for the next. copy: None (nothing copied out: a stale host read),
    "param" (reread copied out before it leaves), "update" (its update copied out once computed)."""
    used = g.used_tensors()
    size = {t: aligned_bytes(g.tensors[t].nbytes, 256) for t in used}
    sizes = sorted(set(size.values()))
    counts = [sum(1 for t in used if size[t] == s) for s in sizes]
    first = [sum(counts[:c]) for c in range(len(sizes))]
    seen = [0] * len(sizes)
    obj, cls = {}, [-1] * g.num_tensors
    for t in used:
        c = sizes.index(size[t])
        cls[t], obj[t] = c, first[c] + seen[c]
        seen[c] += 1
    last = {}
    for o, op in enumerate(g.ops):
        for t in op.inputs:
            last[t] = o
    update = {old: new for new, old in g.updates.items()}[reread]
    b = ActionBuilder(g, sum(counts))
    kept = [t for t in used if g.is_persistent(t)]
    for p in kept:
        b.place_initial(p, obj[p])
    back = False
    for o, op in enumerate(g.ops):
        for t in dict.fromkeys(op.inputs):
            if not b.is_resident(t):
                b.swap_in(t, obj[t])
                back = back or t == reread
        b.compute(o, [obj[t] for t in op.outputs])
        for t in op.outputs:
            if (t in g.outputs and t not in g.updates) or (t == update and copy == "update"):
                b.swap_out(t)
        for t in dict.fromkeys((*op.inputs, *op.outputs)):
            if last.get(t, -1) <= o and b.is_resident(t) and t not in g.updates:
                b.drop(t)
            elif t == reread and not back and b.is_resident(t):
                if copy == "param":
                    b.swap_out(t)
                b.drop(t)
    pool = Pool(sizes, counts, 256, 0)
    return Plan(g.name, g.fingerprint(), "hand", pool.total_bytes(), {}, list(range(g.num_ops)), pool, cls,
                [(p, obj[p]) for p in kept], b.actions)


@pytest.fixture(scope="module")
def graph():
    g = random_training_graph(3, n_layers=3, momentum=True)
    assert not any(op.workspace for op in g.ops)
    return g


def _w1(g):
    return next(t for t in range(g.num_tensors) if g.tensors[t].name == "W1")


def test_a_kept_param_read_back_from_a_stale_host_copy_is_refused(graph):
    plan = kept_plan(graph, _w1(graph))
    assert any(a.kind == "swap_in" and a.tensor == _w1(graph) for a in plan.actions)
    v = verify_plan(graph, plan)
    assert len(v) == 1, v
    assert "reads a stale host copy of 'W1'" in v[0] and "'W1_new' is never copied out" in v[0]
    assert "it is not swapped out before it" in v[0]


def test_a_copy_out_that_the_read_does_not_wait_for_does_not_count():
    """x (input), p (param); op0: a = f(x, p); op1: b, p_new = g(a, p). p starts in o3, is copied out and
    dropped after op0, and comes back into o4: only if that swap-in waits for the copy-out."""
    A = 1024
    kinds = [("x", "input"), ("p", "param"), ("a", "activation"), ("b", "output"), ("p_new", "output")]
    g = DataflowGraph("hand", [TensorInfo(i, n, A, (A // 4,), "float32", k) for i, (n, k) in enumerate(kinds)],
                      [OpInfo(0, "f", "f", (0, 1), (2,)), OpInfo(1, "g", "g", (2, 1), (3, 4))],
                      outputs=[3, 4], updates={4: 1})

    def plan(swap_in_deps):
        acts = [
            Action("swap_in", tensor=0, obj=0),                      # 0: x
            Action("compute", op=0, deps=(0,), out_objs=(1,)),       # 1: a -> o1
            Action("swap_out", tensor=1, obj=3),                     # 2: p's copy out (current this iteration)
            Action("drop", tensor=0, obj=0, deps=(1,)),              # 3
            Action("drop", tensor=1, obj=3, deps=(1, 2)),            # 4
            Action("swap_in", tensor=1, obj=4, deps=swap_in_deps),   # 5: p back, into o4
            Action("compute", op=1, deps=(3, 5), out_objs=(2, 0)),   # 6: b -> o2, p_new -> o0 (stays)
            Action("drop", tensor=2, obj=1, deps=(6,)),              # 7
            Action("swap_out", tensor=3, obj=2, deps=(6,)),          # 8
            Action("drop", tensor=3, obj=2, deps=(8,)),              # 9
            Action("drop", tensor=1, obj=4, deps=(6,)),              # 10
        ]
        return Plan("hand", g.fingerprint(), "hand", 5 * A, {}, [0, 1], Pool([A], [5]), [0] * 5, [(1, 3)], acts)

    assert verify_plan(g, plan((2,))) == []
    v = verify_plan(g, plan(()))
    assert len(v) == 1 and "stale host copy of 'p'" in v[0] and "(actions 2) do not complete before it" in v[0], v


@pytest.mark.parametrize("copy", ["param", "update"])
def test_a_copy_out_of_the_param_or_of_its_update_makes_the_host_copy_current(graph, copy):
    plan = kept_plan(graph, _w1(graph), copy=copy)
    assert verify_plan(graph, plan) == []
    # ... and it is charged: the simulated d2h stream is busy at least W1's bytes at the one-way rate longer
    bad = kept_plan(graph, _w1(graph))
    t, dev = random_op_times(graph, 0), get_device("v100-16gb")
    extra = (simulate(graph, plan.actions, t, dev).stream_busy_s["d2h"]
             - simulate(graph, bad.actions, t, dev).stream_busy_s["d2h"])
    assert extra >= graph.tensors[_w1(graph)].nbytes / dev.d2h_bandwidth * (1 - 1e-9)   # W1_new: W1's size


def test_only_an_initial_resident_has_a_stale_host_copy(graph):
    """A param that is not kept between iterations lives on the host, which holds its current value."""
    w1 = _w1(graph)
    plan = kept_plan(graph, w1)
    plan.initial_residents = [(t, o) for t, o in plan.initial_residents if t != w1]   # bring it in first
    o = next(a.obj for a in plan.actions if a.kind == "swap_in" and a.tensor == w1)
    shifted = [Action(a.kind, a.op, a.tensor, a.obj, tuple(d + 1 for d in a.deps), a.out_objs)
               for a in plan.actions]
    plan.actions = [Action("swap_in", tensor=w1, obj=o)] + shifted
    v = verify_plan(graph, plan)
    assert not any("stale" in x for x in v), v


@pytest.mark.parametrize("planner", ["odswap", "vdnn"])
def test_baselines_copy_a_kept_param_out_before_reading_it_back(planner):
    """odswap and vdnn keep updated params and evict some under pressure: each eviction copies the param out
    (charged in the plan); without that copy the verifier refuses the plan."""
    g = random_training_graph(3, n_layers=6, momentum=True)
    plan = plan_graph(g, int(0.7 * no_swap_bytes(g, 256)), planner=planner, op_time=random_op_times(g, 3),
                      workers=1)
    update = {old: new for new, old in g.updates.items()}
    kept = {t for t, _ in plan.initial_residents if t in update}
    back = [i for i, a in enumerate(plan.actions) if a.kind == "swap_in" and a.tensor in kept]
    assert back, "the case no longer reads a kept param back: pick another"
    p = plan.actions[back[0]].tensor
    outs = [i for i, a in enumerate(plan.actions) if a.kind == "swap_out" and a.tensor == p]
    assert outs and outs[0] < back[0]
    assert not any(a.kind == "swap_out" and a.tensor == update[p] for a in plan.actions)
    bad = Plan.from_dict(plan.to_dict())
    acts = []
    for j, a in enumerate(bad.actions):        # delete the param's copies out (deps on them go, indices shift)
        if j in outs:
            continue
        deps = tuple(d - sum(1 for k in outs if k < d) for d in a.deps if d not in outs)
        acts.append(Action(a.kind, a.op, a.tensor, a.obj, deps, a.out_objs))
    bad.actions = acts
    assert any(f"reads a stale host copy of {g.tensors[p].name!r}" in x for x in verify_plan(g, bad))
