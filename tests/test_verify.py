"""The independent verifier: it accepts correct plans and names each broken invariant.

Each corruption test starts from a plan the verifier accepts, breaks exactly one invariant and
checks that a violation about that invariant is reported."""
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_swap.errors import VerificationError
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.plan import Action, Plan, Pool
from tvm_swap.testing import (random_dag, random_topological_order, random_training_graph,
                              simple_plan_for)
from tvm_swap.verify import _vector_clocks, check_plan, verify_plan

A = 1024  # every tensor of the hand-made graphs has this many bytes


def copy(plan: Plan) -> Plan:
    return Plan.from_dict(plan.to_dict())


def remove_action(plan: Plan, i: int) -> Plan:
    """Delete action i; deps on it disappear, later indices shift down."""
    acts = []
    for j, a in enumerate(plan.actions):
        if j == i:
            continue
        deps = tuple(d - (d > i) for d in a.deps if d != i)
        acts.append(Action(a.kind, a.op, a.tensor, a.obj, deps, a.out_objs))
    p = copy(plan)
    p.actions = acts
    return p


def with_action(plan: Plan, i: int, **changes) -> Plan:
    p = copy(plan)
    a = p.actions[i]
    fields = dict(kind=a.kind, op=a.op, tensor=a.tensor, obj=a.obj, deps=a.deps, out_objs=a.out_objs)
    fields.update(changes)
    p.actions[i] = Action(**fields)
    return p


def reported(graph, plan, *needles):
    v = verify_plan(graph, plan)
    assert v, "the corrupted plan was accepted"
    text = "\n".join(v)
    for n in needles:
        assert n in text, f"expected a violation mentioning {n!r}, got:\n{text}"
    return v


# ---------------------------------------------------------------- hand-made graphs and plans
def hand_graph(update=False):
    """x (input), p (param); op0: a = f(x); op1: b = g(a, p), b is the output.
    With update=True, op1 also writes p_new, which replaces p."""
    kinds = [("x", "input"), ("p", "param"), ("a", "activation"), ("b", "output")]
    if update:
        kinds.append(("p_new", "output"))
    tensors = [TensorInfo(i, n, A, (A // 4,), "float32", k) for i, (n, k) in enumerate(kinds)]
    ops = [OpInfo(0, "f", "f", (0,), (2,)), OpInfo(1, "g", "g", (2, 1), (3, 4) if update else (3,))]
    return DataflowGraph("hand", tensors, ops, outputs=[3, 4] if update else [3],
                         updates={4: 1} if update else {})


def hand_plan(graph, actions, n_objects=4, residents=()):
    return Plan("hand", graph.fingerprint(), "hand", n_objects * A, {}, [0, 1],
                Pool([A], [n_objects]), [0] * graph.num_tensors, list(residents), actions)


X, P, ACT, B, PNEW = 0, 1, 2, 3, 4


def reuse_plan():
    """x in o0; after op0, o0 is reused by p's swap-in, which must wait for x's drop."""
    g = hand_graph()
    acts = [
        Action("swap_in", tensor=X, obj=0),                 # 0
        Action("compute", op=0, deps=(0,), out_objs=(1,)),  # 1: a -> o1
        Action("drop", tensor=X, obj=0, deps=(1,)),         # 2
        Action("swap_in", tensor=P, obj=0, deps=(2,)),      # 3: reuses o0
        Action("compute", op=1, deps=(3,), out_objs=(2,)),  # 4: b -> o2
        Action("drop", tensor=ACT, obj=1, deps=(4,)),       # 5
        Action("drop", tensor=P, obj=0, deps=(4,)),         # 6
        Action("swap_out", tensor=B, obj=2, deps=(4,)),     # 7
        Action("drop", tensor=B, obj=2, deps=(7,)),         # 8
    ]
    return g, hand_plan(g, acts, 3)


def resident_plan():
    """p is an initial resident in o3 and stays there: periodic."""
    g = hand_graph()
    acts = [
        Action("swap_in", tensor=X, obj=0),                 # 0
        Action("compute", op=0, deps=(0,), out_objs=(1,)),  # 1
        Action("drop", tensor=X, obj=0, deps=(1,)),         # 2
        Action("compute", op=1, out_objs=(2,)),             # 3: reads p in o3
        Action("drop", tensor=ACT, obj=1, deps=(3,)),       # 4
        Action("swap_out", tensor=B, obj=2, deps=(3,)),     # 5
        Action("drop", tensor=B, obj=2, deps=(5,)),         # 6
    ]
    return g, hand_plan(g, acts, 4, [(P, 3)])


def updated_resident_plan():
    """p resident in o3 is updated to p_new (o0); p_new goes through the host back into o3."""
    g = hand_graph(update=True)
    acts = [
        Action("swap_in", tensor=X, obj=0),                    # 0
        Action("compute", op=0, deps=(0,), out_objs=(1,)),     # 1
        Action("drop", tensor=X, obj=0, deps=(1,)),            # 2
        Action("compute", op=1, deps=(2,), out_objs=(2, 0)),   # 3: b -> o2, p_new -> o0
        Action("drop", tensor=ACT, obj=1, deps=(3,)),          # 4
        Action("swap_out", tensor=B, obj=2, deps=(3,)),        # 5
        Action("drop", tensor=B, obj=2, deps=(5,)),            # 6
        Action("drop", tensor=P, obj=3, deps=(3,)),            # 7: stale p leaves o3
        Action("swap_out", tensor=PNEW, obj=0, deps=(3,)),     # 8
        Action("drop", tensor=PNEW, obj=0, deps=(8,)),         # 9
        Action("swap_in", tensor=PNEW, obj=3, deps=(7, 8)),    # 10: p_new into p's object
    ]
    return g, hand_plan(g, acts, 4, [(P, 3)])


@pytest.mark.parametrize("make", [reuse_plan, resident_plan, updated_resident_plan])
def test_hand_made_plans_are_valid(make):
    g, plan = make()
    assert verify_plan(g, plan) == []


# ---------------------------------------------------------------- acceptance of correct plans
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), training=st.booleans(), reuse=st.booleans(), swap=st.booleans(),
       n=st.integers(1, 30))
def test_simple_plans_on_random_graphs_verify(seed, training, reuse, swap, n):
    g = (random_training_graph(seed, n_layers=max(1, n // 4), momentum=seed % 2 == 0) if training
         else random_dag(seed, n_ops=n, update_prob=0.5, workspace_prob=0.3))
    plan = simple_plan_for(g, random_topological_order(g, seed), reuse=reuse, swap_activations=swap)
    assert verify_plan(g, plan) == []
    assert check_plan(g, Plan.from_json(plan.to_json())).verified


def test_check_plan_raises_with_the_violations_and_marks_valid_plans():
    g, plan = reuse_plan()
    assert check_plan(g, plan) is plan and plan.verified
    bad = copy(plan)
    bad.graph_fingerprint = "0" * 16
    with pytest.raises(VerificationError, match="fingerprint") as e:
        check_plan(g, bad)
    assert e.value.violations and not bad.verified


# ---------------------------------------------------------------- one test per invariant
def training_plan(**kw):
    g = random_training_graph(7, n_layers=4)
    return g, simple_plan_for(g, **kw)


def test_wrong_fingerprint():
    g, plan = training_plan()
    plan.graph_fingerprint = "deadbeefdeadbeef"
    reported(g, plan, "fingerprint")


def test_schedule_not_a_permutation():
    g, plan = training_plan()
    plan.schedule = plan.schedule[:-1]
    reported(g, plan, "permutation")


def test_schedule_not_topological():
    g, plan = training_plan()
    # fwd1 feeds fwd2: swapping them breaks topological order
    plan.schedule[0], plan.schedule[1] = plan.schedule[1], plan.schedule[0]
    reported(g, plan, "not topological")


def test_compute_actions_out_of_schedule_order():
    g, plan = training_plan()
    # "loss" and "loss_grad" are independent, so this schedule is still topological
    names = [g.ops[o].name for o in plan.schedule]
    i, j = names.index("loss"), names.index("loss_grad")
    plan.schedule[i], plan.schedule[j] = plan.schedule[j], plan.schedule[i]
    v = reported(g, plan, "do not follow the schedule")
    assert not any("topological" in x for x in v)


def test_op_computed_twice_and_op_never_computed():
    g, plan = training_plan()
    computes = [i for i, a in enumerate(plan.actions) if a.kind == "compute"]
    last = plan.actions[computes[-1]]
    bad = with_action(plan, computes[-1], op=plan.actions[computes[-2]].op)
    bad = with_action(bad, computes[-1], out_objs=last.out_objs[:len(g.ops[bad.actions[computes[-1]].op].outputs)])
    reported(g, bad, "computed twice", "never computed")


def test_dep_on_a_later_action():
    g, plan = training_plan()
    reported(g, with_action(plan, 0, deps=(3,)), "earlier actions")


def test_object_out_of_range():
    g, plan = training_plan()
    i = next(i for i, a in enumerate(plan.actions) if a.kind == "swap_in")
    reported(g, with_action(plan, i, obj=plan.pool.num_objects + 2), "the pool has")


def test_compute_output_object_out_of_range():
    g, plan = training_plan()
    i = next(i for i, a in enumerate(plan.actions) if a.kind == "compute")
    n = len(plan.actions[i].out_objs)
    reported(g, with_action(plan, i, out_objs=(plan.pool.num_objects,) * n), "writes object")


def test_tensor_in_a_too_small_object():
    g, plan = training_plan()
    c = plan.tensor_class[g.tensors[0].id]  # the input x's class
    plan.pool.class_bytes[c] -= plan.pool.alignment
    reported(g, plan, "bytes aligned) in object")


def test_tensor_in_an_object_of_another_class():
    g, plan = training_plan()
    t = next(a.tensor for a in plan.actions if a.kind == "swap_in")
    plan.tensor_class[t] = (plan.tensor_class[t] + 1) % len(plan.pool.class_count)
    reported(g, plan, f"places tensor {g.tensors[t].name!r} (class")


def test_two_live_tensors_share_an_object():
    g, plan = training_plan()
    # the second forward op writes its output into the object its input (h1) still occupies
    i = next(i for i, a in enumerate(plan.actions) if a.kind == "compute" and g.ops[a.op].name == "fwd2")
    h1_obj = next(a.out_objs[0] for a in plan.actions if a.kind == "compute" and g.ops[a.op].name == "fwd1")
    n = len(plan.actions[i].out_objs)
    reported(g, with_action(plan, i, out_objs=(h1_obj,) + plan.actions[i].out_objs[1:n]),
             "an object may hold one live tensor")


def test_read_races_its_swap_in():
    g, plan = reuse_plan()
    reported(g, with_action(plan, 4, deps=()), "reads tensor 'p' without waiting for its arrival")


def test_next_tenant_does_not_wait_for_the_previous_drop():
    g, plan = reuse_plan()
    reported(g, with_action(plan, 3, deps=()), "without waiting for the drop of its previous tenant")


def test_drop_before_the_last_reader():
    g, plan = reuse_plan()
    reported(g, with_action(plan, 5, deps=()), "frees object 1 before tensor 'a''s")


def test_drop_before_the_swap_out_completes():
    g, plan = reuse_plan()
    reported(g, with_action(plan, 8, deps=(4,)), "swap-out")


def test_swap_out_before_the_tensor_arrives():
    g, plan = reuse_plan()
    reported(g, with_action(plan, 7, deps=()), "copies tensor 'b' out without waiting for its arrival")


def test_swap_out_of_a_tensor_that_is_not_resident():
    g, plan = reuse_plan()
    reported(g, with_action(plan, 7, obj=1), "copies out tensor 'b' in object 1, but it is resident in object 2")


def test_read_of_a_tensor_that_is_not_resident():
    g, plan = reuse_plan()
    reported(g, remove_action(plan, 3), "reads tensor 'p', which is not resident")


def test_swap_in_of_a_never_swapped_out_activation():
    g, plan = training_plan(swap_activations=True)
    outs = {a.tensor: i for i, a in enumerate(plan.actions) if a.kind == "swap_out"}
    t, i = next((a.tensor, outs[a.tensor]) for a in plan.actions
                if a.kind == "swap_in" and g.tensors[a.tensor].kind == "activation")
    reported(g, remove_action(plan, i),
             f"brings in tensor {g.tensors[t].name!r} that has no host copy: it was never swapped out")


def test_swap_in_before_the_swap_out_completes():
    g, plan = training_plan(swap_activations=True)
    # with no deps the swap-in may start before the swap-out that made the host copy
    j = next(j for j, a in enumerate(plan.actions)
             if a.kind == "swap_in" and g.tensors[a.tensor].kind == "activation")
    t = plan.actions[j].tensor
    reported(g, with_action(plan, j, deps=()),
             f"brings in tensor {g.tensors[t].name!r} that has no host copy: none of its swap-outs")


def test_output_never_reaches_the_host():
    g, plan = reuse_plan()
    reported(g, remove_action(plan, 7), "graph output 'b' never reaches the host")


def test_update_is_lost():
    g, plan = updated_resident_plan()
    # drop p_new without its swap-out and without bringing it back
    bad = remove_action(remove_action(plan, 10), 8)
    reported(g, bad, "update 'p_new' is lost")


def test_pool_over_the_limit():
    g, plan = training_plan()
    plan.mem_limit = plan.pool.total_bytes() - 1
    reported(g, plan, "pool needs")
    _, ok = training_plan()
    assert any("requested limit" in v for v in verify_plan(g, ok, mem_limit=ok.pool.total_bytes() - 1))


def test_reported_peak_over_the_pool_or_limit():
    g, plan = training_plan()
    pool = plan.pool.total_bytes()
    plan.predicted = {"peak_bytes": pool}
    assert verify_plan(g, plan) == []
    plan.predicted = {"peak_bytes": pool + 1}
    reported(g, plan, "reports a peak of")
    plan.mem_limit = pool
    from tvm_swap.verify import verify_prediction
    assert len(verify_prediction(plan)) == 2


def test_pool_workspace_below_an_ops_workspace():
    g = random_dag(2, n_ops=12, workspace_prob=1.0)
    plan = simple_plan_for(g)
    plan.pool.workspace_bytes = 0
    reported(g, plan, "workspace")


def test_periodicity_initial_resident_not_restored():
    g, plan = resident_plan()
    plan.actions.append(Action("drop", tensor=P, obj=3, deps=(3,)))
    reported(g, plan, "does not repeat", "initial residents not restored: 'p' in class 0")


def test_periodicity_tensor_left_resident():
    g, plan = resident_plan()
    reported(g, remove_action(plan, 4), "tensor 'a' (activation) is still resident at the end")


def test_periodicity_resident_may_return_to_another_object_of_its_class():
    # objects of a class are renamed between iterations (Plan.next_object_map), so p_new may stay in o0
    g, plan = updated_resident_plan()
    kept = remove_action(remove_action(remove_action(plan, 10), 9), 8)
    assert verify_plan(g, kept) == []
    assert kept.next_object_map(g.updates, g.op_outputs()) == [1, 2, 3, 0]   # o3's role (p) is played by o0's buffer next time
    assert verify_plan(g, with_action(plan, 10, obj=1, deps=(4, 8))) == []


def test_periodicity_resident_in_another_class_is_reported():
    g, plan = updated_resident_plan()
    kept = remove_action(remove_action(remove_action(plan, 10), 9), 8)
    kept.pool = Pool([A, A], [3, 1])                  # o3 (p's object) is now the only object of class 1
    kept.tensor_class = [0] * g.num_tensors
    kept.tensor_class[P] = 1
    reported(g, kept, "does not repeat", "'p' in class 1")


def test_initial_resident_must_be_persistent():
    g, plan = resident_plan()
    plan.initial_residents = [(P, 3), (X, 0)]
    reported(g, plan, "initial resident 'x' is a input")


def test_stale_updated_tensor_may_not_stay():
    g, plan = updated_resident_plan()
    bad = remove_action(remove_action(plan, 10), 7)
    reported(g, bad, "tensor 'p' stays resident at the end, but this iteration replaces it")


def test_tensor_class_of_the_wrong_length():
    g, plan = training_plan()
    plan.tensor_class = plan.tensor_class[:-1]
    reported(g, plan, "tensor_class has")


def test_unknown_action_kind_and_wrong_output_count():
    g, plan = reuse_plan()
    bad = copy(plan)
    bad.actions[5] = Action("teleport", tensor=ACT, obj=1)
    reported(g, bad, "unknown kind")
    reported(g, with_action(plan, 1, out_objs=(1, 2)), "names 2 output objects for 1 outputs")


# ---------------------------------------------------------------- happens-before is exact
def brute_force_hb(actions):
    """reach[x][y]: y starts after x completes, by closure over deps and stream FIFO edges."""
    stream = {"compute": 0, "swap_out": 1, "swap_in": 2}
    n = len(actions)
    pred = [set(a.deps) for a in actions]
    last = {}
    for i, a in enumerate(actions):
        s = stream.get(a.kind)
        if s is not None:
            if s in last:
                pred[i].add(last[s])
            last[s] = i
    anc = [set() for _ in range(n)]
    for i in range(n):
        for d in pred[i]:
            anc[i] |= {d} | anc[d]
    return anc


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_vector_clocks_give_exact_happens_before(data):
    n = data.draw(st.integers(1, 18))
    kinds = data.draw(st.lists(st.sampled_from(["compute", "swap_out", "swap_in", "drop"]), min_size=n, max_size=n))
    acts = [Action(k, op=0, tensor=0, obj=0, deps=tuple(sorted(set(
        data.draw(st.lists(st.integers(0, i - 1), max_size=2)) if i else [])))) for i, k in enumerate(kinds)]
    stream, position, c0, c1, c2, _ = _vector_clocks(acts)
    clock = list(zip(c0, c1, c2))
    anc = brute_force_hb(acts)

    def done_before(x, y):
        # a drop completes when all its deps have (one with no deps at the start)
        if stream[x] >= 0:
            return x in anc[y]
        return all(done_before(d, y) for d in acts[x].deps)

    for x, y in itertools.combinations(range(n), 2):   # the verifier asks only about earlier x
        if stream[x] >= 0:
            fast = clock[y][stream[x]] >= position[x]
        else:
            fast = all(cy >= cx for cy, cx in zip(clock[y], clock[x]))
        truth = done_before(x, y)
        assert fast == truth, (x, y, kinds, [a.deps for a in acts])


@pytest.mark.slow   # a wall-clock assertion: only with the slow tests, where the machine is not shared
def test_verifier_is_fast_on_a_large_plan():
    import time

    g = random_dag(1, n_ops=10000, n_params=200, n_inputs=20, update_prob=0.5)
    plan = simple_plan_for(g, reuse=True)
    t = time.process_time()              # (CPU, not wall: a loaded machine must not fail it)
    assert verify_plan(g, plan) == []
    assert time.process_time() - t < 2.0, "verifier too slow for 3x10^4 actions"
    assert len(plan.actions) > 25000


def test_random_corruptions_never_crash_the_verifier():
    g, plan = training_plan(reuse=True, swap_activations=True)
    rng = random.Random(0)
    for _ in range(200):
        bad = copy(plan)
        i = rng.randrange(len(bad.actions))
        a = bad.actions[i]
        choice = rng.randrange(4)
        if choice == 0:
            bad = with_action(bad, i, deps=())
        elif choice == 1 and a.kind != "compute":
            bad = with_action(bad, i, obj=rng.randrange(bad.pool.num_objects))
        elif choice == 2:
            bad = remove_action(bad, i)
        else:
            j = rng.randrange(len(bad.actions))
            bad.actions[i], bad.actions[j] = bad.actions[j], bad.actions[i]
        assert isinstance(verify_plan(g, bad), list)


def test_an_arena_renaming_must_map_the_layout_onto_itself():
    """Two zones A = [0, 1024) and B = [1024, 2048) trade places between iterations (objects 0 and 1); an
    object inside A must trade places with its mirror in B, else next iteration it overlaps other bytes."""
    from tvm_swap.plan import Arena
    from tvm_swap.verify import _check_arena, _Report

    def problems(offsets, sizes, swaps):
        r = _Report()
        _check_arena(Arena(4096, offsets, sizes, 256, 0, swaps), r)
        return r.items

    zones = ([0, 1024], [1024, 1024])
    assert problems(zones[0] + [256, 1280], zones[1] + [512, 512], [(0, 1), (2, 3)]) == []   # mirrored
    assert problems(zones[0] + [2048], zones[1] + [512], [(0, 1)]) == []                     # outside: free
    bad = problems(zones[0] + [256], zones[1] + [512], [(0, 1)])                             # not mirrored
    assert bad and "does not map the layout onto itself" in bad[0]
    # mirrored, but another object overlaps the first and stays put: next iteration it would not
    bad = problems(zones[0] + [256, 1280, 512], zones[1] + [512, 512, 512], [(0, 1), (2, 3)])
    assert bad and "does not map the layout onto itself" in bad[0]


def test_an_arena_rotation_must_map_the_layout_onto_itself():
    """Three equal slots rotate between iterations (cycle (0, 1, 2): slot 1's buffer plays slot 0 next, slot 2's
    plays 1, slot 0's plays 2): an object inside a slot must rotate with a mirror in every slot of the cycle."""
    from tvm_swap.plan import Arena
    from tvm_swap.verify import _check_arena, _Report

    def problems(offsets, sizes, swaps):
        r = _Report()
        _check_arena(Arena(4096, offsets, sizes, 256, 0, swaps), r)
        return r.items

    slots = [0, 1024, 2048], [1024] * 3
    inside = [256, 1280, 2304], [512] * 3                    # at offset 256 of each slot
    assert problems(slots[0] + inside[0], slots[1] + inside[1], [(0, 1, 2), (3, 4, 5)]) == []
    assert problems(slots[0] + [3072], slots[1] + [1024], [(0, 1, 2)]) == []      # outside the slots: stays
    # the inside objects rotate the other way round: object 3 sits in slot 0 but is played by slot 2's
    bad = problems(slots[0] + inside[0], slots[1] + inside[1], [(0, 1, 2), (3, 5, 4)])
    assert bad and "does not map the layout onto itself" in bad[0]
    # mirrored in two slots only (a pair inside a 3-cycle of slots)
    bad = problems(slots[0] + inside[0][:2], slots[1] + inside[1][:2], [(0, 1, 2), (3, 4)])
    assert bad and "does not map the layout onto itself" in bad[0]
    # a cycle of unequal buffers, and an object in two cycles
    assert "same size" in problems([0, 1024, 2048], [1024, 1024, 512], [(0, 1, 2)])[0]
    assert "repeated" in problems(slots[0], slots[1], [(0, 1), (1, 2)])[0]
    # old plans' pairs read as 2-cycles: JSON round trip keeps the cycles
    a = Arena(4096, slots[0] + inside[0], slots[1] + inside[1], 256, 0, [(0, 1, 2), (3, 4, 5)])
    assert Arena.from_json(a.to_json()).swaps == a.swaps and a.renaming() == {0: 1, 1: 2, 2: 0, 3: 4, 4: 5, 5: 3}
    assert Arena(4096, [0, 1024], [1024, 1024], 256, 0, [(0, 1)]).renaming() == {0: 1, 1: 0}
