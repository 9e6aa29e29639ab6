"""relay_passes.apply: the plan written into the IR (printed before/after; structural facts asserted)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tvm
from tvm import relax  # noqa: E402

from relay_passes.apply import MANIFEST_FUNC, PLAN_FUNC, apply_plan, count_calls  # noqa: E402
from relay_passes.lower import build_lowered, finalize, lower  # noqa: E402
from swap_models import Unlimited, bitwise_equal, flat, mlp  # noqa: E402
from tvm_swap.errors import PlanError, UnsupportedModelError  # noqa: E402
from tvm_swap.graph.extract import graph_from_relax  # noqa: E402
from tvm_swap.plan import Plan  # noqa: E402
from tvm_swap.planner.api import plan_graph  # noqa: E402
from tvm_swap.testing import simple_plan_for  # noqa: E402
from tvm_swap.verify import check_plan  # noqa: E402


def _branchy():
    """x -> (x@w0, x@w1) -> add -> relu: two independent kernels, so a schedule can reorder them."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([8, 16], "float32"))
    w0 = relax.Var("w0", relax.TensorType([16, 16], "float32"))
    w1 = relax.Var("w1", relax.TensorType([16, 16], "float32"))
    with bb.function("main", [x, w0, w1], attrs={"num_input": 1}):
        with bb.dataflow():
            a = bb.emit(relax.op.matmul(x, w0))
            b = bb.emit(relax.op.exp(relax.op.matmul(x, w1)))
            c = bb.emit(relax.op.reshape(relax.op.add(a, b), [16, 8]))
            gv = bb.emit_output(relax.op.nn.relu(c))
        bb.emit_func_output(gv)
    rng = np.random.default_rng(0)
    params = {"w0": rng.standard_normal((16, 16)).astype("float32"),
              "w1": rng.standard_normal((16, 16)).astype("float32") * 0.1}
    return bb.get(), params, {"x": rng.standard_normal((8, 16)).astype("float32")}


def _kernel_order(mod, func="main"):
    """Names of the PrimFuncs `func` calls, in binding order."""
    names = []
    for block in mod[func].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, relax.GlobalVar) and \
                    isinstance(mod[v.op], tvm.tirx.PrimFunc):
                names.append(v.op.name_hint)
    return names


def _weight_of_first_matmul(mod, func="main"):
    for block in mod[func].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, relax.GlobalVar) and v.op.name_hint == "matmul":
                return v.args[1].name


def _action_args(mod, name, func="main"):
    """First argument (the action index) of every call of extern `name`, in order."""
    out = []
    for block in mod[func].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, relax.ExternFunc) and str(v.op.global_symbol) == name:
                out.append(int(v.args[0].value))
    return out


def _alloc_tensor_count(mod, func="main"):
    n = 0

    def visit(e):
        nonlocal n
        if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op) and e.op.name == "relax.builtin.alloc_tensor":
            n += 1

    relax.analysis.post_order_visit(mod[func].body, visit)
    return n


@pytest.fixture(scope="module")
def small_mlp():
    mod, params, inputs = mlp()
    low = lower(mod, "llvm")
    g = graph_from_relax(low)
    return mod, params, inputs, low, g


def test_structure_after_apply(small_mlp, capsys):
    mod, params, inputs, low, g = small_mlp
    plan = plan_graph(g, "35%", device="cpu", planner="swapadvisor-nosearch")
    out = apply_plan(low, g, plan)
    with capsys.disabled():
        pass
    print("---- before ----\n", low["main"], "\n---- after ----\n", out["main"])

    computes = [a for a in plan.actions if a.kind == "compute"]
    assert _kernel_order(out) == [g.ops[a.op].kernel for a in computes]
    assert _alloc_tensor_count(low) == sum(len(op.outputs) for op in g.ops)
    assert _alloc_tensor_count(out) == 0                      # every planned tensor lives in a pool object
    calls = count_calls(out)
    for kind in ("swap_out", "swap_in", "drop"):
        idx = [i for i, a in enumerate(plan.actions) if a.kind == kind]
        assert calls.get(f"tvm_swap.{kind}", 0) == len(idx)
        assert _action_args(out, f"tvm_swap.{kind}") == idx   # each call names its action: the event graph
    n_out = sum(len(g.ops[a.op].outputs) for a in computes)
    assert calls["tvm_swap.object"] == n_out + len(plan.initial_residents)
    assert calls["tvm_swap.begin"] == calls["tvm_swap.end"] == 1
    assert any(a.kind == "swap_in" and g.tensors[a.tensor].kind == "param" for a in plan.actions)
    assert "call_pure_packed" not in out["main"].script()      # swaps are impure calls (notes §4)
    # the plan and the manifest travel inside the module
    assert Plan.from_json(str(out[PLAN_FUNC].body.body.value)).to_dict() == plan.to_dict()
    man = json.loads(str(out[MANIFEST_FUNC].body.body.value))
    assert [p["role"] for p in man["params"]] == ["input"] + ["param"] * len(params)
    # only the inputs stay function parameters: params live in the runtime
    assert [p.name for p in out["main"].params] == list(inputs)


def test_finalized_main_allocates_nothing(small_mlp):
    _, _, _, low, g = small_mlp
    plan = plan_graph(g, "60%", device="cpu", planner="swapadvisor-nosearch")
    fin = finalize(apply_plan(low, g, plan), "llvm")
    text = fin["main"].script()
    assert "alloc_storage" not in text and "alloc_tensor" not in text
    # the swap calls survive the finalize passes (impure calls are never dropped)
    assert count_calls(fin)["tvm_swap.swap_in"] == sum(a.kind == "swap_in" for a in plan.actions)


def test_reordered_schedule_and_view_run_bitwise_equal():
    """A plan that runs the second branch first: the IR follows it; a view (reshape) is re-created."""
    from runtime_ext.swap_module import SwapModule

    mod, params, inputs = _branchy()
    low = lower(mod, "llvm", fuse=False)
    g = graph_from_relax(low)
    default = list(range(g.num_ops))
    first_w1 = next(o for o in default if g.tensors[g.ops[o].inputs[-1]].name == "w1")
    schedule = [first_w1] + [o for o in default if o != first_w1]
    plan = check_plan(g, simple_plan_for(g, schedule=schedule, device="cpu"))
    out = apply_plan(low, g, plan)
    print(out["main"])
    assert _kernel_order(out) == [g.ops[o].kernel for o in schedule]
    assert _weight_of_first_matmul(out) == "w1" and _weight_of_first_matmul(low) == "w0"
    assert "R.reshape" in low["main"].script() and "R.reshape" in out["main"].script()
    m = SwapModule(build_lowered(out, "llvm"), params)
    ref = Unlimited(mod, fuse_max_depth=None)
    got = flat(m(*inputs.values()))
    # reference: the same unfused kernels built by TVM's own pipeline
    want = flat(relax.VirtualMachine(build_lowered(low, "llvm"), tvm.cpu())["main"](
        *[tvm.runtime.tensor(v) for v in [*inputs.values(), *params.values()]]))
    assert bitwise_equal(got, want)
    np.testing.assert_allclose(got[0], ref(list(inputs.values()), list(params.values()))[0], rtol=1e-5, atol=1e-5)


def test_plan_of_another_graph_is_refused(small_mlp):
    _, _, _, low, g = small_mlp
    other_mod, _, _ = _branchy()
    other = graph_from_relax(lower(other_mod, "llvm"))
    plan = plan_graph(other, "100%", device="cpu", planner="noswap")
    with pytest.raises(PlanError, match="re-plan"):
        apply_plan(low, g, plan)
    with pytest.raises(PlanError, match="kernel"):
        apply_plan(low, other, plan)      # graph and module do not belong together


def test_corrupt_plans_get_plan_errors(small_mlp):
    _, _, _, low, g = small_mlp
    good = plan_graph(g, "100%", device="cpu", planner="noswap")

    def corrupt(edit):
        p = Plan.from_dict(good.to_dict())
        edit(p)
        return p

    with pytest.raises(PlanError, match="does not fit"):
        apply_plan(low, g, corrupt(lambda p: setattr(p.pool, "class_bytes", [256] * len(p.pool.class_bytes))))
    with pytest.raises(PlanError, match="earlier actions"):
        def forward_dep(p):
            a = p.actions[1]
            p.actions[1] = type(a)(a.kind, a.op, a.tensor, a.obj, (5,), a.out_objs)
        apply_plan(low, g, corrupt(forward_dep))
    with pytest.raises(PlanError, match="computed twice"):
        def twice(p):
            first, second = [i for i, a in enumerate(p.actions) if a.kind == "compute"][:2]
            a = p.actions[second]
            p.actions[second] = type(a)("compute", p.actions[first].op, deps=a.deps, out_objs=a.out_objs)
        apply_plan(low, g, corrupt(twice))


def test_unsupported_module_is_a_clear_error():
    from relay_passes.apply import analyze

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([4], "float32"))
    with bb.function("main", [x], pure=False):
        y = bb.emit(relax.Call(relax.ExternFunc("some.library_call"), [x],
                               ty_args=[relax.TensorType([4], "float32")]))
        bb.emit_func_output(y)
    with pytest.raises(UnsupportedModelError, match="not supported"):
        analyze(bb.get(), "main")
