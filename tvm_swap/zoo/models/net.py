"""A small layer library over relax.BlockBuilder for writing the zoo models at real sizes.

`Net` emits ops into the current dataflow block and records the function's inputs and parameters
as it meets them, so a model is written as straight-line code. Only shapes matter (nothing is run),
so there are no initial values. Layouts: NCHW activations, OIHW conv weights, (in, out) dense
weights (so the forward pass has no materialized weight transposes).
"""
from __future__ import annotations

import math

from tvm import relax
from tvm.relax import op as R


def shape_of(x) -> list[int]:
    return [int(d) for d in x.ty.shape.values]


class Net:
    def __init__(self, bb: relax.BlockBuilder, dtype: str = "float32"):
        self.bb = bb
        self.dtype = dtype
        self.inputs: list[relax.Var] = []
        self.params: list[relax.Var] = []
        self._names: set[str] = set()

    # ---- function arguments ----
    def _var(self, name, shape, dtype):
        if name in self._names:
            raise ValueError(f"duplicate argument name {name!r}")
        self._names.add(name)
        return relax.Var(name, relax.TensorType([int(s) for s in shape], dtype))

    def input(self, name: str, shape, dtype: str | None = None) -> relax.Var:
        v = self._var(name, shape, dtype or self.dtype)
        self.inputs.append(v)
        return v

    def param(self, name: str, shape) -> relax.Var:
        v = self._var(name, shape, self.dtype)
        self.params.append(v)
        return v

    def emit(self, expr):
        return self.bb.emit(expr)

    def const(self, value: float):
        return relax.const(value, self.dtype)

    # ---- dense / elementwise ----
    def dense(self, x, out_features: int, name: str, bias: bool = True):
        """x (..., in) @ W (in, out) [+ b]."""
        w = self.param(f"{name}.weight", (shape_of(x)[-1], out_features))
        y = self.emit(R.matmul(x, w))
        if bias:
            y = self.emit(R.add(y, self.param(f"{name}.bias", (out_features,))))
        return y

    def relu(self, x):
        return self.emit(R.nn.relu(x))

    def layer_norm(self, x, name: str, eps: float = 1e-12):
        c = shape_of(x)[-1]
        g = self.param(f"{name}.gamma", (c,))
        b = self.param(f"{name}.beta", (c,))
        return self.emit(R.nn.layer_norm(x, g, b, axes=[-1], epsilon=eps))

    # ---- convolution ----
    def conv2d(self, x, out_ch: int, kernel, name: str, stride=1, padding=0):
        """No bias: every conv here is followed by batch norm. padding: int, (h, w) or 'same'."""
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        if padding == "same":
            padding = (kh // 2, kw // 2)
        ph, pw = (padding, padding) if isinstance(padding, int) else padding
        in_ch = shape_of(x)[1]
        w = self.param(f"{name}.weight", (out_ch, in_ch, kh, kw))
        return self.emit(R.nn.conv2d(x, w, strides=stride, padding=(ph, pw, ph, pw)))

    def batch_norm(self, x, name: str, eps: float = 1e-5):
        """Training-mode batch norm from primitive ops (batch statistics; every op has a gradient)."""
        c = shape_of(x)[1]
        gamma = self.param(f"{name}.gamma", (1, c, 1, 1))
        beta = self.param(f"{name}.beta", (1, c, 1, 1))
        mean = self.emit(R.mean(x, axis=[0, 2, 3], keepdims=True))
        var = self.emit(R.variance(x, axis=[0, 2, 3], keepdims=True))
        std = self.emit(R.sqrt(R.add(var, self.const(eps))))
        y = self.emit(R.divide(R.subtract(x, mean), std))
        return self.emit(R.add(R.multiply(y, gamma), beta))

    def conv_bn(self, x, out_ch, kernel, name, stride=1, padding=0, relu=True):
        y = self.batch_norm(self.conv2d(x, out_ch, kernel, name, stride, padding), f"{name}.bn")
        return self.relu(y) if relu else y

    def max_pool(self, x, size=3, stride=2, padding=0):
        return self.emit(R.nn.max_pool2d(x, pool_size=size, strides=stride, padding=padding))

    def avg_pool(self, x, size=3, stride=1, padding=1):
        return self.emit(R.nn.avg_pool2d(x, pool_size=size, strides=stride, padding=padding,
                                         count_include_pad=False))

    def global_avg_pool(self, x):
        """(N, C, H, W) -> (N, C)."""
        return self.emit(R.mean(x, axis=[2, 3]))

    def concat(self, xs, axis=1):
        return self.emit(R.concat(xs, axis=axis))

    # ---- loss ----
    def softmax_cross_entropy(self, logits, labels):
        """Mean cross entropy of (N, C) logits against (N,) int64 labels: a scalar."""
        return self.emit(R.nn.nll_loss(self.emit(R.nn.log_softmax(logits, axis=-1)), labels))


def gelu_grad_registered() -> bool:
    import tvm

    return tvm.ir.Op.get("relax.nn.gelu").get_attr("FPrimalGradient") is not None


def register_gelu_gradient() -> None:
    """relax.nn.gelu has no gradient in TVM 0.27: d/dx x*Phi(x) = Phi(x) + x*phi(x). Idempotent."""
    if gelu_grad_registered():
        return
    from tvm.relax.op import register_gradient

    def gelu_grad(orig_var, orig_call, output_grad, ctx):
        x = orig_call.args[0]
        dt = x.ty.dtype
        c = lambda v: relax.const(v, dt)  # noqa: E731
        cdf = R.multiply(c(0.5), R.add(c(1.0), R.erf(R.multiply(x, c(1.0 / math.sqrt(2.0))))))
        pdf = R.multiply(c(1.0 / math.sqrt(2.0 * math.pi)), R.exp(R.multiply(c(-0.5), R.multiply(x, x))))
        return [R.multiply(output_grad, R.add(cdf, R.multiply(x, pdf)))]

    register_gradient("relax.nn.gelu", gelu_grad, level=11)
