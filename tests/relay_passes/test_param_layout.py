"""Weights in their compute layout (issue 26, item 1): a frozen weight's transpose is folded into the shipped
parameter (relay_passes.param_layout), a trainable one is read in place by the matmul
(relay_passes.transpose_matmul); the user keeps giving and getting the weights in their own layout."""
from __future__ import annotations

import numpy as np
import pytest

import tvm
from tvm import relax

import tvm_swap
from relay_passes.lower import build_lowered, lower
from relay_passes.param_layout import FoldParamLayouts, folded_layouts
from runtime_ext.params_bundle import embedded_params
from tvm_swap.param_layouts import Fold

BATCH, IN, HID, OUT = 4, 24, 40, 8


def linear_model():
    """x -> linear(W1, b1) -> relu -> linear(W2): matmul(x, permute_dims(W)) as every frontend's dense."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([BATCH, IN], "float32"))
    w1 = relax.Var("w1", relax.TensorType([HID, IN], "float32"))
    b1 = relax.Var("b1", relax.TensorType([HID], "float32"))
    w2 = relax.Var("w2", relax.TensorType([OUT, HID], "float32"))
    with bb.function("main", [x, w1, b1, w2], attrs={"num_input": 1}):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.relu(relax.op.linear(x, w1, b1)))
            y = bb.emit_output(relax.op.linear(h, w2))
        bb.emit_func_output(y)
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((HID, IN)).astype("float32"),
              "b1": rng.standard_normal(HID).astype("float32"),
              "w2": rng.standard_normal((OUT, HID)).astype("float32")}
    return bb.get(), params


def kernel_names(lowered) -> list[str]:
    return [gv.name_hint for gv, f in lowered.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]


def plain_run(mod, params, x, fuse_transpose):
    """The build with TVM's own memory plan, transposes as TVM lowers them (fuse_transpose=False) or fused."""
    ex = build_lowered(lower(mod, "llvm", fuse_transpose=fuse_transpose), "llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    names = [p.name for p in mod["main"].params[1:]]
    out = vm["main"](tvm.runtime.tensor(x), *[tvm.runtime.tensor(params[n]) for n in names])
    return [o.numpy() for o in out] if not isinstance(out, tvm.runtime.Tensor) else [out.numpy()]


def test_unfolded_lowering_has_a_transpose_kernel_per_weight():
    """The premise: TVM lowers each dense's weight transpose to a kernel of its own (what the fold removes)."""
    mod, _ = linear_model()
    assert sum("transpose" in k for k in kernel_names(lower(mod, "llvm", fuse_transpose=False))) == 2


def test_library_ships_the_transposed_weight_and_the_user_keeps_theirs(tmp_path):
    mod, params = linear_model()
    x = np.random.default_rng(1).standard_normal((BATCH, IN)).astype("float32")
    m = tvm_swap.build(mod, mem_limit="95%", params=params, profile=False, generations=2)
    lowered = m.compiled.lowered
    assert not [k for k in kernel_names(lowered) if "transpose" in k]
    assert not [op.name for op in m.compiled.graph.ops if "transpose" in op.name]
    persistent = {p.name: p.shape for p in m.manifest.persistent}
    assert persistent == {"w1_T": (IN, HID), "b1": (HID,), "w2_T": (HID, OUT)}
    y = m(x)
    assert np.array_equal(y, plain_run(mod, params, x, fuse_transpose=False)[0])    # bitwise, unfolded build
    assert m.param_names == ["w1", "b1", "w2"]
    assert all(np.array_equal(m.params()[n], params[n]) for n in params)
    path = m.export_library(tmp_path / "m.so")
    shipped, _ = embedded_params(path)
    assert sorted(shipped) == ["b1", "w1_T", "w2_T"]
    assert np.array_equal(shipped["w1_T"], params["w1"].T) and np.array_equal(shipped["w2_T"], params["w2"].T)
    m2 = tvm_swap.load(path)
    back = m2.params()
    assert list(back) == ["w1", "b1", "w2"]                              # the user's names, in their order
    assert all(np.array_equal(back[n], params[n]) for n in params)
    assert np.array_equal(m2(x), y)
    m2.set_params([params["w1"] * 2, params["b1"], params["w2"]])     # positional, the user's order and layout
    assert np.array_equal(m2.params()["w1"], params["w1"] * 2)


def test_set_params_checks_the_users_layout():
    mod, params = linear_model()
    m = tvm_swap.build(mod, mem_limit=None, params=params, profile=False)
    with pytest.raises(tvm_swap.TvmSwapError, match=r"param 'w1' must be \(40, 24\) float32"):
        m.set_params({**params, "w1": params["w1"].T})
    with pytest.raises(tvm_swap.TvmSwapError, match="unknown params"):
        m.set_params({**params, "w1_T": params["w1"].T})


def test_fold_of_a_transpose_and_reshape_chain_round_trips():
    """Any layout chain on a frozen parameter folds; the recipe rebuilds and inverts it bit for bit."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([2, 12], "float32"))
    w = relax.Var("w", relax.TensorType([3, 4, 5], "float32"))
    with bb.function("main", [x, w], attrs={"num_input": 1}):
        with bb.dataflow():
            wt = bb.emit(relax.op.permute_dims(w, [2, 0, 1]))        # (5, 3, 4)
            w2 = bb.emit(relax.op.reshape(wt, (5, 12)))
            y = bb.emit_output(relax.op.matmul(x, relax.op.permute_dims(w2)))
        bb.emit_func_output(y)
    mod = FoldParamLayouts()(bb.get())
    names = [p.name for p in mod["main"].params]
    assert names == ["x", "w_folded"]
    layouts = folded_layouts(mod["main"])
    (fold,) = layouts.folds
    assert isinstance(fold, Fold) and fold.source == "w"
    v = np.arange(60, dtype="float32").reshape(3, 4, 5)
    folded = layouts.to_compute({"w": v})["w_folded"]
    assert np.array_equal(folded, v.transpose(2, 0, 1).reshape(5, 12).T)
    assert np.array_equal(layouts.to_user({"w_folded": folded})["w"], v)
    xv = np.random.default_rng(2).standard_normal((2, 12)).astype("float32")
    ex = relax.VirtualMachine(build_lowered(lower(mod, "llvm"), "llvm"), tvm.cpu())
    got = ex["main"](tvm.runtime.tensor(xv), tvm.runtime.tensor(folded)).numpy()
    assert np.array_equal(got, plain_run(bb.get(), {"w": v}, xv, fuse_transpose=False)[0])


def test_a_weight_also_read_as_it_is_stays_beside_its_folded_form():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([4, 4], "float32"))
    w = relax.Var("w", relax.TensorType([4, 4], "float32"))
    with bb.function("main", [x, w], attrs={"num_input": 1}):
        with bb.dataflow():
            a = bb.emit(relax.op.matmul(x, relax.op.permute_dims(w)))
            y = bb.emit_output(relax.op.add(a, w))
        bb.emit_func_output(y)
    mod = FoldParamLayouts()(bb.get())
    assert [p.name for p in mod["main"].params] == ["x", "w", "w_T"]
    assert folded_layouts(mod["main"]).kept == ("w",)


def test_a_cross_compiled_library_ships_the_folded_weights_too(tmp_path):
    """CUDA without a GPU (built, not run): the params trailer holds the program's layout as export_library's
    does, so loading it on a GPU gives the user's weights back (tvm_swap.cli.cross_compile)."""
    from tvm_swap.cli.cross_compile import cross_compile

    mod, params = linear_model()
    out = str(tmp_path / "m.so")
    cross_compile(mod, params, out, target="cuda -arch=sm_90", mem_limit="95%", generations=1)
    shipped, _ = embedded_params(out)
    assert sorted(shipped) == ["b1", "w1_T", "w2_T"]
    assert np.array_equal(shipped["w1_T"], params["w1"].T)
