"""Fixes imported models need before planning (notes/real-models.md G3, G4).

- `fold_weight_broadcasts`: torch's aten.matmul decomposition turns a 3-D activation times a 2-D weight
  into `matmul(x, broadcast_to(W, (T, K, N)))` (sometimes through a reshape), which materialises T copies
  of W (1.26 GB for an LSTM LM's input projection) and keeps them alive for the backward pass. Relax's
  matmul broadcasts by itself, so the operand becomes W. Identity broadcasts (`broadcast_to(x, x.shape)`,
  from attention) are copies and are dropped too.
- `dedupe_params`: tied weights (a decoder sharing the embedding) are imported as separate parameters;
  one parameter per group is kept and the others are bound to it, so there is one tensor, one gradient.
"""
from __future__ import annotations


def _ints(shape):
    """Static dims of a ShapeExpr / TensorType shape, or None when any is symbolic."""
    from tvm import tirx

    if shape is None:
        return None
    values = shape.values if hasattr(shape, "values") else shape
    if not all(isinstance(d, tirx.IntImm) for d in values):
        return None
    return [int(d) for d in values]


def _shape_of(expr):
    ty = expr.ty
    return _ints(ty.shape) if hasattr(ty, "shape") else None


def _broadcast_batch_fits(batch, into) -> bool:
    """True when broadcasting `batch` against `into` (right-aligned) gives `into` unchanged."""
    if len(batch) > len(into):
        return False
    return all(b == i or b == 1 for b, i in zip(reversed(batch), reversed(into)))


def _weight_under_broadcast(expr, var2val):
    """W if expr is broadcast_to(W, (b..., r, c)) (optionally reshaped to (b'..., r, c)) with W of shape
    (r, c); else None."""
    from tvm import relax

    def value(e):
        while isinstance(e, relax.Var) and e in var2val:
            e = var2val[e]
        return e

    e = value(expr)
    if isinstance(e, relax.Call) and getattr(e.op, "name", "") == "relax.reshape":
        outer = _shape_of(e)
        e = value(e.args[0])
        inner = _shape_of(e)
        if outer is None or inner is None or outer[-2:] != inner[-2:]:
            return None
    if not (isinstance(e, relax.Call) and getattr(e.op, "name", "") == "relax.broadcast_to"):
        return None
    w = e.args[0]
    ws, target = _shape_of(w), _shape_of(e)
    if ws is None or target is None or len(ws) != 2 or target[-2:] != ws:
        return None
    return w


def fold_weight_broadcasts(mod):
    """matmul(x, broadcast_to(W)) -> matmul(x, W) (either side) where the result is unchanged, and
    broadcast_to(x, x.shape) -> x, in every Relax function of `mod`."""
    import tvm
    from tvm import relax
    from tvm.relax.dpl import is_op, rewrite_call, wildcard

    matmul = is_op("relax.matmul")(wildcard(), wildcard())
    bcast = is_op("relax.broadcast_to")(wildcard(), wildcard())

    out = {}
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function):
            out[gv] = func
            continue
        var2val = relax.analysis.get_var2val(func)

        def fold_matmul(call, _matches, var2val=var2val):
            a, b = call.args
            sa, sb, so = _shape_of(a), _shape_of(b), _shape_of(call)
            if sa is None or sb is None or so is None or len(sa) < 2 or len(sb) < 2:
                return call
            wb = _weight_under_broadcast(b, var2val)
            if wb is not None and _broadcast_batch_fits(sb[:-2], sa[:-2]):
                return relax.op.matmul(a, wb, out_dtype=call.attrs.out_dtype)
            wa = _weight_under_broadcast(a, var2val)
            if wa is not None and _broadcast_batch_fits(sa[:-2], sb[:-2]):
                return relax.op.matmul(wa, b, out_dtype=call.attrs.out_dtype)
            return call

        def drop_identity(call, _matches):
            src, dst = _shape_of(call.args[0]), _shape_of(call)
            return call.args[0] if src is not None and src == dst else call

        func = rewrite_call(matmul, fold_matmul, func)
        func = rewrite_call(bcast, drop_identity, func)
        out[gv] = func
    new = tvm.IRModule(out, attrs=mod.attrs)
    names = [gv.name_hint for gv, f in new.functions.items() if isinstance(f, relax.Function)]
    return relax.transform.DeadCodeElimination(names)(new)


def dedupe_params(mod, groups, params: dict, func_name: str = "main"):
    """Bind every parameter of a group to the group's first name; -> (mod, params without the aliases).

    groups: lists of parameter names that are one tensor (e.g. by torch tensor identity).
    """
    import tvm

    func = mod[func_name]
    by_name = {p.name: p for p in func.params}
    binding, dropped = {}, set()
    for group in groups:
        names = [n for n in group if n in by_name]
        if len(names) < 2:
            continue
        keep = by_name[names[0]]
        for n in names[1:]:
            if by_name[n].ty.shape is not None and str(by_name[n].ty) != str(keep.ty):
                continue                            # same storage, different view: not an alias we can bind
            binding[by_name[n]] = keep
            dropped.add(n)
    if not binding:
        return mod, params
    new_func = func.bind_params(binding)
    out = tvm.IRModule({gv: (new_func if gv.name_hint == func_name else f) for gv, f in mod.functions.items()},
                       attrs=mod.attrs)
    return out, {k: v for k, v in params.items() if k not in dropped}
