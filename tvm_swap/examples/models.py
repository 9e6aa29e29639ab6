"""An MLP and a small CNN (forward and SGD training step), sized so swapping matters yet a CPU runs them fast.

Default sizes are chosen so that no single kernel dominates memory: every example can be planned down to
about a third of its no-swap peak (see MLP_* and CNN_* below). Each builds in a few seconds and runs in
well under a second on llvm.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .train import sgd_train_step


class Example(NamedTuple):
    mod: object          # tvm.IRModule with function "main"
    params: dict         # name -> np.ndarray, in main's parameter order (after the inputs)
    inputs: dict         # name -> np.ndarray, main's first parameters

    def args(self) -> list:
        """numpy arguments of main in order: inputs, then params."""
        return [*self.inputs.values(), *self.params.values()]


def _tensor_var(name, shape, dtype="float32"):
    from tvm import relax

    return relax.Var(name, relax.TensorType(list(shape), dtype))


def _init(rng, shape, fan_in):
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype("float32")


# ---- MLP ----
# Eight equal layers: no single kernel dominates, so plans exist down to ~1/4 of the no-swap peak.
MLP_BATCH, MLP_HIDDEN = 64, (256,) * 8
def _mlp_params(rng, in_features, hidden, classes):
    dims = [in_features, *hidden, classes]
    params = {}
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        params[f"w{i}"] = _init(rng, (a, b), a)
        params[f"b{i}"] = (rng.standard_normal((b,)) * 0.1).astype("float32")
    return params


def _mlp_body(bb, x, pvars):
    """Dense layers with relu between them; returns the logits."""
    from tvm import relax

    h = x
    n = len(pvars) // 2
    for i in range(n):
        h = bb.emit(relax.op.add(relax.op.matmul(h, pvars[2 * i]), pvars[2 * i + 1]))
        if i < n - 1:
            h = bb.emit(relax.op.nn.relu(h))
    return h


def _mlp_parts(batch, in_features, hidden, classes, seed):
    rng = np.random.default_rng(seed)
    params = _mlp_params(rng, in_features, hidden, classes)
    x = rng.standard_normal((batch, in_features)).astype("float32")
    return rng, params, x


def mlp(batch=MLP_BATCH, in_features=256, hidden=MLP_HIDDEN, classes=10, seed=0) -> Example:
    """Forward pass: main(x, w0, b0, ...) -> logits."""
    from tvm import relax

    _, params, x = _mlp_parts(batch, in_features, hidden, classes, seed)
    bb = relax.BlockBuilder()
    xv = _tensor_var("x", x.shape)
    pvars = [_tensor_var(k, v.shape) for k, v in params.items()]
    with bb.function("main", [xv, *pvars], attrs={"num_input": 1}):
        with bb.dataflow():
            out = bb.emit_output(_mlp_body(bb, xv, pvars))
        bb.emit_func_output(out)
    return Example(bb.get(), params, {"x": x})


def _one_hot(rng, batch, classes):
    y = np.zeros((batch, classes), "float32")
    y[np.arange(batch), rng.integers(0, classes, batch)] = 1.0
    return y


def _loss_function(body, inputs, params):
    """relax.Function loss(x, y, *params) = mean cross-entropy of body(x, params) against one-hot y."""
    from tvm import relax

    bb = relax.BlockBuilder()
    xv = _tensor_var("x", inputs["x"].shape)
    yv = _tensor_var("y", inputs["y"].shape)
    pvars = [_tensor_var(k, v.shape) for k, v in params.items()]
    with bb.function("loss", [xv, yv, *pvars]):
        with bb.dataflow():
            logits = body(bb, xv, pvars)
            logp = bb.emit(relax.op.nn.log_softmax(logits))
            loss = bb.emit_output(relax.op.nn.cross_entropy_with_logits(logp, yv))
        bb.emit_func_output(loss)
    return bb.get()["loss"]


def mlp_train_step(batch=MLP_BATCH, in_features=256, hidden=MLP_HIDDEN, classes=10, lr=0.01, seed=0) -> Example:
    """main(x, y_onehot, w0, b0, ...) -> (loss, new_w0, new_b0, ...), one SGD step."""
    rng, params, x = _mlp_parts(batch, in_features, hidden, classes, seed)
    inputs = {"x": x, "y": _one_hot(rng, batch, classes)}
    mod = sgd_train_step(_loss_function(_mlp_body, inputs, params), num_inputs=2, lr=lr)
    return Example(mod, params, inputs)


# ---- CNN ----
# Deep enough that no single kernel dominates, so both run down to ~1/3 of their no-swap peak: the training
# step is activation-heavy (16 thin layers), inference weight-heavy (8 wide layers at batch 1).
CNN_BATCH, CNN_CHANNELS, CNN_POOL_EVERY = 8, (8,) * 16, 8
def _cnn_params(rng, in_channels, channels, image, classes, pool_every=1):
    params = {}
    c_in = in_channels
    for i, c in enumerate(channels):
        params[f"conv{i}_w"] = _init(rng, (c, c_in, 3, 3), c_in * 9)
        params[f"conv{i}_b"] = (rng.standard_normal((1, c, 1, 1)) * 0.1).astype("float32")
        c_in = c
    side = image // 2 ** (len(channels) // pool_every)
    flat = c_in * side * side
    params["fc_w"] = _init(rng, (flat, classes), flat)
    params["fc_b"] = (rng.standard_normal((classes,)) * 0.1).astype("float32")
    return params


def _cnn_body(bb, x, pvars, pool_every=1):
    """(conv3x3 + bias, relu) per layer, maxpool2 after every `pool_every` layers, then one dense layer."""
    from tvm import relax

    h = x
    n_conv = (len(pvars) - 2) // 2
    for i in range(n_conv):
        h = bb.emit(relax.op.nn.conv2d(h, pvars[2 * i], padding=1))
        h = bb.emit(relax.op.nn.relu(relax.op.add(h, pvars[2 * i + 1])))
        if (i + 1) % pool_every == 0:
            h = bb.emit(relax.op.nn.max_pool2d(h, pool_size=2, strides=2))
    batch = int(x.ty.shape[0])
    h = bb.emit(relax.op.reshape(h, [batch, -1]))
    return bb.emit(relax.op.add(relax.op.matmul(h, pvars[-2]), pvars[-1]))


def _cnn_parts(batch, in_channels, channels, image, classes, seed, pool_every=1):
    rng = np.random.default_rng(seed)
    params = _cnn_params(rng, in_channels, channels, image, classes, pool_every)
    x = rng.standard_normal((batch, in_channels, image, image)).astype("float32")
    return rng, params, x


def small_cnn(batch=1, in_channels=3, channels=(64,) * 12, image=16, classes=10, seed=0,
              pool_every=6) -> Example:
    """Forward pass: main(x, conv0_w, conv0_b, ..., fc_w, fc_b) -> logits."""
    from tvm import relax

    _, params, x = _cnn_parts(batch, in_channels, channels, image, classes, seed, pool_every)
    bb = relax.BlockBuilder()
    xv = _tensor_var("x", x.shape)
    pvars = [_tensor_var(k, v.shape) for k, v in params.items()]
    with bb.function("main", [xv, *pvars], attrs={"num_input": 1}):
        with bb.dataflow():
            out = bb.emit_output(_cnn_body(bb, xv, pvars, pool_every))
        bb.emit_func_output(out)
    return Example(bb.get(), params, {"x": x})


def cnn_train_step(batch=CNN_BATCH, in_channels=3, channels=CNN_CHANNELS, image=32, classes=10, lr=0.01, seed=0,
                   pool_every=CNN_POOL_EVERY) -> Example:
    """main(x, y_onehot, conv0_w, ...) -> (loss, new params...), one SGD step."""
    rng, params, x = _cnn_parts(batch, in_channels, channels, image, classes, seed, pool_every)
    inputs = {"x": x, "y": _one_hot(rng, batch, classes)}
    body = lambda bb, xv, pvars: _cnn_body(bb, xv, pvars, pool_every)  # noqa: E731
    mod = sgd_train_step(_loss_function(body, inputs, params), num_inputs=2, lr=lr)
    return Example(mod, params, inputs)


EXAMPLES = {
    "mlp": mlp,
    "cnn": small_cnn,
    "mlp-train": mlp_train_step,
    "cnn-train": cnn_train_step,
}


def get_example(name: str, **kw) -> Example:
    """Build a bundled example by name, e.g. get_example("mlp-train", batch=32)."""
    from ..errors import TvmSwapError

    try:
        builder = EXAMPLES[name]
    except KeyError:
        raise TvmSwapError(f"unknown example {name!r}; bundled examples: {', '.join(EXAMPLES)}") from None
    return builder(**kw)
