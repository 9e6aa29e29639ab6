"""tvm_swap.examples: the bundled models compute what they claim (checked against numpy)."""
import numpy as np
import pytest

import tvm
from tvm import relax  # noqa: E402

from relay_passes import lower_unlimited_build  # noqa: E402
from tvm_swap.errors import TvmSwapError  # noqa: E402
from tvm_swap.examples import EXAMPLES, get_example, mlp, mlp_train_step  # noqa: E402


def _run(mod, args):
    vm = relax.VirtualMachine(lower_unlimited_build(mod), tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(a) for a in args])
    return [out.numpy()] if isinstance(out, tvm.runtime.Tensor) else [o.numpy() for o in out]


def _np_mlp(x, params):
    ws = list(params.values())
    hs = [x]
    for i in range(0, len(ws), 2):
        z = hs[-1] @ ws[i] + ws[i + 1]
        hs.append(np.maximum(z, 0) if i + 2 < len(ws) else z)
    return hs


def _np_sgd_step(x, y, params, lr):
    """Reference forward + mean cross-entropy + backward + SGD for the MLP."""
    ws = list(params.values())
    hs = _np_mlp(x, params)
    logits = hs[-1]
    logp = logits - logits.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    loss = -(logp * y).sum() / x.shape[0]
    g = (np.exp(logp) - y) / x.shape[0]
    grads = [None] * len(ws)
    for i in range(len(ws) - 2, -1, -2):
        grads[i], grads[i + 1] = hs[i // 2].T @ g, g.sum(0)
        g = (g @ ws[i].T) * (hs[i // 2] > 0)
    return loss, [w - lr * gw for w, gw in zip(ws, grads)]


def test_mlp_forward_matches_numpy():
    ex = mlp(batch=4, in_features=8, hidden=(16, 16), classes=3)
    (out,) = _run(ex.mod, ex.args())
    np.testing.assert_allclose(out, _np_mlp(ex.inputs["x"], ex.params)[-1], rtol=1e-5, atol=1e-5)


def test_mlp_train_step_matches_numpy_sgd():
    ex = mlp_train_step(batch=6, in_features=8, hidden=(16,), classes=3, lr=0.1)
    outs = _run(ex.mod, ex.args())
    loss, new = _np_sgd_step(ex.inputs["x"], ex.inputs["y"], ex.params, 0.1)
    np.testing.assert_allclose(outs[0], loss, rtol=1e-5)
    assert len(outs) == 1 + len(new)
    for got, want in zip(outs[1:], new):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert ex.mod["main"].attrs["tvm_swap.updates"][0][1] == 2   # output 1 replaces param 2 (w0)


def test_cnn_train_steps_reduce_the_loss():
    ex = get_example("cnn-train", batch=4, channels=(4, 8), image=8, lr=0.05)
    vm = relax.VirtualMachine(lower_unlimited_build(ex.mod), tvm.cpu())
    inputs = [tvm.runtime.tensor(a) for a in ex.inputs.values()]
    params = [tvm.runtime.tensor(a) for a in ex.params.values()]
    losses = []
    for _ in range(5):
        loss, *params = vm["main"](*inputs, *params)
        losses.append(float(loss.numpy()))
    assert losses[-1] < losses[0]


def test_registry_and_determinism():
    assert set(EXAMPLES) == {"mlp", "cnn", "mlp-train", "cnn-train"}
    a, b = get_example("mlp", batch=2), get_example("mlp", batch=2)
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    assert list(a.mod["main"].params[0].ty.shape.values) == [2, 256]
    with pytest.raises(TvmSwapError, match="unknown example 'nope'"):
        get_example("nope")
