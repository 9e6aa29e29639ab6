"""Relax gradients that TVM 0.27 lacks or gets wrong, registered once by `register()`.

relax.transform.Gradient looks up each op's `FPrimalGradient` attribute; real models need these
(see notes/real-models.md G5):

    missing:  nn.gelu, nn.gelu_tanh, erf, rsqrt, squeeze, stack, strided_slice,
              gather_elements (transformers' own loss picks each target's log-probability with it),
              clip (hardswish / hardsigmoid decompose to it: MobileNetV3)
    fixed:    take  (TVM's take_backward only lowers 1-d indices: a 0-d or n-d index is reshaped to 1-d)
              where (TVM forgets collapse_sum_to for operands that were broadcast: wrong-rank adjoints)
              nn.nll_loss (TVM's nll_loss_backward reads weights[target] for ignored targets, i.e.
                    weights[-100] with torch's default ignore_index: out of bounds, so the "mean"
                    divisor is garbage and gradients come out randomly scaled)

Ours are registered at level 11, above TVM's own (10), so they win where both exist. Every function
has TVM's gradient signature: (orig_var, orig_call, output_grad, ctx) -> one partial per argument.
"""
from __future__ import annotations

import math

from ..errors import UnsupportedModelError

LEVEL = 11                      # > TVM's default registration level, so an override replaces TVM's
_registered = False

# op name -> our gradient function; filled by @_gradient below, registered by register()
GRADIENTS: dict = {}


def _gradient(op_name):
    def deco(fn):
        GRADIENTS[op_name] = fn
        return fn
    return deco


def register() -> None:
    """Register every gradient in GRADIENTS with TVM (idempotent: later calls do nothing)."""
    global _registered
    if _registered:
        return
    from tvm.relax.op.base import register_gradient

    for name, fn in GRADIENTS.items():
        register_gradient(name, fn, level=LEVEL)
    _registered = True


# ---------------------------------------------------------------- helpers
def _dtype(expr) -> str:
    return str(expr.ty.dtype.dtype)


def _static_shape(expr, what: str) -> list[int]:
    from tvm import tirx

    shape = expr.ty.shape
    if shape is None or not all(isinstance(d, tirx.IntImm) for d in shape.values):
        raise UnsupportedModelError(f"the gradient of {what} needs a static input shape, got {expr.ty}; "
                                    "export the model with fixed shapes")
    return [int(d) for d in shape.values]


def _const(value, like):
    from tvm import relax

    return relax.const(value, _dtype(like))


def _collapse_to(grad, target, ctx):
    """grad summed down to target's shape when a broadcast made it larger (what TVM's where misses)."""
    from tvm import relax

    want = target.ty.shape
    have = ctx.normalize(grad).ty.shape
    if len(have.values) == len(want.values) and all(
            isinstance(a, type(b)) and str(a) == str(b) for a, b in zip(have.values, want.values)):
        return grad
    return relax.op.collapse_sum_to(grad, want)


def _ints(tuple_expr) -> list[int]:
    """Static ints of a Relax Tuple of PrimValues / IntImms (strided_slice's axes, begin, end, strides)."""
    out = []
    for f in tuple_expr.fields:
        v = getattr(f, "value", f)
        out.append(int(v))
    return out


# ---------------------------------------------------------------- elementwise
@_gradient("relax.nn.gelu")
def gelu_grad(orig_var, orig_call, output_grad, ctx):
    """gelu(x) = x * Phi(x)  ->  dx = dy * (Phi(x) + x * phi(x))."""
    from tvm.relax import op

    x = orig_call.args[0]
    cdf = _const(0.5, x) * (_const(1.0, x) + op.erf(x * _const(1.0 / math.sqrt(2.0), x)))
    pdf = op.exp(_const(-0.5, x) * x * x) * _const(1.0 / math.sqrt(2.0 * math.pi), x)
    return [output_grad * (cdf + x * pdf)]


@_gradient("relax.nn.gelu_tanh")
def gelu_tanh_grad(orig_var, orig_call, output_grad, ctx):
    """gelu_tanh(x) = 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x^3), c = sqrt(2/pi)
    ->  dx = dy * (0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2))."""
    from tvm.relax import op

    x = orig_call.args[0]
    c, k = math.sqrt(2.0 / math.pi), 0.044715
    x2 = x * x
    t = op.tanh(_const(c, x) * (x + _const(k, x) * x2 * x))
    one, half = _const(1.0, x), _const(0.5, x)
    du = _const(c, x) * (one + _const(3 * k, x) * x2)
    return [output_grad * (half * (one + t) + half * x * (one - t * t) * du)]


@_gradient("relax.erf")
def erf_grad(orig_var, orig_call, output_grad, ctx):
    """d erf(x) = 2 / sqrt(pi) * exp(-x^2)."""
    from tvm.relax import op

    x = orig_call.args[0]
    return [output_grad * _const(2.0 / math.sqrt(math.pi), x) * op.exp(op.negative(x * x))]


@_gradient("relax.rsqrt")
def rsqrt_grad(orig_var, orig_call, output_grad, ctx):
    """y = x^(-1/2)  ->  dx = -0.5 * dy * y^3."""
    y = orig_var
    return [_const(-0.5, y) * output_grad * y * y * y]


# ---------------------------------------------------------------- shape
@_gradient("relax.squeeze")
def squeeze_grad(orig_var, orig_call, output_grad, ctx):
    from tvm.relax import op

    x = orig_call.args[0]
    return [op.reshape(output_grad, x.ty.shape)]


@_gradient("relax.stack")
def stack_grad(orig_var, orig_call, output_grad, ctx):
    """stack((x1..xn), axis) -> split the gradient back into n pieces along axis, each squeezed."""
    from tvm import relax
    from tvm.relax import op

    axis = int(orig_call.attrs.axis)
    n = len(orig_call.args[0].ty.fields)
    ndim = orig_var.ty.ndim
    axis = axis + ndim if axis < 0 else axis
    parts = ctx.emit(op.split(output_grad, n, axis))
    return [relax.Tuple([op.squeeze(relax.TupleGetItem(parts, i), [axis]) for i in range(n)])]


@_gradient("relax.strided_slice")
def strided_slice_grad(orig_var, orig_call, output_grad, ctx):
    """Scatter the gradient back into zeros of x's shape: zero padding for unit strides, take_backward
    with the selected indices (a constant per axis) otherwise."""
    import numpy as np
    from tvm import relax
    from tvm.relax import op
    from tvm.relax.op.grad import no_grad, take_backward

    x, axes_e, begin_e, end_e = orig_call.args[:4]
    strides_e = orig_call.args[4] if len(orig_call.args) > 4 else None
    shape = _static_shape(x, "strided_slice")
    axes, begin, end = _ints(axes_e), _ints(begin_e), _ints(end_e)
    strides = _ints(strides_e) if strides_e is not None else [1] * len(axes)
    grad = output_grad
    cur = list(_static_shape(orig_var, "strided_slice"))
    # Python slice semantics per axis (clamped, negative indices wrap), as strided_slice does
    picks = {}
    for a, b, e, s in zip(axes, begin, end, strides):
        a = a + len(shape) if a < 0 else a
        picks[a] = range(*slice(b, e, s).indices(shape[a]))
    if all(r.step == 1 for r in picks.values()):
        pad = []
        for a, dim in enumerate(shape):
            r = picks.get(a)
            pad += [0, 0] if r is None else [r.start, dim - r.start - len(r)]
        grad = op.nn.pad(grad, pad)
    else:
        for a, r in picks.items():
            cur[a] = shape[a]
            like = op.zeros(relax.ShapeExpr(cur), _dtype(x))
            idx = relax.const(np.asarray(list(r), dtype="int64"))
            grad = ctx.emit(take_backward(grad, ctx.emit(like), idx, a))
    return [grad] + [no_grad(arg) for arg in orig_call.args[1:]]


@_gradient("relax.clip")
def clip_grad(orig_var, orig_call, output_grad, ctx):
    """dy where min < x < max, else 0 (torch's hardtanh_backward: the bounds themselves pass nothing)."""
    from tvm.relax import op
    from tvm.relax.op.grad import no_grad

    x, lo, hi = orig_call.args
    inside = op.logical_and(op.greater(x, _const(float(lo.value), x)), op.less(x, _const(float(hi.value), x)))
    return [op.where(inside, output_grad, _const(0, x)), no_grad(lo), no_grad(hi)]


@_gradient("relax.gather_elements")
def gather_elements_grad(orig_var, orig_call, output_grad, ctx):
    """Each gathered element's gradient added back at the index it came from (indices may repeat)."""
    from tvm import relax
    from tvm.relax import op
    from tvm.relax.op.grad import no_grad

    x, idx = orig_call.args
    zeros = op.zeros(relax.ShapeExpr(_static_shape(x, "gather_elements")), _dtype(x))
    axis = int(orig_call.attrs.axis)
    return [op.scatter_elements(zeros, idx, output_grad, axis, reduction="add"), no_grad(idx)]


# ---------------------------------------------------------------- fixed
@_gradient("relax.take")
def take_grad(orig_var, orig_call, output_grad, ctx):
    """As TVM's, but a 0-d or n-d index is reshaped to 1-d (take_backward only lowers 1-d indices)."""
    from tvm.relax import op
    from tvm.relax.op.grad import no_grad, take_backward

    x, idx = orig_call.args
    axis = orig_call.attrs["axis"]
    if axis is not None and idx.ty.ndim != 1:
        axis = int(axis)
        xs = _static_shape(x, "take")
        axis = axis + len(xs) if axis < 0 else axis
        n = math.prod(_static_shape(idx, "take (indices)"))
        output_grad = op.reshape(output_grad, [*xs[:axis], n, *xs[axis + 1:]])
        idx = op.reshape(idx, [n])
    return [take_backward(output_grad, x, idx, axis), no_grad(orig_call.args[1])]


@_gradient("relax.where")
def where_grad(orig_var, orig_call, output_grad, ctx):
    """As TVM's, plus collapse_sum_to for a branch that was broadcast to the output shape."""
    from tvm.relax import op
    from tvm.relax.op.grad import no_grad

    cond, x1, x2 = orig_call.args
    g1 = op.where(cond, output_grad, _const(0, x1))
    g2 = op.where(cond, _const(0, x2), output_grad)
    return [no_grad(cond), _collapse_to(g1, x1, ctx), _collapse_to(g2, x2, ctx)]


@_gradient("relax.nn.nll_loss")
def nll_loss_grad(orig_var, orig_call, output_grad, ctx):
    """d pred[n, c, ...] = -o[n, ...] * w[t] where c == t != ignore_index, else 0; o is the output gradient
    (divided by the sum of the valid targets' weights for "mean"). Built from plain ops so an ignored
    target never indexes anything."""
    from tvm import relax
    from tvm.relax import op
    from tvm.relax.op.grad import no_grad

    pred, target = orig_call.args[0], orig_call.args[1]
    weights = orig_call.args[2] if len(orig_call.args) > 2 else None
    reduction, ignore = str(orig_call.attrs.reduction), int(orig_call.attrs.ignore_index)
    pshape = _static_shape(pred, "nll_loss")
    axis = 1 if len(pshape) > 1 else 0                   # the class axis
    classes = pshape[axis]
    tdt = _dtype(target)
    valid = op.not_equal(target, relax.const(ignore, tdt))
    if weights is None:
        w = op.astype(valid, _dtype(pred))
    else:
        safe = op.where(valid, target, relax.const(0, tdt))
        w = op.where(valid, op.take(weights, safe, axis=0), _const(0, pred))
    w = ctx.emit(w)
    if reduction == "mean":
        coef = op.divide(op.negative(output_grad), op.sum(w)) * w
    else:                                                  # "sum": scalar o; "none": o shaped like target
        coef = op.negative(output_grad) * w
    cls_shape = [1] * len(pshape)
    cls_shape[axis] = classes
    cls = op.reshape(op.arange(0, classes, 1, tdt), cls_shape)
    hit = op.equal(op.expand_dims(target, [axis]), cls)
    grad = op.where(hit, op.expand_dims(coef, [axis]), _const(0, pred))
    return [grad] + [no_grad(a) for a in orig_call.args[1:]]
