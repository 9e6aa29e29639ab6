"""Tiny models and reference runs shared by the runtime tests (test_apply, test_runtime, test_build, test_export).

Sized so that 35% of the no-swap peak is above the smallest feasible limit (the largest op is small next to
the whole model), yet each builds in well under a second and runs in milliseconds on llvm:
- mlp / mlp-train: the bundled MLP with 8 narrow hidden layers (weights dominate the forward peak);
- cnn / cnn-train: 8 same-size 3x3 conv+relu layers, then a 2x2 max-pool and a dense layer (the bundled CNN
  pools after every conv, so its first layer alone is ~all of its peak and no swap plan helps it).
"""
from __future__ import annotations

import numpy as np


def mlp(train: bool = False):
    from tvm_swap.examples import models

    kw = dict(batch=32, in_features=64, hidden=(128,) * 8, classes=10)
    return models.mlp_train_step(**kw) if train else models.mlp(**kw)


def cnn(train: bool = False, batch: int = 2, channels: int = 32, layers: int = 8, image: int = 8,
        in_channels: int = 4, classes: int = 10, seed: int = 0):
    from tvm import relax

    from tvm_swap.examples.models import Example
    from tvm_swap.examples.train import sgd_train_step

    rng = np.random.default_rng(seed)
    params = {}
    c = in_channels
    for i in range(layers):
        params[f"conv{i}_w"] = (rng.standard_normal((channels, c, 3, 3)) * np.sqrt(2.0 / (9 * c))).astype("float32")
        c = channels
    flat = channels * (image // 2) ** 2
    params["fc_w"] = (rng.standard_normal((flat, classes)) * np.sqrt(2.0 / flat)).astype("float32")
    x = rng.standard_normal((batch, in_channels, image, image)).astype("float32")
    y = np.eye(classes, dtype="float32")[rng.integers(0, classes, batch)]

    def var(name, shape):
        return relax.Var(name, relax.TensorType(list(shape), "float32"))

    xv, yv = var("x", x.shape), var("y", y.shape)
    pv = [var(k, v.shape) for k, v in params.items()]
    ins = [xv, yv] if train else [xv]
    bb = relax.BlockBuilder()
    with bb.function("main", [*ins, *pv], attrs={"num_input": len(ins)}):
        with bb.dataflow():
            h = xv
            for i in range(layers):
                h = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(h, pv[i], padding=1)))
            h = bb.emit(relax.op.nn.max_pool2d(h, pool_size=2, strides=2))
            h = bb.emit(relax.op.reshape(h, [batch, -1]))
            out = bb.emit(relax.op.matmul(h, pv[-1]))
            if train:
                d = bb.emit(relax.op.subtract(out, yv))
                out = bb.emit(relax.op.sum(relax.op.multiply(d, d)))
            out = bb.emit_output(out)
        bb.emit_func_output(out)
    mod = bb.get()
    if train:
        mod = sgd_train_step(mod["main"], len(ins))
    return Example(mod, params, {"x": x, "y": y} if train else {"x": x})


MODELS = {"mlp": lambda: mlp(False), "mlp-train": lambda: mlp(True),
          "cnn": lambda: cnn(False), "cnn-train": lambda: cnn(True)}


def flat(out) -> list:
    """A SwapModule / VM result as a list of numpy arrays."""
    import tvm

    if isinstance(out, np.ndarray):
        return [out]
    if isinstance(out, tvm.runtime.Tensor):
        return [out.numpy()]
    return [x for o in out for x in flat(o)]


class Unlimited:
    """The plain build (TVM's own memory plan, same fused kernels) of a model: the bitwise reference."""

    def __init__(self, mod, fuse_max_depth=None):
        import tvm
        from tvm import relax

        from relay_passes.lower import lower_unlimited_build

        self.vm = relax.VirtualMachine(lower_unlimited_build(mod, "llvm", fuse_max_depth=fuse_max_depth), tvm.cpu())

    def __call__(self, inputs: list, params: list) -> list:
        import tvm

        return flat(self.vm["main"](*[tvm.runtime.tensor(np.asarray(a, order="C")) for a in [*inputs, *params]]))


def bitwise_equal(a: list, b: list) -> bool:
    def same(x, y):
        return x.shape == y.shape and x.dtype == y.dtype and \
            np.array_equal(x.reshape(-1).view(np.uint8), y.reshape(-1).view(np.uint8))
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def assert_steps_match_unlimited(m, mod, inputs: list, params: list, steps: int = 3, what: str = "",
                                 params_each_step: bool = False) -> list:
    """Run `steps` chained training steps of module `m` and of the unlimited build of `mod`, each step's
    updated params feeding the next (results: loss, then the updated params): every result must be bitwise
    equal, and so must `m.params()` at the end (after every step with `params_each_step`). Returns the last
    step's params."""
    ref = Unlimited(mod)
    for step in range(steps):
        want = ref(inputs, params)
        assert bitwise_equal(flat(m(*inputs)), want), f"{what}step {step} differs from the unlimited build"
        params = want[1:]
        if params_each_step or step == steps - 1:
            got = [np.asarray(v) for v in m.params().values()]
            assert bitwise_equal(got, params), f"{what}params after step {step} differ"
    return params
