"""The per-op rules of a region split (relay_passes.split_region): how each op reads its arguments when its
result is split along an axis, or _Refuse where its slices would meet.

A rule is {argument position (or (position, tuple field)): mode}: ("S", axis) an activation read as its slices
along that axis; ("H", 2) rows read with the rows under a window around them (relay_passes.split_rows);
("P", axis) a parameter (or parameter-only value) sliced to match; ("W", None) read whole.
"""
from __future__ import annotations

from .micro_batch import BATCH_FIRST_LAYOUT, BINARY, ELEMWISE, _Refuse, _check, _op_name, _shape

POOLS = {n for n in BATCH_FIRST_LAYOUT if "pool" in n and n.endswith("2d")}
# a training step's backward: each output element compares or selects the same element of its operands
COMPARE = {"relax.less", "relax.less_equal", "relax.greater", "relax.greater_equal", "relax.equal",
           "relax.not_equal", "relax.where"}
# a pool's gradient: sample n, channel c of the input gradient reads sample n, channel c of the output's
# gradient and of the pool's input only (the windows are within one channel of one sample)
POOL_GRADS = {"relax.grad.max_pool2d_backward", "relax.grad.avg_pool2d_backward"}
ROWS = 2
CONVS = {"relax.nn.conv2d"}


def _aligned_dim(ty, axis: int, ndim: int):
    """The size of `ty` along output axis `axis` under numpy broadcasting (None: it has no such axis)."""
    s = _shape(ty)
    if s is None:
        raise _Refuse("an operand without a static shape")
    j = axis - (ndim - len(s))
    return s[j] if j >= 0 else None, j


def _rule(call, out_ty, axis: int, dim: int, activation) -> dict:
    """{arg position (or (position, field)): ("S", axis in that arg) | ("P", axis) | ("W", None)} for a call
    in a region split along `axis` into slices of `dim`; raise _Refuse where the op mixes slices.
    activation(var): whether var depends on the function's inputs."""
    from tvm import relax

    name, args, attrs = _op_name(call), list(call.args), call.attrs
    out = _shape(out_ty)
    if out is None or len(out) <= axis:
        raise _Refuse(f"its result has no axis {axis}")
    if name in CONVS:               # (first: a conv that reads a slice whole says so)
        return _conv_rule(args, attrs, axis, activation)
    if name in POOLS and axis == ROWS:
        return _pool_rows_rule(name, attrs)
    if out[axis] != dim and axis != ROWS:      # (rows: each value has its own height, split_rows)
        raise _Refuse(f"its result does not have {dim} along axis {axis}")
    nd = len(out)
    tensors = [i for i, a in enumerate(args) if isinstance(a, relax.Var) and isinstance(a.ty, relax.TensorType)]

    def along(i):
        return ("S", axis) if activation(args[i]) else ("P", axis)

    if name in ELEMWISE:
        return {0: ("S", axis), **{i: ("W", None) for i in tensors[1:]}} if activation(args[0]) else _no()
    if name in BINARY or name in COMPARE:
        modes = {}
        for i in tensors:
            d, j = _aligned_dim(args[i].ty, axis, nd)
            modes[i] = ("W", None) if d in (None, 1) else (("S", j) if activation(args[i]) else ("P", j))
        return modes
    if name == "relax.nn.batch_norm":
        if bool(getattr(attrs, "training", True)):
            raise _Refuse("batch norm in training mode (batch statistics)")
        if int(attrs.axis) % nd == axis:
            return {0: ("S", axis), **{i: ("P", 0) for i in range(1, 5)}}
        return {0: ("S", axis), **{i: ("W", None) for i in range(1, 5)}}
    if name in POOLS:
        if str(getattr(attrs, "layout", "NCHW")) != "NCHW" or axis not in (0, 1):
            raise _Refuse("a window op splits along batch or channels only (NCHW)")
        return {0: ("S", axis)}
    if name in POOL_GRADS:
        if str(getattr(attrs, "layout", "NCHW")) != "NCHW" or axis not in (0, 1):
            raise _Refuse("a pool's gradient splits along batch or channels only (NCHW)")
        return {i: along(i) for i in (0, 1)}
    if name == "relax.concat":
        if int(attrs.axis) % nd == axis:
            raise _Refuse("a concat along the split axis")
        return {(0, f): along_field for f, along_field in
                enumerate(("S", axis) if activation(v) else ("P", axis) for v in args[0].fields)}
    if axis == 0:
        _check(_Out(out_ty), call, activation, dim)          # micro_batch's table of batch-independent ops
        return {i: ("S", 0) if activation(args[i]) else ("W", None) for i in tensors}
    raise _Refuse(f"not known to keep slices along axis {axis} apart")


def _no():
    raise _Refuse("an elementwise op on a parameter")


def _conv_rule(args, attrs, axis: int, activation) -> dict:
    if str(attrs.data_layout) != "NCHW" or str(attrs.kernel_layout) != "OIHW":
        raise _Refuse("a conv splits in NCHW/OIHW only")
    groups, w = int(attrs.groups), _shape(args[1].ty)
    if axis == 0:
        return {0: ("S", 0), 1: ("W", None)}
    if axis == 1:
        if groups == 1:              # output channels: the whole input, the weight cut by its rows
            return {0: ("W", None), 1: ("P", 0)}
        if w is not None and w[1] == 1 and groups == w[0]:  # depthwise: channel c reads channel c only
            return {0: ("S", 1), 1: ("P", 0)}
        raise _Refuse("a grouped conv")
    pointwise = (w is not None and w[2:] == [1, 1] and [int(s) for s in attrs.strides] == [1, 1]
                 and all(int(p) == 0 for p in attrs.padding))
    if axis == ROWS:               # a window reads the rows around its own: "H" (relay_passes.split_rows)
        return {0: ("S", 2) if pointwise else ("H", 2), 1: ("W", None)}
    raise _Refuse(f"not known to keep slices along axis {axis} apart")


def _pool_rows_rule(name: str, attrs) -> dict:
    if str(getattr(attrs, "layout", "NCHW")) != "NCHW" or "adaptive" in name or bool(attrs.ceil_mode):
        raise _Refuse("rows of a pool: NCHW, not adaptive, no ceil_mode")
    if "avg" in name and any(int(p) for p in attrs.padding):
        raise _Refuse("rows of an average pool with padding (its divisor counts the padding)")
    return {0: ("H", 2)}


class _Out:
    """A stand-in with the type _check reads (batch norm's result is a tuple; its first field is checked)."""

    def __init__(self, ty):
        from tvm import relax

        self.ty = ty.fields[0] if isinstance(ty, relax.TupleType) else ty
        self.name = "result"
