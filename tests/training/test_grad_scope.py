"""train_step differentiates only what depends on a trainable param (tvm_swap.training.grad_scope): ops without a
gradient (arange, bitwise_and, ...) computing masks or ids from shapes, inputs or frozen params are fine."""
import numpy as np
import pytest

import tvm
from tvm import relax  # noqa: E402

from tvm_swap.errors import TvmSwapError  # noqa: E402
from tvm_swap.training.grad_scope import dependent_vars, split_by_dependence  # noqa: E402
from tvm_swap.training import train_step  # noqa: E402

R = relax.op


def _model():
    """main(x, w, f) = matmul(x, w) + float(arange(4) & 1) * f  (f: a frozen param)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([2, 3], "float32"))
    w = relax.Var("w", relax.TensorType([3, 4], "float32"))
    f = relax.Var("f", relax.TensorType([4], "float32"))
    with bb.function("main", [x, w, f]):
        with bb.dataflow():
            ids = bb.emit(R.arange(0, 4, 1, "int64"), "ids")
            odd = bb.emit(R.astype(R.bitwise_and(ids, relax.const(1, "int64")), "float32"), "odd")
            bias = bb.emit(R.multiply(odd, f), "bias")
            y = bb.emit(R.add(R.matmul(x, w), bias), "y")
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()["main"].with_attr("num_input", 1)


def test_split_puts_integer_and_frozen_work_in_the_prelude():
    func = _model()
    dep = dependent_vars(func, [func.params[1]])
    names = {b.var.name: b.var in dep for b in func.body.blocks[0].bindings}
    assert names["ids"] is False and names["bias"] is False and names["y"] is True
    split = split_by_dependence(func, [func.params[1]])
    assert split.n_boundary == 1                       # only `bias` crosses into the core
    with pytest.raises(TvmSwapError, match="does not depend on any trainable"):
        split_by_dependence(func, [relax.Var("unused", func.params[2].ty)])


def test_train_step_through_ops_without_gradients_matches_numpy():
    mod = tvm.IRModule({"main": _model()})
    rng = np.random.default_rng(0)
    x, w, f = (rng.standard_normal(s).astype("float32") for s in [(2, 3), (3, 4), (4,)])
    labels = rng.standard_normal((2, 4)).astype("float32")
    step, state = train_step(mod, {"w": w, "f": f}, loss="mse", optimizer="sgd", lr=0.1, frozen=["f"])
    vm = relax.VirtualMachine(relax.build(step, "llvm"), tvm.cpu())
    loss, new_w = (o.numpy() for o in vm["main"](*[tvm.runtime.tensor(a) for a in (x, labels, w, f)]))
    bias = (np.arange(4) & 1).astype("float32") * f
    err = x @ w + bias - labels
    np.testing.assert_allclose(loss, np.mean(err ** 2), rtol=1e-5)
    np.testing.assert_allclose(new_w, w - 0.1 * x.T @ (2 * err / err.size), rtol=1e-5, atol=1e-6)
