"""The verifier on recompute actions: it accepts a plan that drops an activation and rebuilds it, and names each
broken recompute invariant (one corruption per invariant, each from the valid plan)."""
import pytest

from tvm_swap.errors import PlanError
from tvm_swap.plan import PLAN_VERSION, SUPPORTED_VERSIONS, Action, Arena, Plan
from tvm_swap.verify import verify_plan

from recompute_plans import ACT, B, C, X, A, rc_plan  # noqa: E402


def changed(plan, i, **kw):
    p = Plan.from_dict(plan.to_dict())
    a = p.actions[i]
    f = dict(kind=a.kind, op=a.op, tensor=a.tensor, obj=a.obj, deps=a.deps, out_objs=a.out_objs)
    f.update(kw)
    p.actions[i] = Action(**f)
    return p


def without(plan, i):
    p = Plan.from_dict(plan.to_dict())
    p.actions = [Action(a.kind, a.op, a.tensor, a.obj, tuple(d - (d > i) for d in a.deps if d != i), a.out_objs)
                 for j, a in enumerate(p.actions) if j != i]
    return p


def reported(g, plan, needle):
    v = verify_plan(g, plan)
    assert v, "the corrupted plan was accepted"
    assert any(needle in x for x in v), f"expected {needle!r} in:\n" + "\n".join(v)


def test_a_dropped_and_recomputed_activation_verifies_and_round_trips():
    g, plan = rc_plan()
    assert verify_plan(g, plan) == []
    d = plan.to_dict()
    assert d["version"] == PLAN_VERSION == 3
    assert d["actions"][4] == {"k": "recompute", "op": 0, "out": [1], "deps": [3]}
    again = Plan.from_dict(d)
    assert again.actions == plan.actions and verify_plan(g, again) == []


def test_recompute_reading_a_tensor_that_is_not_resident():
    g, plan = rc_plan()
    bad = Plan.from_dict(plan.to_dict())
    bad.actions = [
        Action("swap_in", tensor=X, obj=0),                   # 0
        Action("compute", op=0, deps=(0,), out_objs=(1,)),    # 1
        Action("drop", tensor=X, obj=0, deps=(1,)),           # 2: x leaves ...
        Action("compute", op=1, out_objs=(2,)),               # 3
        Action("drop", tensor=ACT, obj=1, deps=(3,)),         # 4
        Action("recompute", op=0, deps=(4,), out_objs=(1,)),  # 5: ... and the recompute reads it
        Action("compute", op=2, deps=(2,), out_objs=(0,)),    # 6
        Action("drop", tensor=ACT, obj=1, deps=(6,)),
        Action("drop", tensor=B, obj=2, deps=(6,)),
        Action("swap_out", tensor=C, obj=0, deps=(6,)),
        Action("drop", tensor=C, obj=0, deps=(9,)),
    ]
    reported(g, bad, "reads tensor 'x', which is not resident")


def test_recompute_of_an_op_never_computed_before():
    g, plan = rc_plan()
    bad = Plan.from_dict(plan.to_dict())
    bad.actions.insert(1, Action("recompute", op=0, deps=(0,), out_objs=(2,)))
    bad.actions = [Action(a.kind, a.op, a.tensor, a.obj, tuple(d + (d >= 1) for d in a.deps), a.out_objs)
                   if j > 1 else a for j, a in enumerate(bad.actions)]
    reported(g, bad, "before any compute of it")


def test_recompute_into_an_object_that_holds_a_live_tensor():
    g, plan = rc_plan()
    reported(g, changed(plan, 4, out_objs=(2,)), "which still holds 'b'")


def test_recompute_that_does_not_wait_for_the_drop_of_its_objects_tenant():
    g, plan = rc_plan()
    plan.actions = [
        Action("swap_in", tensor=X, obj=0),                   # 0
        Action("compute", op=0, deps=(0,), out_objs=(1,)),    # 1
        Action("compute", op=1, out_objs=(2,)),               # 2
        Action("swap_out", tensor=ACT, obj=1, deps=(1,)),     # 3: a copy on the d2h stream ...
        Action("drop", tensor=ACT, obj=1, deps=(2, 3)),       # 4: ... that the drop of a waits for
        Action("recompute", op=0, deps=(4,), out_objs=(1,)),  # 5
        Action("drop", tensor=X, obj=0, deps=(5,)),
        Action("compute", op=2, deps=(6,), out_objs=(0,)),
        Action("drop", tensor=ACT, obj=1, deps=(7,)),
        Action("drop", tensor=B, obj=2, deps=(7,)),
        Action("swap_out", tensor=C, obj=0, deps=(7,)),
        Action("drop", tensor=C, obj=0, deps=(10,)),
    ]
    assert verify_plan(g, plan) == []
    reported(g, changed(plan, 5, deps=()), "without waiting for the drop of its previous tenant")


def test_recompute_of_a_tensor_that_is_still_resident():
    g, plan = rc_plan()
    bad = without(plan, 3)                   # a is never dropped, then rebuilt into another object
    bad.actions[3] = Action("recompute", op=0, out_objs=(4,))
    reported(g, bad, "already resident")


def test_drop_of_a_recompute_input_before_the_recompute_ends():
    g, plan = rc_plan()
    reported(g, changed(plan, 5, deps=()), "before tensor 'x''s reader (action 4 (recompute 'f'))")


def test_recompute_reading_a_param_after_its_update_is_computed():
    g, plan = rc_plan(update=True)
    v = verify_plan(g, plan)
    assert len(v) == 1 and "reads param 'p' after its update 'p_new' was computed" in v[0], v
    # the same actions without the update verify (test above): the param rule is what rejects this plan


def test_recompute_into_arena_bytes_of_a_live_tensor():
    # objects 0..4 back to back; object 5 covers the bytes of object 2 (where b lives during the recompute)
    arena = Arena(6 * A, [0, A, 2 * A, 3 * A, 4 * A, 2 * A], [A] * 6)
    g, plan = rc_plan(pool=arena)
    assert verify_plan(g, plan) == []
    reported(g, changed(plan, 4, out_objs=(5,)), "which overlap live tensor 'b'")


def test_wrong_output_count_and_unknown_op():
    g, plan = rc_plan()
    reported(g, changed(plan, 4, out_objs=(1, 4)), "names 2 output objects for 1 outputs")
    reported(g, changed(plan, 4, op=7), "recomputes op 7, which is not in the graph")


@pytest.mark.parametrize("version", [1, 2])
def test_older_plan_versions_still_load(version):
    g, plan = rc_plan()
    d = plan.to_dict()
    d["version"] = version
    d["actions"] = [a for a in d["actions"] if a["k"] != "recompute"]
    assert Plan.from_dict(d).actions[0].kind == "swap_in"
    d["version"] = max(SUPPORTED_VERSIONS) + 1          # a future version: refused
    with pytest.raises(PlanError):
        Plan.from_dict(d)
