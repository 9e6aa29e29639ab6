"""Converters from MXNet operators to Relax ops, one function per operator family.

Each converter is `fn(ctx, node) -> expr | list[expr]` (a list for multi-output operators); `ctx` is the
MXNetImporter. Defaults are MXNet 1.9's, because symbol-API JSON omits defaulted attributes.
"""
from __future__ import annotations

import math

from .lazy_tvm import LazyModule
from .mxnet_registry import Fill, register

relax = LazyModule("tvm.relax")           # TVM on the first conversion, not on import
R = LazyModule("tvm.relax.op")


def _norm_axis(ctx, node, axis: int, ndim: int, key: str = "axis") -> int:
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < ndim:
        raise ctx.error(node, f"{key}={axis} is out of range for a {ndim}-d input")
    return a


def _spatial(a, key: str, nd: int, fill: int) -> tuple:
    t = a.tuple(key, ())
    if not t:
        return (fill,) * nd
    if len(t) != nd:
        raise a.unsupported(key, f"needs {nd} values to match the kernel")
    return t


def _channel_bcast(x, ndim: int, axis: int, size: int):
    """Reshape a (C,) vector so it broadcasts along `axis` of an ndim-d tensor."""
    shape = [1] * ndim
    shape[axis] = size
    return R.reshape(x, shape)


def _check_layout(a, nd: int):
    layout = a.str("layout")
    expected = {1: "NCW", 2: "NCHW", 3: "NCDHW"}.get(nd)
    if layout is not None and layout != expected:
        raise a.unsupported("layout", f"only {expected} is supported for {nd}-d kernels")
    if expected is None:
        raise a.unsupported("kernel", "only 1-d, 2-d and 3-d kernels are supported")


# ---------------------------------------------------------------- convolution, pooling, dense layers
@register("Convolution")
def convolution(ctx, node):
    a = node.attrs
    kernel = a.tuple("kernel")
    nd = len(kernel)
    _check_layout(a, nd)
    stride, dilate, pad = _spatial(a, "stride", nd, 1), _spatial(a, "dilate", nd, 1), _spatial(a, "pad", nd, 0)
    num_filter, groups = a.int("num_filter"), a.int("num_group", 1)
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    if len(shape) != nd + 2:
        raise ctx.error(node, f"a {nd}-d kernel needs a {nd + 2}-d input, got shape {shape}")
    if shape[1] % groups or num_filter % groups:
        raise a.unsupported("num_group", f"{shape[1]} input and {num_filter} output channels are not divisible by it")
    w = ctx.input(node, 1, (num_filter, shape[1] // groups) + kernel)
    conv = {1: R.nn.conv1d, 2: R.nn.conv2d, 3: R.nn.conv3d}[nd]
    y = ctx.emit(conv(x, w, strides=stride, padding=pad, dilation=dilate, groups=groups))
    if not a.bool("no_bias", False):
        b = ctx.input(node, 2, (num_filter,))
        y = R.add(y, _channel_bcast(b, nd + 2, 1, num_filter))
    return y


@register("Deconvolution")
def deconvolution(ctx, node):
    a = node.attrs
    kernel = a.tuple("kernel")
    nd = len(kernel)
    _check_layout(a, nd)
    if nd not in (1, 2, 3):
        raise a.unsupported("kernel")
    if a.tuple("target_shape", ()):
        raise a.unsupported("target_shape", "give pad/adj instead")
    stride, dilate, pad = _spatial(a, "stride", nd, 1), _spatial(a, "dilate", nd, 1), _spatial(a, "pad", nd, 0)
    adj = _spatial(a, "adj", nd, 0)
    num_filter, groups = a.int("num_filter"), a.int("num_group", 1)
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    if shape[1] % groups or num_filter % groups:
        raise a.unsupported("num_group", "channels are not divisible by it")
    w = ctx.input(node, 1, (shape[1], num_filter // groups) + kernel)
    conv = {1: R.nn.conv1d_transpose, 2: R.nn.conv2d_transpose, 3: R.nn.conv3d_transpose}[nd]
    y = ctx.emit(conv(x, w, strides=stride, padding=pad, output_padding=adj, dilation=dilate, groups=groups))
    if not a.bool("no_bias", True):  # Deconvolution's MXNet default is no_bias=True
        b = ctx.input(node, 2, (num_filter,))
        y = R.add(y, _channel_bcast(b, nd + 2, 1, num_filter))
    return y


@register("Pooling")
def pooling(ctx, node):
    a = node.attrs
    pool_type = a.choice("pool_type", "max", {"max", "avg", "sum"})
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    nd = len(shape) - 2
    _check_layout(a, nd)
    if a.bool("global_pool", False):
        axes = list(range(2, len(shape)))
        return {"max": R.max, "avg": R.mean, "sum": R.sum}[pool_type](x, axes, keepdims=True)
    kernel = a.tuple("kernel")
    if len(kernel) != nd:
        raise a.unsupported("kernel", f"input has {nd} spatial dims")
    stride, pad = _spatial(a, "stride", nd, 1), _spatial(a, "pad", nd, 0)
    convention = a.choice("pooling_convention", "valid", {"valid", "full"})
    ceil = convention == "full"
    include_pad = a.bool("count_include_pad", True)
    if pool_type == "max":
        fn = {1: R.nn.max_pool1d, 2: R.nn.max_pool2d, 3: R.nn.max_pool3d}[nd]
        return fn(x, kernel, stride, pad, ceil_mode=ceil)
    fn = {1: R.nn.avg_pool1d, 2: R.nn.avg_pool2d, 3: R.nn.avg_pool3d}[nd]
    if pool_type == "sum":
        if ceil:
            raise a.unsupported("pooling_convention", "sum pooling supports only 'valid'")
        avg = ctx.emit(fn(x, kernel, stride, pad, ceil_mode=False, count_include_pad=True))
        return R.multiply(avg, ctx.const(math.prod(kernel), ctx.dtype_of(x)))
    return fn(x, kernel, stride, pad, ceil_mode=ceil, count_include_pad=include_pad)


@register("FullyConnected")
def fully_connected(ctx, node):
    a = node.attrs
    num_hidden = a.int("num_hidden")
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    if a.bool("flatten", True) and len(shape) != 2:
        x = ctx.emit(R.reshape(x, (shape[0], math.prod(shape[1:]))))
    w = ctx.input(node, 1, (num_hidden, ctx.shape(x)[-1]))
    b = None if a.bool("no_bias", False) else ctx.input(node, 2, (num_hidden,))
    return R.linear(x, w, b)


@register("Flatten", "flatten")
def flatten(ctx, node):
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    return R.reshape(x, (shape[0], math.prod(shape[1:])))


# ---------------------------------------------------------------- normalization
@register("BatchNorm")
def batch_norm(ctx, node):
    a = node.attrs
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    axis = _norm_axis(ctx, node, a.int("axis", 1), len(shape))
    c = shape[axis]
    eps = a.float("eps", 1e-3)
    dtype = ctx.dtype_of(x)
    # fix_gamma (the symbol-API default) means gamma is treated as 1; at inference the running stats are used
    # whatever use_global_stats says.
    gamma = ctx.emit(R.ones((c,), dtype)) if a.bool("fix_gamma", True) else ctx.input(node, 1, (c,))
    beta, mean, var = (ctx.input(node, i, (c,)) for i in (2, 3, 4))
    bn = ctx.emit(R.nn.batch_norm(x, gamma, beta, mean, var, axis=axis, epsilon=eps, training=False))
    return relax.TupleGetItem(bn, 0)


@register("LayerNorm")
def layer_norm(ctx, node):
    a = node.attrs
    if a.bool("output_mean_var", False):
        raise a.unsupported("output_mean_var")
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    axis = _norm_axis(ctx, node, a.int("axis", -1), len(shape))
    c = shape[axis]
    gamma, beta = ctx.input(node, 1, (c,)), ctx.input(node, 2, (c,))
    return R.nn.layer_norm(x, gamma, beta, axes=[axis], epsilon=a.float("eps", 1e-5))


@register("InstanceNorm")
def instance_norm(ctx, node):
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    gamma, beta = ctx.input(node, 1, (shape[1],)), ctx.input(node, 2, (shape[1],))
    return R.nn.instance_norm(x, gamma, beta, channel_axis=1, axes=list(range(2, len(shape))),
                              epsilon=node.attrs.float("eps", 1e-3))


@register("GroupNorm")
def group_norm(ctx, node):
    a = node.attrs
    if a.bool("output_mean_var", False):
        raise a.unsupported("output_mean_var")
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    groups = a.int("num_groups", 1)
    if shape[1] % groups:
        raise a.unsupported("num_groups", f"{shape[1]} channels are not divisible by it")
    # MXNet's GroupNorm gamma/beta have one value per group.
    gamma, beta = ctx.input(node, 1, (groups,)), ctx.input(node, 2, (groups,))
    per = shape[1] // groups
    g = ctx.emit(R.reshape(R.repeat(gamma, per, axis=0), (shape[1],)))
    b = ctx.emit(R.reshape(R.repeat(beta, per, axis=0), (shape[1],)))
    return R.nn.group_norm(x, g, b, num_groups=groups, channel_axis=1, axes=list(range(2, len(shape))),
                           epsilon=a.float("eps", 1e-5))


# ---------------------------------------------------------------- activations
def _softrelu(x):
    return R.nn.softplus(x, beta=1.0, threshold=20.0)  # MXNet: x > 20 ? x : log1p(exp(x))


def _softsign(ctx, x):
    return R.divide(x, R.add(R.abs(x), ctx.const(1.0, ctx.dtype_of(x))))


def _log_sigmoid(ctx, x):
    return R.negative(_softrelu(R.negative(x)))


def _mish(ctx, x):
    return R.multiply(x, R.tanh(ctx.emit(_softrelu(x))))


def activation(ctx, node, act: str, x):
    if act == "relu":
        return R.nn.relu(x)
    if act == "sigmoid":
        return R.sigmoid(x)
    if act == "tanh":
        return R.tanh(x)
    if act == "softrelu":
        return _softrelu(x)
    if act == "softsign":
        return _softsign(ctx, x)
    if act == "log_sigmoid":
        return _log_sigmoid(ctx, x)
    if act == "mish":
        return _mish(ctx, x)
    raise node.attrs.unsupported("act_type")


@register("Activation")
def activation_op(ctx, node):
    act = node.attrs.choice("act_type", None,
                            {"relu", "sigmoid", "tanh", "softrelu", "softsign", "log_sigmoid", "mish"})
    return activation(ctx, node, act, ctx.input(node, 0))


def _elu(ctx, x, alpha: float):
    dt = ctx.dtype_of(x)
    neg = R.multiply(ctx.const(alpha, dt), R.subtract(R.exp(x), ctx.const(1.0, dt)))
    return R.where(R.greater(x, ctx.const(0.0, dt)), x, neg)


@register("LeakyReLU")
def leaky_relu(ctx, node):
    a = node.attrs
    act = a.choice("act_type", "leaky", {"leaky", "elu", "prelu", "gelu", "selu", "rrelu"})
    x = ctx.input(node, 0)
    dt = ctx.dtype_of(x)
    slope = a.float("slope", 0.25)
    if act == "leaky":
        return R.nn.leakyrelu(x, slope)
    if act == "rrelu":  # at inference the slope is the middle of [lower_bound, upper_bound]
        return R.nn.leakyrelu(x, (a.float("lower_bound", 0.125) + a.float("upper_bound", 0.334)) / 2)
    if act == "elu":
        return _elu(ctx, x, slope)
    if act == "selu":
        alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
        return R.multiply(ctx.const(scale, dt), ctx.emit(_elu(ctx, x, alpha)))
    if act == "gelu":
        return R.nn.gelu(x)  # MXNet's gelu is the erf form
    # prelu: gamma has one slope per channel (axis 1) or a single shared slope.
    shape = ctx.shape(x)
    c = shape[1] if len(shape) > 1 else 1
    gamma = ctx.input(node, 1, (c,), strict=False)
    n = ctx.shape(gamma)
    if n not in ((c,), (1,)):
        raise ctx.error(node, f"prelu gamma has shape {n}; expected ({c},) or (1,)")
    g = _channel_bcast(gamma, len(shape), 1, c) if n == (c,) and len(shape) > 1 else gamma
    return R.where(R.greater(x, ctx.const(0.0, dt)), x, R.multiply(g, x))


@register("relu")
def relu(ctx, node):
    return R.nn.relu(ctx.input(node, 0))


@register("softmax", "log_softmax")
def softmax(ctx, node):
    a = node.attrs
    if a.bool("use_length", False):
        raise a.unsupported("use_length")
    x = ctx.input(node, 0)
    axis = _norm_axis(ctx, node, a.int("axis", -1), len(ctx.shape(x)))
    t = a.float("temperature", None)
    if t is not None and t != 1.0:
        x = ctx.emit(R.divide(x, ctx.const(t, ctx.dtype_of(x))))
    y = (R.nn.log_softmax if node.op == "log_softmax" else R.nn.softmax)(x, axis)
    out_dtype = a.str("dtype")
    return R.astype(ctx.emit(y), out_dtype) if out_dtype and out_dtype != ctx.dtype_of(x) else y


@register("SoftmaxOutput", "Softmax", "SoftmaxActivation")
def softmax_output(ctx, node):
    """Inference form of the loss layers: a softmax over the class axis; the label input is ignored."""
    a = node.attrs
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    if node.op == "SoftmaxActivation":
        channel = a.choice("mode", "instance", {"instance", "channel"}) == "channel"
        preserve, multi = False, channel
    else:
        preserve, multi = a.bool("preserve_shape", False), a.bool("multi_output", False)
    if preserve or len(shape) == 1:
        return R.nn.softmax(x, -1)
    if multi:
        return R.nn.softmax(x, 1)
    flat = ctx.emit(R.reshape(x, (shape[0], math.prod(shape[1:]))))
    return R.reshape(ctx.emit(R.nn.softmax(flat, 1)), shape)


@register("Dropout")
def dropout(ctx, node):
    a = node.attrs
    if a.choice("mode", "training", {"training", "always"}) == "always" and a.float("p", 0.5) > 0:
        raise a.unsupported("mode", "dropout that is active at inference cannot be imported")
    return ctx.input(node, 0)


@register("_copy", "identity", "BlockGrad", "stop_gradient", "make_loss", "MakeLoss")
def identity(ctx, node):
    return ctx.input(node, 0)


# ---------------------------------------------------------------- unary math
_UNARY = {
    "sigmoid": R.sigmoid, "tanh": R.tanh, "exp": R.exp, "log": R.log, "sqrt": R.sqrt, "rsqrt": R.rsqrt,
    "square": R.square, "abs": R.abs, "negative": R.negative, "floor": R.floor, "ceil": R.ceil,
    "round": R.round, "sign": R.sign, "sin": R.sin, "cos": R.cos, "tan": R.tan, "erf": R.erf, "trunc": R.trunc,
    "fix": R.trunc, "arcsin": R.asin, "arccos": R.acos, "arctan": R.atan, "sinh": R.sinh, "cosh": R.cosh,
    "arcsinh": R.asinh, "arccosh": R.acosh, "arctanh": R.atanh,
}


@register(*_UNARY)
def unary(ctx, node):
    return _UNARY[node.op](ctx.input(node, 0))


@register("softsign", "log_sigmoid", "mish", "reciprocal", "log1p", "expm1", "hard_sigmoid", "log2", "log10")
def unary_composite(ctx, node):
    x = ctx.input(node, 0)
    dt = ctx.dtype_of(x)
    one = ctx.const(1.0, dt)
    if node.op == "softsign":
        return _softsign(ctx, x)
    if node.op == "log_sigmoid":
        return _log_sigmoid(ctx, x)
    if node.op == "mish":
        return _mish(ctx, x)
    if node.op == "reciprocal":
        return R.divide(one, x)
    if node.op == "log1p":
        return R.log(R.add(x, one))
    if node.op == "expm1":
        return R.subtract(R.exp(x), one)
    if node.op in ("log2", "log10"):
        return R.divide(R.log(x), ctx.const(math.log(2 if node.op == "log2" else 10), dt))
    a = node.attrs
    lin = R.add(R.multiply(x, ctx.const(a.float("alpha", 0.2), dt)), ctx.const(a.float("beta", 0.5), dt))
    return R.clip(ctx.emit(lin), 0.0, 1.0)


@register("clip")
def clip(ctx, node):
    a = node.attrs
    return R.clip(ctx.input(node, 0), a.float("a_min"), a.float("a_max"))


@register("Cast", "cast", "amp_cast")
def cast(ctx, node):
    return R.astype(ctx.input(node, 0), node.attrs.str("dtype"))


# ---------------------------------------------------------------- binary and scalar arithmetic
_ARITH = {"add": R.add, "sub": R.subtract, "mul": R.multiply, "div": R.divide, "power": R.power,
          "maximum": R.maximum, "minimum": R.minimum, "mod": R.floor_mod}
_COMPARE = {"equal": R.equal, "not_equal": R.not_equal, "greater": R.greater, "greater_equal": R.greater_equal,
            "lesser": R.less, "lesser_equal": R.less_equal}
_LOGIC = {"logical_and": R.logical_and, "logical_or": R.logical_or, "logical_xor": R.logical_xor}
_BINARY_NAMES = {}
for _k in list(_ARITH) + list(_COMPARE) + list(_LOGIC):
    _BINARY_NAMES["broadcast_" + _k] = _k
    _BINARY_NAMES["elemwise_" + _k] = _k
    _BINARY_NAMES["_" + _k] = _k
for _alias, _k in {"broadcast_plus": "add", "broadcast_minus": "sub", "_plus": "add", "_minus": "sub",
                   "_Plus": "add", "_Minus": "sub", "_Mul": "mul", "_Div": "div", "_Power": "power",
                   "_Maximum": "maximum", "_Minimum": "minimum", "_Mod": "mod", "_Equal": "equal",
                   "_Not_Equal": "not_equal", "_Greater": "greater", "_Greater_Equal": "greater_equal",
                   "_Lesser": "lesser", "_Lesser_Equal": "lesser_equal"}.items():
    _BINARY_NAMES[_alias] = _k


def _apply_binary(ctx, kind: str, lhs, rhs):
    if kind in _ARITH:
        return _ARITH[kind](lhs, rhs)
    dt = ctx.dtype_of(lhs)
    if kind in _COMPARE:  # MXNet comparisons return 0/1 in the input dtype
        return R.astype(ctx.emit(_COMPARE[kind](lhs, rhs)), dt)
    zero = ctx.const(0.0, dt)
    lb, rb = ctx.emit(R.not_equal(lhs, zero)), ctx.emit(R.not_equal(rhs, zero))
    return R.astype(ctx.emit(_LOGIC[kind](lb, rb)), dt)


def _binary_inputs(ctx, node):
    """Both operands; a `_zeros` with 0 dims takes its shape from the other operand."""
    first_fill = isinstance(ctx.raw_input(node, 0), Fill)
    if first_fill:
        rhs = ctx.input(node, 1)
        return ctx.input(node, 0, ctx.shape(rhs), strict=False), rhs
    lhs = ctx.input(node, 0)
    return lhs, ctx.input(node, 1, ctx.shape(lhs), strict=False)


@register(*_BINARY_NAMES)
def binary(ctx, node):
    lhs, rhs = _binary_inputs(ctx, node)
    return _apply_binary(ctx, _BINARY_NAMES[node.op], lhs, rhs)


_SCALAR = {
    "_plus_scalar": ("add", False), "_PlusScalar": ("add", False), "_minus_scalar": ("sub", False),
    "_MinusScalar": ("sub", False), "_rminus_scalar": ("sub", True), "_RMinusScalar": ("sub", True),
    "_mul_scalar": ("mul", False), "_MulScalar": ("mul", False), "_div_scalar": ("div", False),
    "_DivScalar": ("div", False), "_rdiv_scalar": ("div", True), "_RDivScalar": ("div", True),
    "_power_scalar": ("power", False), "_PowerScalar": ("power", False), "_rpower_scalar": ("power", True),
    "_RPowerScalar": ("power", True), "_maximum_scalar": ("maximum", False), "_MaximumScalar": ("maximum", False),
    "_minimum_scalar": ("minimum", False), "_MinimumScalar": ("minimum", False), "_mod_scalar": ("mod", False),
    "_rmod_scalar": ("mod", True), "_equal_scalar": ("equal", False), "_not_equal_scalar": ("not_equal", False),
    "_greater_scalar": ("greater", False), "_greater_equal_scalar": ("greater_equal", False),
    "_lesser_scalar": ("lesser", False), "_lesser_equal_scalar": ("lesser_equal", False),
    "_logical_and_scalar": ("logical_and", False), "_logical_or_scalar": ("logical_or", False),
    "_logical_xor_scalar": ("logical_xor", False),
}


@register(*_SCALAR)
def scalar_op(ctx, node):
    kind, reverse = _SCALAR[node.op]
    x = ctx.input(node, 0)
    s = ctx.const(node.attrs.float("scalar"), ctx.dtype_of(x))
    return _apply_binary(ctx, kind, s, x) if reverse else _apply_binary(ctx, kind, x, s)


@register("add_n", "ElementWiseSum", "_sum")
def add_n(ctx, node):
    acc = ctx.input(node, 0)
    for i in range(1, ctx.n_inputs(node)):
        acc = ctx.emit(R.add(acc, ctx.input(node, i)))
    return acc


@register("batch_dot")
def batch_dot(ctx, node):
    a = node.attrs
    lhs, rhs = ctx.input(node, 0), ctx.input(node, 1)

    def maybe_t(x, flag):
        if not flag:
            return x
        n = len(ctx.shape(x))
        return ctx.emit(R.permute_dims(x, list(range(n - 2)) + [n - 1, n - 2]))

    return R.matmul(maybe_t(lhs, a.bool("transpose_a", False)), maybe_t(rhs, a.bool("transpose_b", False)))


@register("dot")
def dot(ctx, node):
    """MXNet dot: contract the last axis of lhs with the first axis of rhs (after the optional transposes)."""
    a = node.attrs
    lhs, rhs = ctx.input(node, 0), ctx.input(node, 1)
    if a.bool("transpose_a", False):
        lhs = ctx.emit(R.permute_dims(lhs))
    if a.bool("transpose_b", False):
        rhs = ctx.emit(R.permute_dims(rhs))
    ls, rs = ctx.shape(lhs), ctx.shape(rhs)
    if ls[-1] != rs[0]:
        raise ctx.error(node, f"cannot contract shapes {ls} and {rs}")
    l2 = ctx.emit(R.reshape(lhs, (math.prod(ls[:-1]), ls[-1])))
    r2 = ctx.emit(R.reshape(rhs, (rs[0], math.prod(rs[1:]))))
    return R.reshape(ctx.emit(R.matmul(l2, r2)), ls[:-1] + rs[1:])


# ---------------------------------------------------------------- shape manipulation
def infer_reshape(spec: tuple, src: tuple, reverse: bool = False) -> tuple:
    """MXNet Reshape's special codes: 0 copy, -1 infer, -2 copy the rest, -3 merge two, -4 split one in two.

    reverse=True matches the codes from the right, as MXNet does (by reversing both shapes).
    """
    if reverse:
        if -4 in spec:
            raise ValueError("code -4 with reverse=True is not supported")
        return tuple(reversed(infer_reshape(tuple(reversed(spec)), tuple(reversed(src)))))
    out, infer_at, i, j = [], None, 0, 0
    while j < len(spec):
        v = spec[j]
        if v > 0:
            out.append(v)
            i += 1
        elif v == 0:
            if i >= len(src):
                raise ValueError(f"code 0 at position {j} has no input dim to copy")
            out.append(src[i])
            i += 1
        elif v == -1:
            if infer_at is not None:
                raise ValueError("more than one -1")
            infer_at = len(out)
            out.append(1)
            i += 1
        elif v == -2:
            out.extend(src[i:])
            i = len(src)
        elif v == -3:
            if i + 1 >= len(src):
                raise ValueError(f"code -3 at position {j} needs two input dims")
            out.append(src[i] * src[i + 1])
            i += 2
        elif v == -4:
            if j + 2 >= len(spec) or i >= len(src):
                raise ValueError(f"code -4 at position {j} needs two following values and an input dim")
            d0, d1, d2 = src[i], spec[j + 1], spec[j + 2]
            if d1 == -1 and d2 == -1:
                raise ValueError("code -4 cannot split into two -1 dims")
            d1 = d0 // d2 if d1 == -1 else d1
            d2 = d0 // d1 if d2 == -1 else d2
            if d1 <= 0 or d2 <= 0 or d1 * d2 != d0:
                raise ValueError(f"code -4 cannot split {d0} into {d1} x {d2}")
            out.extend((d1, d2))
            i += 1
            j += 2
        else:
            raise ValueError(f"invalid code {v}")
        j += 1
    total = math.prod(src)
    if infer_at is not None:
        rest = math.prod(out)
        if rest == 0 or total % rest:
            raise ValueError(f"cannot infer -1: {total} elements do not divide by {rest}")
        out[infer_at] = total // rest
    if math.prod(out) != total:
        raise ValueError(f"result {tuple(out)} has {math.prod(out)} elements, input has {total}")
    return tuple(out)


@register("Reshape", "reshape")
def reshape(ctx, node):
    a = node.attrs
    if a.tuple("target_shape", ()):
        raise a.unsupported("target_shape", "the legacy form is not supported; use shape")
    x = ctx.input(node, 0)
    spec = a.tuple("shape")
    try:
        new = infer_reshape(spec, ctx.shape(x), a.bool("reverse", False))
    except ValueError as e:
        raise ctx.error(node, f"shape={a.raw['shape']} cannot reshape {ctx.shape(x)}: {e}") from None
    return R.reshape(x, new)


@register("Concat", "concat")
def concat(ctx, node):
    xs = [ctx.input(node, i) for i in range(ctx.n_inputs(node))]
    axis = _norm_axis(ctx, node, node.attrs.int("dim", 1), len(ctx.shape(xs[0])), "dim")
    return R.concat(xs, axis=axis)


@register("_rnn_param_concat")
def rnn_param_concat(ctx, node):
    """Gluon's packed RNN weights; the parts are kept so the RNN converter can use them unsliced."""
    xs = [ctx.input(node, i) for i in range(ctx.n_inputs(node))]
    # Each part is usually Reshape(weight, -1): remember the weight itself, so no reshape pair remains.
    originals = []
    for i, x in enumerate(xs):
        src = ctx.source(node, i)
        originals.append(ctx.input(src, 0) if src.op in ("Reshape", "reshape") else x)
    ctx.side[("concat_parts", node.index)] = originals
    axis = _norm_axis(ctx, node, node.attrs.int("dim", 1), len(ctx.shape(xs[0])), "dim")
    return R.concat(xs, axis=axis)


@register("SliceChannel", "split")
def slice_channel(ctx, node):
    a = node.attrs
    n = a.int("num_outputs")
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    axis = _norm_axis(ctx, node, a.int("axis", 1), len(shape))
    if n <= 0 or shape[axis] % n:
        raise a.unsupported("num_outputs", f"axis {axis} of size {shape[axis]} does not split into {n} parts")
    parts = ctx.emit(R.split(x, n, axis=axis))
    outs = [ctx.emit(relax.TupleGetItem(parts, i)) for i in range(n)]
    if a.bool("squeeze_axis", False):
        if shape[axis] != n:
            raise a.unsupported("squeeze_axis", "each part must have size 1 along the axis")
        squeezed = shape[:axis] + shape[axis + 1:]
        outs = [R.reshape(o, squeezed) for o in outs]
    return outs


@register("transpose")
def transpose(ctx, node):
    x = ctx.input(node, 0)
    axes = node.attrs.tuple("axes", ())
    return R.permute_dims(x, list(axes) if axes else None)


@register("SwapAxis", "swapaxes")
def swap_axis(ctx, node):
    a = node.attrs
    x = ctx.input(node, 0)
    n = len(ctx.shape(x))
    d1 = _norm_axis(ctx, node, a.int("dim1", 0), n, "dim1")
    d2 = _norm_axis(ctx, node, a.int("dim2", 0), n, "dim2")
    perm = list(range(n))
    perm[d1], perm[d2] = perm[d2], perm[d1]
    return R.permute_dims(x, perm)


@register("expand_dims")
def expand_dims(ctx, node):
    x = ctx.input(node, 0)
    axis = node.attrs.int("axis")
    n = len(ctx.shape(x)) + 1
    return R.expand_dims(x, _norm_axis(ctx, node, axis, n))


@register("squeeze")
def squeeze(ctx, node):
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    axis = node.attrs.axis("axis", None)
    if axis is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        axes = [_norm_axis(ctx, node, ax, len(shape)) for ax in (axis if isinstance(axis, tuple) else (axis,))]
        if any(shape[ax] != 1 for ax in axes):
            raise node.attrs.unsupported("axis", f"cannot squeeze a dim that is not 1 (shape {shape})")
    new = tuple(d for i, d in enumerate(shape) if i not in axes)
    return R.reshape(x, new)  # a reshape, whose gradient TVM has


def _clamp_range(begin, end, step, size):
    return slice(begin, end, step).indices(size)


@register("slice_axis")
def slice_axis(ctx, node):
    a = node.attrs
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    axis = _norm_axis(ctx, node, a.int("axis"), len(shape))
    b, e, _ = _clamp_range(a.int("begin"), a.int("end", None), 1, shape[axis])
    if e <= b:
        raise ctx.error(node, f"slice [{b}:{e}] along axis {axis} is empty")
    return R.strided_slice(x, [axis], [b], [e])


@register("slice", "crop")
def slice_op(ctx, node):
    a = node.attrs
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    begin = a.tuple("begin", allow_none=True)
    end = a.tuple("end", allow_none=True)
    step = a.tuple("step", (), allow_none=True) or (None,) * len(begin)
    if len(end) != len(begin) or len(step) != len(begin) or len(begin) > len(shape):
        raise a.unsupported("begin", "begin, end and step must have the same length, at most the rank")
    axes, bs, es, ss = [], [], [], []
    for ax, (b, e, s) in enumerate(zip(begin, end, step)):
        s = 1 if s is None else s
        if s <= 0:
            raise a.unsupported("step", "only positive steps are supported")
        lo, hi, st = _clamp_range(b, e, s, shape[ax])
        if hi <= lo:
            raise ctx.error(node, f"slice [{b}:{e}:{s}] along axis {ax} is empty")
        axes.append(ax)
        bs.append(lo)
        es.append(hi)
        ss.append(st)
    return R.strided_slice(x, axes, bs, es, ss)


@register("where")
def where(ctx, node):
    cond, x, y = ctx.input(node, 0), ctx.input(node, 1), ctx.input(node, 2)
    cs, xs = ctx.shape(cond), ctx.shape(x)
    if cs != xs:
        if len(cs) == 1 and cs[0] == xs[0]:  # a 1-d condition picks whole rows
            cond = ctx.emit(R.reshape(cond, cs + (1,) * (len(xs) - 1)))
        else:
            raise ctx.error(node, f"condition shape {cs} must equal {xs} or be ({xs[0]},)")
    mask = ctx.emit(R.not_equal(cond, ctx.const(0, ctx.dtype_of(cond))))
    return R.where(mask, x, y)


def _index(ctx, x):
    return x if ctx.dtype_of(x).startswith("int") else ctx.emit(R.astype(x, "int32"))


@register("take")
def take(ctx, node):
    a = node.attrs
    data, idx = ctx.input(node, 0), ctx.input(node, 1)
    axis = _norm_axis(ctx, node, a.int("axis", 0), len(ctx.shape(data)))
    mode = a.choice("mode", "clip", {"clip", "wrap", "raise"})
    return R.take(data, _index(ctx, idx), axis=axis, mode="wrap" if mode == "wrap" else "clip")


@register("Embedding")
def embedding(ctx, node):
    a = node.attrs
    ids = ctx.input(node, 0)
    w = ctx.input(node, 1, (a.int("input_dim"), a.int("output_dim")))
    return R.take(w, _index(ctx, ids), axis=0, mode="clip")


@register("stack")
def stack(ctx, node):
    xs = [ctx.input(node, i) for i in range(ctx.n_inputs(node))]
    shape = ctx.shape(xs[0])
    axis = _norm_axis(ctx, node, node.attrs.int("axis", 0), len(shape) + 1)
    # expand_dims + concat rather than R.stack: both have gradients in TVM 0.27.
    return R.concat([ctx.emit(R.expand_dims(x, axis)) for x in xs], axis=axis)


@register("zeros_like", "ones_like")
def fill_like(ctx, node):
    x = ctx.input(node, 0)
    return R.zeros_like(x) if node.op == "zeros_like" else R.ones_like(x)


@register("_zeros", "_ones", "_full", "zeros", "ones", "_zeros_without_dtype")
def fill(ctx, node):
    a = node.attrs
    shape = a.tuple("shape", ())
    dtype = a.str("dtype", "float32")
    if node.op == "_full":
        value = a.float("value")
    else:
        value = 1.0 if "ones" in node.op else 0.0
    if any(d < 0 for d in shape):
        raise a.unsupported("shape", "negative dims")
    if any(d == 0 for d in shape):
        return Fill(node, shape, value, dtype)  # 0 = inferred from the consumer (e.g. RNN begin states)
    return R.full(shape, ctx.const(value, dtype), dtype)


_REDUCE = {"sum": R.sum, "mean": R.mean, "max": R.max, "min": R.min, "prod": R.prod,
           "sum_axis": R.sum, "max_axis": R.max, "min_axis": R.min, "nansum": R.sum}


@register(*_REDUCE)
def reduce(ctx, node):
    a = node.attrs
    x = ctx.input(node, 0)
    n = len(ctx.shape(x))
    axis = a.axis("axis", None)
    axes = None if axis is None else sorted(
        _norm_axis(ctx, node, ax, n) for ax in (axis if isinstance(axis, tuple) else (axis,)))
    if a.bool("exclude", False):
        axes = [i for i in range(n) if i not in (axes or [])]
    if node.op == "nansum":
        raise ctx.error(node, "nansum is not supported")
    return _REDUCE[node.op](x, axes, keepdims=a.bool("keepdims", False))


@register("argmax", "argmin")
def arg_reduce(ctx, node):
    a = node.attrs
    x = ctx.input(node, 0)
    axis = a.int("axis", None)
    fn = R.argmax if node.op == "argmax" else R.argmin
    # MXNet returns the indices as floats.
    return R.astype(ctx.emit(fn(x, axis, a.bool("keepdims", False))), ctx.dtype_of(x))


@register("broadcast_to")
def broadcast_to(ctx, node):
    x = ctx.input(node, 0)
    shape = ctx.shape(x)
    target = node.attrs.tuple("shape")
    if len(target) != len(shape):
        raise node.attrs.unsupported("shape", f"rank must equal the input's ({len(shape)})")
    return R.broadcast_to(x, tuple(s if t == 0 else t for s, t in zip(shape, target)))


@register("broadcast_like")
def broadcast_like(ctx, node):
    a = node.attrs
    if a.has("lhs_axes") or a.has("rhs_axes"):
        raise a.unsupported("lhs_axes")
    return R.broadcast_to(ctx.input(node, 0), ctx.shape(ctx.input(node, 1)))


@register("tile")
def tile(ctx, node):
    return R.tile(ctx.input(node, 0), node.attrs.tuple("reps"))


@register("repeat")
def repeat(ctx, node):
    a = node.attrs
    return R.repeat(ctx.input(node, 0), a.int("repeats"), a.int("axis", None))


@register("Pad", "pad")
def pad(ctx, node):
    a = node.attrs
    mode = a.choice("mode", "constant", {"constant", "edge", "reflect"})
    x = ctx.input(node, 0)
    width = a.tuple("pad_width")
    if len(width) != 2 * len(ctx.shape(x)):
        raise a.unsupported("pad_width", "needs two values per input dim")
    # TVM calls MXNet's "edge" mode "replicate".
    return R.nn.pad(x, list(width), pad_mode={"edge": "replicate"}.get(mode, mode),
                    pad_value=a.float("constant_value", 0.0))


@register("UpSampling")
def upsampling(ctx, node):
    a = node.attrs
    a.choice("sample_type", "nearest", {"nearest"})
    if ctx.n_inputs(node) != 1:
        raise a.unsupported("num_args", "only one input is supported")
    scale = a.int("scale")
    x = ctx.input(node, 0)
    y = ctx.emit(R.repeat(x, scale, axis=2))
    return R.repeat(y, scale, axis=3)
