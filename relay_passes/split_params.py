"""Parameters a region split reads as slices, cut at compile time into parameters of their own
(relay_passes.split_region): a frozen parameter read only as the same K slices along one axis becomes K
parameters, each made from the user's by a `slice` step of its recipe (tvm_swap.param_layouts), so the user
still gives and gets it whole and no kernel copies a slice out of it at run time.
"""
from __future__ import annotations


def _param_reads(func, bindings, planned) -> dict:
    """{frozen param: {(axis, bounds) of each read}}: "P" reads inside regions, None for any other read."""
    from tvm import relax

    from .param_layout import _frozen

    frozen = set(_frozen(func))
    reads: dict = {p: set() for p in frozen}
    in_region = {}
    for s, (e, _r, bounds, rules) in planned.items():
        for i in range(s, e + 1):
            in_region[i] = (rules.get(i), bounds)
    for i, b in enumerate(bindings):
        rule, bounds = in_region.get(i, (None, None))
        v = b.value
        args = list(v.args) if isinstance(v, relax.Call) else [v]
        for pos, a in enumerate(args):
            fields = list(enumerate(a.fields)) if isinstance(a, relax.Tuple) else [(None, a)]
            for f, x in fields:
                if x in reads:
                    mode = rule.get(pos if f is None else (pos, f)) if isinstance(rule, dict) else None
                    reads[x].add((mode[1], tuple(bounds)) if mode and mode[0] == "P" else None)
    for x in relax.analysis.free_vars(func.body.body):
        if x in reads:
            reads[x].add(None)
    return reads


def _cut_params(func, bindings, planned):
    """(the function's params with each frozen param read only as the same slices cut into its pieces,
    {param: [pieces]}, attrs with the recipe that makes the pieces from the user's param)."""
    import json

    from tvm import relax

    from tvm_swap.param_layouts import Fold, ParamLayouts

    from .param_layout import ATTR, _static_shape, folded_layouts
    from .split_dense import _identity_layouts

    attrs = {str(key): val for key, val in func.attrs.items()} if func.attrs is not None else {}
    reads = {p: r for p, r in _param_reads(func, bindings, planned).items() if len(r) == 1 and None not in r}
    if not reads:
        return list(func.params), {}, attrs
    layouts = folded_layouts(func) or _identity_layouts(func)
    folds = {f.name: f for f in layouts.folds}
    reads = {p: r for p, r in reads.items() if p.name not in folds or folds[p.name].chunk is None}  # (one cut)
    kept, new_folds = list(layouts.kept), [f for f in layouts.folds if f.name not in {p.name for p in reads}]
    params, cuts = [], {}
    for p in func.params:
        if p not in reads:
            params.append(p)
            continue
        (axis, bounds), = reads[p]
        shape = list(_static_shape(p.ty))
        base = folds.get(p.name) or Fold(p.name, p.name, tuple(shape), ())
        if p.name in kept:
            kept.remove(p.name)
        cuts[p] = []
        for i, (b, e) in enumerate(bounds):
            piece = relax.Var(f"{p.name}_c{i}", relax.TensorType(shape[:axis] + [e - b] + shape[axis + 1:],
                                                                 p.ty.dtype))
            cuts[p].append(piece)
            params.append(piece)
            new_folds.append(Fold(piece.name, base.source, base.source_shape, base.steps + (("slice", (axis, b, e)),)))
    attrs[ATTR] = json.dumps(ParamLayouts(layouts.user, tuple(kept), tuple(new_folds)).to_dict())
    return params, cuts, attrs
