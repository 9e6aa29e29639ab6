"""Inference in micro-batches: one Relax function rewritten to run its batch in k equal slices.

    split = split_batch(mod, 4)            # main(data[128, ...], params) -> 4 x the body at batch 32, concat

Why: a chain CNN's smallest arena is its largest op's own inputs and outputs (small_cnn at batch 128: an 8 MiB
input and an 8 MiB output, 89% of the no-swap peak); no placement or swap plan goes below that. In inference the
batch elements never meet, so the same function run on k slices of the batch holds 1/k of each activation per
op; the planner then swaps a finished slice's tensors out while the next slice runs.

What is rewritten: the function's inputs (its `num_input` first parameters, else all) must all carry the batch
as axis 0. Every binding that depends on them is emitted once per slice, on that slice (`strided_slice` of each
input along axis 0); bindings that depend only on parameters (a weight's transpose) are emitted once, right
before their first use. Each result that carries the batch is the `concat` of its slices along axis 0.

Soundness: a binding that carries the batch is rewritten only when its op is known to treat batch elements
independently along axis 0 (the table below: elementwise ops, broadcasting binary ops whose other operand has
no batch axis, convolution and pooling in a batch-first layout, inference batch norm, matmul against a weight,
reshapes and transposes that keep axis 0, reductions and softmax over other axes). Anything else raises
UnsupportedModelError naming the op: training steps (batch statistics, gradients summed over the batch) are
refused by it. Each slice runs the same kernels on fewer rows; on llvm, whose kernels loop over the batch
outermost and reduce in a fixed order per element, the outputs are bitwise those of the unsplit function
(tests/relay_passes/test_micro_batch.py checks it on the MXNet small_cnn).
"""
from __future__ import annotations

from tvm_swap.errors import TvmSwapError, UnsupportedModelError

ELEMWISE = {
    "relax.nn.relu", "relax.nn.gelu", "relax.nn.gelu_tanh", "relax.nn.silu", "relax.sigmoid", "relax.tanh",
    "relax.exp", "relax.log", "relax.sqrt", "relax.rsqrt", "relax.negative", "relax.abs", "relax.clip",
    "relax.astype", "relax.nn.dropout", "relax.square", "relax.erf", "relax.nn.leakyrelu", "relax.nn.prelu",
}
BINARY = {"relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.maximum", "relax.minimum",
          "relax.power", "relax.floor_divide"}
BATCH_FIRST_LAYOUT = {"relax.nn.conv1d", "relax.nn.conv2d", "relax.nn.conv3d", "relax.nn.max_pool1d",
                      "relax.nn.max_pool2d", "relax.nn.max_pool3d", "relax.nn.avg_pool1d", "relax.nn.avg_pool2d",
                      "relax.nn.avg_pool3d", "relax.nn.adaptive_avg_pool1d", "relax.nn.adaptive_avg_pool2d",
                      "relax.nn.adaptive_avg_pool3d"}
REDUCE = {"relax.mean", "relax.sum", "relax.max", "relax.min", "relax.variance", "relax.prod"}
SOFTMAX = {"relax.nn.softmax", "relax.nn.log_softmax"}


def _shape(ty):
    from tvm import relax

    if not isinstance(ty, relax.TensorType) or ty.shape is None or not hasattr(ty.shape, "values"):
        return None
    try:
        return [int(d) for d in ty.shape.values]
    except TypeError:
        return None


def _op_name(call) -> str:
    import tvm

    return call.op.name if isinstance(call.op, tvm.ir.Op) else str(call.op)


class _Refuse(Exception):
    pass


def _check(var, call, carries, batch: int) -> None:
    """Raise _Refuse unless `call` (some argument carries the batch) treats batch elements independently."""
    from tvm import relax

    name = _op_name(call)
    args = list(call.args)
    tensor_args = [a for a in args if isinstance(a, relax.Var)]
    out = _shape(var.ty)
    if out is None or not out or out[0] != batch:
        raise _Refuse(f"its result {var.name!r} does not keep the batch as axis 0")
    attrs = call.attrs

    def first_only():
        if not carries(args[0]) or any(carries(a) for a in tensor_args[1:]):
            raise _Refuse("only its first operand may carry the batch")

    if name in ELEMWISE:
        first_only()
    elif name in BINARY:
        for a in tensor_args:
            s = _shape(a.ty)
            if s is None:
                raise _Refuse("an operand without a static shape")
            if carries(a):
                if len(s) != len(out) or s[0] != batch:
                    raise _Refuse("an operand broadcasts along the batch axis")
            elif len(s) == len(out) and s[0] != 1:
                raise _Refuse(f"operand {a.name!r} has an axis 0 of {s[0]} without carrying the batch")
    elif name in BATCH_FIRST_LAYOUT:
        first_only()
        layout = str(getattr(attrs, "data_layout", None) or getattr(attrs, "layout", "N"))
        if not layout.startswith("N"):
            raise _Refuse(f"layout {layout} does not put the batch first")
    elif name == "relax.nn.batch_norm":
        first_only()
        if bool(getattr(attrs, "training", True)) or int(attrs.axis) % len(out) == 0:
            raise _Refuse("batch norm in training mode (batch statistics) or over axis 0")
    elif name in ("relax.nn.layer_norm", "relax.nn.group_norm", "relax.nn.rms_norm"):
        first_only()
        axes = [int(x) % len(out) for x in (getattr(attrs, "axes", None) or [getattr(attrs, "channel_axis", 1)])]
        if 0 in axes:
            raise _Refuse("it normalises over axis 0")
    elif name in SOFTMAX:
        first_only()
        if int(attrs.axis) % len(out) == 0:
            raise _Refuse("softmax over axis 0")
    elif name in REDUCE:
        first_only()
        src = _shape(args[0].ty)
        axis = getattr(attrs, "axis", None)
        if axis is None or 0 in [int(x) % len(src) for x in axis]:
            raise _Refuse("it reduces over axis 0")
    elif name == "relax.matmul":
        first_only()
        rhs = _shape(args[1].ty)
        if rhs is None or len(rhs) != 2 or len(_shape(args[0].ty)) < 2:
            raise _Refuse("only a batch-first left operand against a 2-D right operand")
    elif name == "relax.permute_dims":
        first_only()
        axes = getattr(attrs, "axes", None)
        if axes is None or int(axes[0]) != 0:
            raise _Refuse("the permutation moves axis 0")
    elif name == "relax.reshape":
        first_only()
        if _shape(args[0].ty)[0] != batch:
            raise _Refuse("its input does not have the batch as axis 0")
    elif name == "relax.flatten":
        first_only()
    else:
        raise _Refuse("it is not known to treat batch elements independently")


def _carried(inputs, bindings, value_of, batch) -> set:
    """The vars that carry the batch (the inputs and every binding reading one), each checked to be computed
    slice by slice exactly (_check); UnsupportedModelError naming the first binding that cannot."""
    from tvm import relax

    carry = set(inputs)
    users: dict = {}
    for b in bindings:
        for a in relax.analysis.free_vars(b.value):
            users.setdefault(a, []).append(b.var)
    for b in bindings:
        var, v = b.var, b.value
        deps = list(relax.analysis.free_vars(v))
        if not any(d in carry for d in deps):
            continue
        carry.add(var)
        try:
            if isinstance(v, relax.Var):
                continue
            if isinstance(v, relax.TupleGetItem):
                src = value_of.get(v.tuple_value)
                if isinstance(src, relax.Call) and _op_name(src) == "relax.nn.batch_norm" and v.index != 0:
                    raise _Refuse("a batch norm's running statistics are read")
                continue
            if isinstance(v, relax.Tuple):
                if any(u is not None for u in users.get(var, [])):
                    raise _Refuse("a tuple of batch tensors is read by another binding")
                continue
            if not isinstance(v, relax.Call):
                raise _Refuse(f"a {type(v).__name__} binding")
            if _op_name(v) == "relax.nn.batch_norm":
                _check(_first_field(var), v, lambda a: a in carry, batch)
            else:
                _check(var, v, lambda a: a in carry, batch)
        except _Refuse as e:
            op = _op_name(v) if isinstance(v, relax.Call) else type(v).__name__
            raise UnsupportedModelError(f"micro-batching refused: {op!r} (binding {var.name!r}): {e}") from None
    return carry


def split_batch(mod, k: int, func_name: str = "main"):
    """The module with `func_name` running its batch in `k` slices (see the module docstring)."""
    import tvm
    from tvm import relax

    k = int(k)
    if k < 1:
        raise TvmSwapError(f"micro-batches must be >= 1 (got {k})")
    if k == 1:
        return mod
    func = mod[func_name]
    if not isinstance(func, relax.Function):
        raise TvmSwapError(f"{func_name!r} is not a Relax function")
    n_in = func.attrs.get("num_input") if func.attrs is not None else None
    inputs = list(func.params[:int(n_in)] if n_in is not None else func.params)
    shapes = [_shape(p.ty) for p in inputs]
    if not inputs or any(s is None or not s for s in shapes) or len({s[0] for s in shapes}) != 1:
        raise UnsupportedModelError("micro-batching needs inputs that all have the same static batch as axis 0")
    batch = shapes[0][0]
    if batch % k:
        raise UnsupportedModelError(f"micro-batches ({k}) must divide the batch ({batch})")
    part = batch // k
    body = func.body
    if not isinstance(body, relax.SeqExpr) or any(not isinstance(b, relax.DataflowBlock) for b in body.blocks):
        raise UnsupportedModelError("micro-batching needs a function of dataflow blocks only")
    bindings = [b for blk in body.blocks for b in blk.bindings]
    if any(not isinstance(b, relax.VarBinding) for b in bindings):
        raise UnsupportedModelError("micro-batching does not support match_cast bindings")

    value_of = {b.var: b.value for b in bindings}
    carry = _carried(inputs, bindings, value_of, batch)

    def sub(expr, env):
        """expr with its vars replaced (env) and a carried reshape's batch set to the slice."""
        if isinstance(expr, relax.Var):
            return env[expr]
        if isinstance(expr, relax.Tuple):
            return relax.Tuple([sub(f, env) for f in expr.fields])
        if isinstance(expr, relax.TupleGetItem):
            return relax.TupleGetItem(sub(expr.tuple_value, env), expr.index)
        if isinstance(expr, relax.Call):
            args = [sub(a, env) for a in expr.args]
            if _op_name(expr) == "relax.reshape" and expr.args[0] in carry:
                dims = [int(d) for d in expr.args[1].values]
                args[1] = relax.ShapeExpr([part] + dims[1:])
            return relax.Call(expr.op, args, expr.attrs, expr.ty_args)
        return expr

    bb = relax.BlockBuilder()
    shared: dict = {p: p for p in func.params}

    def need(e):
        """Emit the parameter-only bindings `e` depends on (once, before first use)."""
        for a in relax.analysis.free_vars(e):
            if a not in shared and a not in carry:
                need(value_of[a])
                shared[a] = bb.emit(sub(value_of[a], shared), name_hint=a.name)

    attrs = {str(key): val for key, val in func.attrs.items()} if func.attrs is not None else {}
    with bb.function(func_name, list(func.params), attrs=attrs, pure=True):
        with bb.dataflow():
            slices = []
            for i in range(k):
                env = dict(shared)
                for x in inputs:
                    env[x] = bb.emit(relax.op.strided_slice(x, axes=[0], begin=[i * part], end=[(i + 1) * part]),
                                     name_hint=f"{x.name}_mb{i}")
                for b in bindings:
                    if b.var not in carry:
                        continue
                    need(b.value)
                    env.update({a: shared[a] for a in shared if a not in env})
                    env[b.var] = bb.emit(sub(b.value, env), name_hint=f"{b.var.name}_mb{i}")
                slices.append(env)
            result = body.body

            def out(e):
                if isinstance(e, relax.Tuple):
                    return relax.Tuple([out(f) for f in e.fields])
                if isinstance(e, relax.Var) and e in carry:
                    if isinstance(e.ty, relax.TupleType):
                        raise UnsupportedModelError("micro-batching: a tuple-typed result carries the batch")
                    return bb.emit(relax.op.concat([s[e] for s in slices], axis=0), name_hint=e.name)
                need(e)
                return sub(e, shared)

            gv = bb.emit_output(out(result))
        bb.emit_func_output(gv)
    new = bb.get()[func_name]
    out_mod = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out_mod[func_name] = new
    return out_mod


def _first_field(var):
    """A stand-in Var with the type of a tuple var's first field (batch norm's normalised output)."""
    from tvm import relax

    return relax.Var(var.name, var.ty.fields[0])
