"""FoldParamLayouts: a frozen parameter's layout change is done once, at compile time, into the parameter.

    W: (4096, 25088)   lv = permute_dims(W)   y = matmul(x, lv)
 -> W_T: (25088, 4096)                        y = matmul(x, W_T)      (the library ships W_T)

Without it, TVM lowers the transpose to a kernel of its own that holds the weight twice (input and transposed
copy at once): on ImageNet CNNs at batch 1 that kernel sets the smallest feasible limit (VGG-16's fc6: 2 x
392 MiB). Frozen means a parameter after `num_input` that no result updates (`tvm_swap.updates`): every
parameter of an inference function, the frozen ones of a training step (trainable ones are read in place by
relay_passes.transpose_matmul instead).

Folded: chains of layout ops (permute_dims, reshape, expand_dims, squeeze, flatten) on a frozen parameter,
pure data movement, so numpy (tvm_swap.param_layouts) makes the shipped value bit for bit and inverts it: the
user keeps giving and getting the parameter in its own layout. The recipe is left on the function as the
attribute `tvm_swap.param_layouts` (JSON) for relay_passes.apply to put in the manifest. A parameter also read
as it is stays a parameter beside its folded form.
"""
from __future__ import annotations

import json

import tvm
from tvm import relax, tirx
from tvm.relax.expr_functor import PyExprMutator, mutator

from tvm_swap.param_layouts import Fold, ParamLayouts

ATTR = "tvm_swap.param_layouts"
UPDATES_ATTR = "tvm_swap.updates"
LAYOUT_OPS = ("relax.permute_dims", "relax.reshape", "relax.expand_dims", "relax.squeeze", "relax.flatten")


def _static_shape(ty):
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    dims = getattr(ty.shape, "values", None)
    if dims is None or not all(isinstance(d, tirx.IntImm) for d in dims):
        return None
    return tuple(int(d) for d in dims)


def _step(call):
    """The numpy step of a layout op on a static tensor, or None when it is not one."""
    if not isinstance(call, relax.Call) or not isinstance(call.op, tvm.ir.Op) or call.op.name not in LAYOUT_OPS:
        return None
    src, out = _static_shape(call.args[0].ty), _static_shape(call.ty)
    if src is None or out is None:
        return None
    if call.op.name == "relax.permute_dims":
        axes = call.attrs.axes
        return ("transpose", tuple(reversed(range(len(src)))) if axes is None else tuple(int(a) for a in axes))
    return ("reshape", out)     # the other layout ops keep the element order: a reshape


def _frozen(func) -> list:
    attrs = func.attrs
    if attrs is None or "num_input" not in attrs:
        return []           # no parameters besides inputs
    updated = {int(p) for _, p in attrs[UPDATES_ATTR]} if UPDATES_ATTR in attrs else set()
    return [p for i, p in enumerate(func.params) if i >= int(attrs["num_input"]) and i not in updated]


def _chains(func, frozen):
    """var -> (root parameter, steps) for every binding that is a layout chain on a frozen parameter."""
    chains = {p: (p, ()) for p in frozen}
    for block in func.body.blocks:
        for b in block.bindings:
            if not isinstance(b, relax.VarBinding):
                continue
            step = _step(b.value)
            if step is not None and b.value.args[0] in chains:
                root, steps = chains[b.value.args[0]]
                chains[b.var] = (root, steps + (step,))
    return chains


def _used_outside(func, targets, skip) -> set:
    """The vars of `targets` read by a binding whose var is not in `skip`, or by the function's result."""
    used = set()
    for block in func.body.blocks:
        for b in block.bindings:
            if b.var not in skip:
                used.update(v for v in relax.analysis.free_vars(b.value) if v in targets)
    used.update(v for v in relax.analysis.free_vars(func.body.body) if v in targets)
    return used


@mutator
class _Drop(PyExprMutator):
    """Drops the folded bindings; their readers read the new parameters (set_var_remap)."""

    def __init__(self, drop):
        super().__init__()
        self.drop = drop

    def visit_var_binding_(self, binding):  # noqa: N802  (TVM's visitor naming)
        if binding.var in self.drop:
            return
        super().visit_var_binding_(binding)


def _fresh(name, taken):
    out, i = name, 1
    while out in taken:
        out, i = f"{name}_{i}", i + 1
    taken.add(out)
    return out


def fold_function(func):
    """(func with its frozen parameters' layout chains folded into new parameters, ParamLayouts) or
    (func, None) when there is nothing to fold."""
    frozen = _frozen(func)
    chains = _chains(func, frozen)
    folded = {v for v in chains if v not in frozen}
    exposed = _used_outside(func, folded, folded)
    if not exposed:
        return func, None
    roots = {chains[v][0] for v in folded}
    keep = _used_outside(func, set(frozen), folded) | {p for p in frozen if p not in roots}
    num_input = int(func.attrs["num_input"])
    taken = {p.name for p in func.params}
    params, kept, folds, old_index, remap = [], [], [], {}, {}
    for i, p in enumerate(func.params):
        if i < num_input or p not in frozen or p in keep:
            old_index[i] = len(params)
            params.append(p)
            if i >= num_input:
                kept.append(p.name)
        for v in (v for v in chains if v in exposed and chains[v][0].same_as(p)):
            steps = chains[v][1]
            short = "_T" if len(steps) == 1 and steps[0][0] == "transpose" else "_folded"
            new = relax.Var(_fresh(p.name + short, taken), v.ty)
            remap[v] = new
            params.append(new)
            folds.append(Fold(new.name, p.name, _static_shape(p.ty), steps))
    mut = _Drop(folded)
    for old, new in remap.items():
        mut.set_var_remap(old, new)
    body = mut.visit_expr(func.body)
    attrs = dict(func.attrs.items())
    if UPDATES_ATTR in attrs:
        attrs[UPDATES_ATTR] = [[int(o), old_index[int(p)]] for o, p in attrs[UPDATES_ATTR]]
    user = tuple((p.name, _static_shape(p.ty), str(p.ty.dtype.dtype)) for p in func.params[num_input:])
    layouts = ParamLayouts(user, tuple(kept), tuple(folds))
    attrs[ATTR] = json.dumps(layouts.to_dict())
    new_func = relax.Function(params, body, func.ret_ty, func.is_pure, tvm.ir.make_node("ir.DictAttrs", **attrs))
    return new_func, layouts


@tvm.transform.module_pass(opt_level=0, name="tvm_swap.FoldParamLayouts")
class FoldParamLayouts:
    """Fold frozen parameters' layout chains of `func_name` into the parameters (see the module docstring)."""

    def __init__(self, func_name: str = "main"):
        self.func_name = func_name

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        names = {gv.name_hint: gv for gv in mod.functions}
        gv = names.get(self.func_name)
        if gv is None or not isinstance(mod[gv], relax.Function):
            return mod
        func, layouts = fold_function(mod[gv])
        if layouts is None:
            return mod
        out = tvm.IRModule(dict(mod.functions.items()), attrs=mod.attrs)
        out[gv] = func
        return relax.transform.Normalize()(out)


def folded_layouts(func) -> ParamLayouts | None:
    """The recipe FoldParamLayouts left on a function (also after lowering), or None."""
    attrs = func.attrs
    if attrs is None or ATTR not in attrs:
        return None
    return ParamLayouts.from_dict(json.loads(str(attrs[ATTR])))
