"""ApplySwapPlan as TVM's own pass tests check a pass: a hand-written Before, a small hand-made plan, and the
Expected program written out by hand, compared with tvm.ir.assert_structural_equal."""
import pytest

import tvm
from tvm.script import ir as I  # noqa: E402
from tvm.script import relax as R  # noqa: E402
from tvm.script import tirx as T  # noqa: E402

from relay_passes.apply import MANIFEST_FUNC, PLAN_FUNC, ApplySwapPlan  # noqa: E402
from tvm_swap.graph import from_relax  # noqa: E402
from tvm_swap.plan import Action, ActionKind, Plan, Pool  # noqa: E402
from tvm_swap.verify import check_plan  # noqa: E402


# The output of relay_passes.lower for x -> add_one -> square (printed form, so not well-formed for the parser).
@I.ir_module(check_well_formed=False)
class Before:
    @T.prim_func(private=True)
    def add_one(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.sblock("b"):
                vi = T.axis.spatial(4, i)
                y[vi] = x[vi] + T.float32(1)

    @T.prim_func(private=True)
    def square(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.sblock("b"):
                vi = T.axis.spatial(4, i)
                y[vi] = x[vi] * x[vi]

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        R.func_attr({"num_input": 1, "relax.force_pure": True})
        cls = Before
        alloc = R.builtin.alloc_tensor(R.shape([4]), R.dtype("float32"), R.prim_value(0), R.str("global"))
        cls.add_one(x, alloc)
        y = alloc
        alloc1 = R.builtin.alloc_tensor(R.shape([4]), R.dtype("float32"), R.prim_value(0), R.str("global"))
        cls.square(y, alloc1)
        z = alloc1
        return z


# Tensors: 0 = x (input), 1 = add_one's output, 2 = square's output (the result); three objects of 256 B.
A, K = Action, ActionKind
ACTIONS = [
    A(K.SWAP_IN, tensor=0, obj=0),                       # 0: the input, copied in
    A(K.COMPUTE, op=0, deps=(0,), out_objs=(1,)),        # 1: add_one waits on the copy (another stream)
    A(K.DROP, tensor=0, obj=0, deps=(1,)),               # 2
    A(K.SWAP_OUT, tensor=1, obj=1, deps=(1,)),           # 3: d2h waits on add_one, so add_one records
    A(K.COMPUTE, op=1, deps=(1,), out_objs=(2,)),        # 4: same stream as its dep: no wait
    A(K.DROP, tensor=1, obj=1, deps=(3, 4)),             # 5
    A(K.SWAP_OUT, tensor=2, obj=2, deps=(4,)),           # 6: the result reaches the host
    A(K.DROP, tensor=2, obj=2, deps=(6,)),               # 7
]


@I.ir_module(check_well_formed=False)
class Expected:
    @T.prim_func(private=True)
    def add_one(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.sblock("b"):
                vi = T.axis.spatial(4, i)
                y[vi] = x[vi] + T.float32(1)

    @T.prim_func(private=True)
    def square(x: T.Buffer((4,), "float32"), y: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.sblock("b"):
                vi = T.axis.spatial(4, i)
                y[vi] = x[vi] * x[vi]

    @R.function(pure=False)
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        R.func_attr({"num_input": 1, "relax.force_pure": True})
        cls = Expected
        R.call_packed("tvm_swap.begin", x, ty_args=(R.Tuple,))
        x_dev = R.call_packed("tvm_swap.swap_in", 0, x, ty_args=(R.Tensor((4,), "float32"),))
        R.call_packed("tvm_swap.wait", 1, ty_args=(R.Tuple,))
        y = R.call_packed("tvm_swap.object", 1, 1, 1, ty_args=(R.Tensor((4,), "float32"),))
        cls.add_one(x_dev, y)
        R.call_packed("tvm_swap.record", 1, ty_args=(R.Tuple,))
        R.call_packed("tvm_swap.drop", 2, ty_args=(R.Tuple,))
        R.call_packed("tvm_swap.swap_out", 3, y, ty_args=(R.Tuple,))
        z = R.call_packed("tvm_swap.object", 4, 2, 2, ty_args=(R.Tensor((4,), "float32"),))
        cls.square(y, z)
        R.call_packed("tvm_swap.record", 4, ty_args=(R.Tuple,))
        R.call_packed("tvm_swap.drop", 5, ty_args=(R.Tuple,))
        R.call_packed("tvm_swap.swap_out", 6, z, ty_args=(R.Tuple,))
        R.call_packed("tvm_swap.drop", 7, ty_args=(R.Tuple,))
        results = R.call_packed("tvm_swap.end", ty_args=(R.Tuple(R.Tensor((4,), "float32")),))
        gv: R.Tensor((4,), "float32") = results[0]
        return gv


def _plan(graph):
    plan = Plan(graph.name, graph.fingerprint(), "by-hand", 1024, {"name": "cpu"}, [0, 1], Pool([256], [3]),
                [0, 0, 0], [], list(ACTIONS))
    check_plan(graph, plan, 1024)      # the pass needs a verified plan; this one is
    return plan


def _program_only(mod):
    """The module without the plan and manifest strings the pass embeds (checked elsewhere)."""
    return tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv.name_hint not in (PLAN_FUNC, MANIFEST_FUNC)},
                        attrs=mod.attrs)


def test_apply_swap_plan_writes_the_expected_program():
    graph = from_relax(Before)
    after = ApplySwapPlan(graph, _plan(graph))(Before)
    assert {PLAN_FUNC, MANIFEST_FUNC} <= {gv.name_hint for gv in after.functions}
    tvm.ir.assert_structural_equal(_program_only(after), Expected)


def test_apply_swap_plan_runs_inside_a_sequential():
    graph = from_relax(Before)
    seq = tvm.transform.Sequential([ApplySwapPlan(graph, _plan(graph))], name="swap")
    tvm.ir.assert_structural_equal(_program_only(seq(Before)), Expected)


def test_a_different_plan_gives_a_different_program():
    """The comparison can fail: the same plan with add_one's output written to another object does not match."""
    graph = from_relax(Before)
    plan = _plan(graph)
    plan.actions[1] = Action(K.COMPUTE, op=0, deps=(0,), out_objs=(2,))
    plan.actions[3] = Action(K.SWAP_OUT, tensor=1, obj=2, deps=(1,))
    plan.actions[5] = Action(K.DROP, tensor=1, obj=2, deps=(3, 4))
    plan.actions[4] = Action(K.COMPUTE, op=1, deps=(1,), out_objs=(1,))
    plan.actions[6] = Action(K.SWAP_OUT, tensor=2, obj=1, deps=(4,))
    plan.actions[7] = Action(K.DROP, tensor=2, obj=1, deps=(6,))
    check_plan(graph, plan, 1024)
    with pytest.raises(ValueError):
        tvm.ir.assert_structural_equal(_program_only(ApplySwapPlan(graph, plan)(Before)), Expected)
