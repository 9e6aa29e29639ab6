"""Our registered gradients (tvm_swap.training.gradients) against central differences, in float64.

Each case builds loss = sum(op(inputs) * R) with a fixed random R (so every output element has its own
weight), takes relax.transform.Gradient of it, and compares the adjoint with (f(x+h) - f(x-h)) / 2h
for every input element.
"""
from __future__ import annotations

import numpy as np
import pytest

import tvm
from tvm import relax  # noqa: E402

from tvm_swap.training import gradients  # noqa: E402

RNG = np.random.default_rng(0)


def _build(mod, name):
    mod = relax.transform.LegalizeOps()(mod)
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), tvm.cpu())
    return vm[name]


def _check(make, arrays, wrt=None, h=1e-6, rtol=1e-6, atol=1e-8):
    """make(vars) -> the op's result expr; arrays: numpy inputs; wrt: indices differentiated (default all float)."""
    gradients.register()
    wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"] if wrt is None else wrt
    vars_ = [relax.Var(f"a{i}", relax.TensorType(list(a.shape), str(a.dtype))) for i, a in enumerate(arrays)]
    bb = relax.BlockBuilder()
    with bb.function("f", vars_):
        with bb.dataflow():
            out = bb.emit(make(vars_))
            weight = RNG.standard_normal([int(d) for d in out.ty.shape.values])
            loss = bb.emit_output(relax.op.sum(relax.op.multiply(out, relax.const(weight, "float64"))))
        bb.emit_func_output(loss)
    mod = bb.get()
    mod = relax.transform.Gradient("f", require_grads=[vars_[i] for i in wrt])(mod)
    f, f_adj = _build(mod, "f"), _build(mod, "f_adjoint")
    dev = [tvm.runtime.tensor(a) for a in arrays]
    _, grads = f_adj(*dev)
    for k, i in enumerate(wrt):
        got = grads[k].numpy()
        assert got.shape == arrays[i].shape, f"gradient of input {i} has shape {got.shape}"
        want = np.zeros_like(arrays[i])
        for j in np.ndindex(arrays[i].shape):
            plus = [a.copy() for a in arrays]
            minus = [a.copy() for a in arrays]
            plus[i][j] += h
            minus[i][j] -= h
            fp = f(*[tvm.runtime.tensor(a) for a in plus]).numpy()
            fm = f(*[tvm.runtime.tensor(a) for a in minus]).numpy()
            want[j] = (fp - fm) / (2 * h)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")


def _x(*shape):
    return RNG.uniform(-2, 2, size=shape)


def test_gelu():
    _check(lambda v: relax.op.nn.gelu(v[0]), [_x(3, 4)])


def test_gelu_tanh():
    _check(lambda v: relax.op.nn.gelu_tanh(v[0]), [_x(3, 4)])


def test_erf():
    _check(lambda v: relax.op.erf(v[0]), [_x(3, 4)])


def test_rsqrt():
    _check(lambda v: relax.op.rsqrt(v[0]), [RNG.uniform(0.5, 2.0, size=(3, 4))])


def test_squeeze():
    _check(lambda v: relax.op.squeeze(v[0], [1]), [_x(3, 1, 4)])


def test_stack():
    _check(lambda v: relax.op.stack([v[0], v[1], v[2]], axis=1), [_x(2, 3), _x(2, 3), _x(2, 3)])


def test_stack_negative_axis():
    _check(lambda v: relax.op.stack([v[0], v[1]], axis=-1), [_x(2, 3), _x(2, 3)])


def test_strided_slice_unit_stride():
    _check(lambda v: relax.op.strided_slice(v[0], [0, 1], [1, -4], [3, 5]), [_x(4, 6)])


def test_strided_slice_strided_and_reversed():
    _check(lambda v: relax.op.strided_slice(v[0], [0, 1], [0, 5], [4, 0], [2, -2]), [_x(4, 6)])


def test_take_0d_index():
    idx = np.array(2, dtype="int64")
    _check(lambda v: relax.op.take(v[0], v[1], axis=0), [_x(4, 3), idx], wrt=[0])


def test_take_2d_index_repeats_accumulate():
    idx = np.array([[0, 2], [2, 3]], dtype="int64")
    _check(lambda v: relax.op.take(v[0], v[1], axis=0), [_x(4, 3), idx], wrt=[0])


def test_take_1d_index_axis1():
    idx = np.array([1, 1, 0], dtype="int64")
    _check(lambda v: relax.op.take(v[0], v[1], axis=1), [_x(2, 3), idx], wrt=[0])


def test_where_broadcast_operands():
    cond = RNG.uniform(size=(3, 4)) > 0.5
    _check(lambda v: relax.op.where(v[0], v[1], v[2]), [cond, _x(1, 4), _x(3, 1)], wrt=[1, 2])


def test_where_same_shape():
    cond = RNG.uniform(size=(3, 4)) > 0.5
    _check(lambda v: relax.op.where(v[0], v[1], v[2]), [cond, _x(3, 4), _x(3, 4)], wrt=[1, 2])


def test_clip():
    """hardswish / hardsigmoid decompose to clip (MobileNetV3); points away from the bounds."""
    x = _x(3, 5)
    x[np.abs(np.abs(x) - 1.0) < 1e-3] = 0.5
    _check(lambda v: relax.op.clip(v[0], -1.0, 1.0), [x])


def test_gather_elements_repeated_indices_accumulate():
    """transformers' own loss picks each target's log-probability with gather_elements."""
    idx = np.array([[0, 2, 2], [1, 1, 0]], dtype="int64")
    _check(lambda v: relax.op.gather_elements(v[0], v[1], axis=1), [_x(2, 4), idx])


def _labels(*shape, classes, ignored=()):
    t = RNG.integers(0, classes, size=shape).astype("int64")
    for pos in ignored:
        t[pos] = -100
    return t


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_ignore_index(reduction):
    logp, t = _x(5, 4), _labels(5, classes=4, ignored=[1, 3])
    _check(lambda v: relax.op.nn.nll_loss(v[0], v[1], reduction=reduction), [logp, t], wrt=[0])


def test_nll_loss_weights_and_spatial():
    logp, t, w = _x(2, 3, 4), _labels(2, 4, classes=3, ignored=[(0, 1)]), RNG.uniform(0.5, 2, size=3)
    _check(lambda v: relax.op.nn.nll_loss(v[0], v[1], v[2], reduction="mean"), [logp, t, w], wrt=[0])


def test_nll_loss_positive_ignore_index():
    logp, t = _x(6, 4), _labels(6, classes=4)
    _check(lambda v: relax.op.nn.nll_loss(v[0], v[1], reduction="mean", ignore_index=2), [logp, t], wrt=[0])


def test_register_is_idempotent():
    gradients.register()
    gradients.register()
    for name in gradients.GRADIENTS:
        assert tvm.ir.Op.get(name).get_attr("FPrimalGradient") is not None, name
