"""SplitRegions: a run of activation ops computed as K slices along one axis, the slices joined after it.

    split = SplitRegions([Region(start="lv3", end="lv9", axis=0, k=4)])(mod)

    x_i = strided_slice(x, axis, b_i, e_i)   for each tensor the region reads from before it, per slice
    lv3_i .. lv9_i                           every op of the region on slice i (i < K, slice after slice)
    lv9 = concat([lv9_0 .. lv9_{K-1}], axis) for each tensor of the region read after it

Why (issue 26, item 3): a kernel's inputs and outputs are on the device at once, so the floor of a plan is the
largest kernel's; an op run as K slices holds 1/K of its activations per slice, and each slice is an ordinary
kernel the planner schedules, swaps and places. A whole region is split, not one op: the join (`concat`) holds
its K slices and the whole result at once, so the region ends where the tensor is small (after a pool, before a
conv that reduces over the split axis).

Axes, each keeping every output element the same computation in the same order (results bitwise equal):
- batch (axis 0, batch > 1): every op that treats batch elements independently (relay_passes.micro_batch's table);
- channels (axis 1, NCHW): elementwise ops, inference batch norm (its per-channel params sliced), pools, a
  depthwise conv (weight sliced), and a conv reading its whole input with its weight cut by output channels
  (like split_dense's output features: no sum is cut), a concat along another axis;
- rows (axis 2, NCHW): ops that are pointwise in space (elementwise, batch norm, a 1x1 stride-1 conv, a concat
  along channels); a window op (3x3 conv, pool) would need overlapping rows and ends the region.
A parameter (or a parameter-only value) read along the split axis is sliced per slice too (a bias, batch norm's
statistics, a conv weight). Anything else is refused with the op named (SplitRefused).
"""
from __future__ import annotations

from dataclasses import dataclass

from .micro_batch import ELEMWISE, _Refuse, _op_name, _shape
from .split_params import _cut_params
from .split_rows import chunk_bounds, cut_rows, input_rows, row_ranges, with_padding
from .split_rules import CONVS, ROWS, _rule

__all__ = ["ELEMWISE", "Region", "SplitRefused", "SplitRegions", "chunk_bounds", "plan_region", "split_function"]


class SplitRefused(ValueError):
    """A region that cannot be split along the asked axis (the op and why)."""


@dataclass(frozen=True)
class Region:
    start: str          # name of the region's first binding
    end: str            # name of its last binding (inclusive; bindings in between, in order)
    axis: int           # 0: batch, 1: channels, 2: rows (NCHW)
    k: int              # slices




# ---- the rewrite --------------------------------------------------------------------------------------

def _flat_bindings(func):
    from tvm import relax

    body = func.body
    if not isinstance(body, relax.SeqExpr) or any(not isinstance(b, relax.DataflowBlock) for b in body.blocks):
        raise SplitRefused("splitting needs a function of dataflow blocks only")
    bindings = [b for blk in body.blocks for b in blk.bindings]
    if any(not isinstance(b, relax.VarBinding) for b in bindings):
        raise SplitRefused("splitting does not support match_cast bindings")
    return bindings


def activations(func, bindings) -> set:
    """The vars that depend on the function's inputs (its `num_input` first params, else all)."""
    from tvm import relax

    n = func.attrs.get("num_input") if func.attrs is not None else None
    act = set(func.params[:int(n)] if n is not None else func.params)
    for b in bindings:
        if any(v in act for v in relax.analysis.free_vars(b.value)):
            act.add(b.var)
    return act


def _region_span(bindings, region: Region) -> tuple[int, int]:
    names = [b.var.name for b in bindings]
    if region.start not in names or region.end not in names:
        raise SplitRefused(f"no binding named {region.start!r} or {region.end!r}")
    if names.count(region.start) > 1 or names.count(region.end) > 1:      # (a training step reuses `lv` names)
        raise SplitRefused(f"region {region.start!r}..{region.end!r}: a binding name that is not unique")
    s, e = names.index(region.start), names.index(region.end)
    if e < s:
        raise SplitRefused(f"region {region.start!r}..{region.end!r} ends before it starts")
    return s, e


def plan_region(func, bindings, act, s: int, e: int, axis: int) -> tuple[int, dict]:
    """(the size split along `axis`, {binding index: its rule}) for bindings[s..e]; SplitRefused names the op
    that cannot be split. A binding is split when it depends on the inputs; parameter-only ones stay whole."""
    from tvm import relax

    split, rules, dim = set(), {}, None
    for i in range(s, e + 1):
        b = bindings[i]
        v = b.value
        if b.var not in act:
            continue
        try:
            if isinstance(v, relax.TupleGetItem):
                if v.tuple_value not in split or v.index != 0:
                    raise _Refuse("only the first field of a split batch norm is read")
                rules[i] = "item"
            elif isinstance(v, relax.Call):
                out_ty = v.ty.fields[0] if isinstance(v.ty, relax.TupleType) else v.ty
                if dim is None:
                    dim = (_shape(out_ty) or [None] * (axis + 1))[axis] if len(_shape(out_ty) or []) > axis else None
                    if dim is None or dim < 2:
                        raise _Refuse(f"nothing to split along axis {axis}")
                rules[i] = _rule(v, out_ty, axis, dim, lambda a: a in act)
                _check_split_reads(v, rules[i], split, axis)
                if _shape(out_ty)[axis] != dim and axis != ROWS:
                    raise _Refuse(f"its result does not have {dim} along axis {axis}")
            else:
                raise _Refuse(f"a {type(v).__name__} binding")
        except _Refuse as err:
            op = _op_name(v) if isinstance(v, relax.Call) else type(v).__name__
            raise SplitRefused(f"cannot split {op!r} (binding {b.var.name!r}) along axis {axis}: {err}") from None
        split.add(b.var)
    if not rules:
        raise SplitRefused("the region has no op on the inputs' data")
    return dim, rules


def _check_split_reads(call, rule: dict, split: set, axis: int) -> None:
    """A value split earlier in the region is read only as its slices along the same axis."""
    from tvm import relax

    for pos in range(len(call.args)):
        a = call.args[pos]
        fields = list(enumerate(a.fields)) if isinstance(a, relax.Tuple) else [(None, a)]
        for f, v in fields:
            key = pos if f is None else (pos, f)
            if v in split and rule.get(key, ("W", None))[0] not in ("S", "H"):
                raise _Refuse("it reads a split value whole")


def _sub(expr, env):
    """expr with its vars replaced by env's."""
    from tvm import relax

    if isinstance(expr, relax.Var):
        return env.get(expr, expr)
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_sub(f, env) for f in expr.fields])
    if isinstance(expr, relax.TupleGetItem):
        return relax.TupleGetItem(_sub(expr.tuple_value, env), expr.index)
    if isinstance(expr, relax.Call):
        return relax.Call(expr.op, [_sub(a, env) for a in expr.args], expr.attrs, expr.ty_args)
    return expr


class _RegionEmitter:
    """Emits one region's slices (slice after slice) and the joins of what is read after it."""

    def __init__(self, bb, env, bindings, span, rules, axis, bounds, cuts):
        self.bb, self.env, self.bindings, self.span = bb, env, bindings, span
        self.rules, self.axis, self.bounds = rules, axis, bounds
        self.cuts = cuts            # param var -> [its K pieces], new params of the function

    def _read(self, v, mode, c, mine: dict, cache: dict):
        from tvm import relax

        if v in mine:
            return mine[v]
        if mode[0] == "W" or not isinstance(v, relax.Var):
            return _sub(v, self.env)
        lo, hi = self.bounds[c]
        if mode[0] == "P" and v in self.cuts:                   # cut at compile time into its own params
            return self.cuts[v][c]
        key = (v, mode[1])
        if key not in cache:
            cache[key] = self.bb.emit(relax.op.strided_slice(self.env.get(v, v), axes=[mode[1]], begin=[lo],
                                                             end=[hi]), name_hint=f"{v.name}_p{c}")
        return cache[key]

    def _call(self, call, rule, c, mine, cache):
        from tvm import relax

        args = []
        for pos, a in enumerate(call.args):
            if isinstance(a, relax.Tuple):
                args.append(relax.Tuple([self._read(f, rule.get((pos, j), ("W", None)), c, mine, cache)
                                         for j, f in enumerate(a.fields)]))
            elif isinstance(a, relax.ShapeExpr) and _op_name(call) == "relax.reshape":
                lo, hi = self.bounds[c]
                args.append(relax.ShapeExpr([hi - lo] + [int(d) for d in a.values][1:]))   # (axis 0 only)
            else:
                args.append(self._read(a, rule.get(pos, ("W", None)), c, mine, cache))
        if _op_name(call) in CONVS and rule.get(0) == ("S", 1):      # depthwise: one group per channel
            a = call.attrs
            lo, hi = self.bounds[c]
            return relax.op.nn.conv2d(args[0], args[1], strides=a.strides, padding=a.padding, dilation=a.dilation,
                                      groups=hi - lo, data_layout=a.data_layout, kernel_layout=a.kernel_layout,
                                      out_layout=a.out_layout, out_dtype=a.out_dtype)
        return relax.Call(call.op, args, call.attrs, call.ty_args)

    def emit(self, later: set) -> None:
        from tvm import relax

        s, e = self.span
        for i in range(s, e + 1):          # parameter-only values: once, whole, before the slices
            if i not in self.rules:
                b = self.bindings[i]
                self.env[b.var] = self.bb.emit(_sub(b.value, self.env), name_hint=b.var.name)
        slices = []
        for c in range(len(self.bounds)):
            mine, cache = {}, {}
            for i in sorted(self.rules):
                b, rule = self.bindings[i], self.rules[i]
                value = (relax.TupleGetItem(mine[b.value.tuple_value], b.value.index) if rule == "item"
                         else self._call(b.value, rule, c, mine, cache))
                mine[b.var] = self.bb.emit(value, name_hint=f"{b.var.name}_p{c}")
            slices.append(mine)
        for i in sorted(self.rules):
            var = self.bindings[i].var
            if var in later:
                if isinstance(var.ty, relax.TupleType):
                    raise SplitRefused(f"{var.name!r}, a tuple, is read after the region: end the region later")
                self.env[var] = self.bb.emit(relax.op.concat([m[var] for m in slices], axis=self.axis),
                                             name_hint=var.name)


def split_function(func, regions, func_name: str = "main"):
    """`func` with each Region (by binding names; disjoint) computed in slices (module docstring)."""
    from tvm import relax

    bindings = _flat_bindings(func)
    act = activations(func, bindings)
    spans = sorted((_region_span(bindings, r), r) for r in regions if int(r.k) > 1)
    for ((_, end), _r), ((start, _), _r2) in zip(spans, spans[1:]):
        if start <= end:
            raise SplitRefused("regions overlap")
    planned = {}
    for (s, e), r in spans:
        dim, rules = plan_region(func, bindings, act, s, e, int(r.axis))
        if int(r.k) > dim:
            raise SplitRefused(f"{r.k} slices of {dim} along axis {r.axis}")
        planned[s] = (e, r, chunk_bounds(dim, int(r.k)), rules)
    params, cuts, attrs = _cut_params(func, bindings, planned)
    bb = relax.BlockBuilder()
    env = {p: p for p in func.params}
    name = func_name
    with bb.function(str(name), params, attrs=attrs, pure=True):
        with bb.dataflow():
            i = 0
            while i < len(bindings):
                if i in planned:
                    e, r, bounds, rules = planned[i]
                    later = set()
                    for b in bindings[e + 1:]:
                        later |= set(relax.analysis.free_vars(b.value))
                    later |= set(relax.analysis.free_vars(func.body.body))
                    emitter = _RowEmitter if int(r.axis) == ROWS else _RegionEmitter
                    emitter(bb, env, bindings, (i, e), rules, int(r.axis), bounds, cuts).emit(later)
                    i = e + 1
                    continue
                b = bindings[i]
                env[b.var] = bb.emit(_sub(b.value, env), name_hint=b.var.name)
                i += 1
            gv = bb.emit_output(_sub(func.body.body, env))
        bb.emit_func_output(gv)
    return bb.get()[str(name)]


class _RowEmitter(_RegionEmitter):
    """Rows with windows (relay_passes.split_rows): each slice computes the rows its readers need."""

    def emit(self, later: set) -> None:
        from tvm import relax

        s, e = self.span
        k = len(self.bounds)
        need = row_ranges(self.bindings, self.rules, later, k)
        for i in range(s, e + 1):
            if i not in self.rules:
                b = self.bindings[i]
                self.env[b.var] = self.bb.emit(_sub(b.value, self.env), name_hint=b.var.name)
        slices = []
        for c in range(k):
            mine = {}
            for i in sorted(self.rules):
                b, rule = self.bindings[i], self.rules[i]
                rows = need[b.var][c]
                if rule == "item":
                    mine[b.var] = self.bb.emit(relax.TupleGetItem(mine[b.value.tuple_value], b.value.index),
                                               name_hint=f"{b.var.name}_p{c}")
                    continue
                mine[b.var] = self.bb.emit(self._row_call(b.value, rule, c, rows, mine, need),
                                           name_hint=f"{b.var.name}_p{c}")
                got = _shape(mine[b.var].ty.fields[0] if hasattr(mine[b.var].ty, "fields") else mine[b.var].ty)
                if got[ROWS] != rows[1] - rows[0]:
                    raise SplitRefused(f"rows of {b.var.name!r}: {got[ROWS]} computed, {rows} wanted")
            slices.append(mine)
        for i in sorted(self.rules):
            var = self.bindings[i].var
            if var in later:
                if isinstance(var.ty, relax.TupleType):
                    raise SplitRefused(f"{var.name!r}, a tuple, is read after the region: end the region later")
                h = _shape(var.ty)[ROWS]
                parts = [cut_rows(self.bb, m[var], need[var][c], blk, h, f"{var.name}_b{c}")
                         for c, (m, blk) in enumerate(zip(slices, chunk_bounds(h, k)))]
                self.env[var] = self.bb.emit(relax.op.concat(parts, axis=ROWS), name_hint=var.name)

    def _row_call(self, call, rule, c, rows, mine, need):
        from tvm import relax

        pads, args = None, []
        for pos, a in enumerate(call.args):
            if isinstance(a, relax.Tuple):
                args.append(relax.Tuple([self._row_read(call, rule.get((pos, j), ("W", None)), x, c, rows, mine,
                                                        need)[0] for j, x in enumerate(a.fields)]))
                continue
            value, p = self._row_read(call, rule.get(pos, ("W", None)), a, c, rows, mine, need)
            pads = p if p is not None else pads
            args.append(value)
        if pads is not None:
            return with_padding(call, args, pads)
        return relax.Call(call.op, args, call.attrs, call.ty_args)

    def _row_read(self, call, mode, x, c, rows, mine, need):
        """(x cut to the rows this slice's op reads, the padding it keeps (None: not a window read))."""
        from tvm import relax

        if mode[0] not in ("S", "H") or not isinstance(x, relax.Var):
            return _sub(x, self.env), None
        h = _shape(x.ty)[ROWS]
        want, pads = input_rows(call, mode, rows, h)
        if x in mine:
            return cut_rows(self.bb, mine[x], need[x][c], want, h, f"{x.name}_r{c}"), pads
        return cut_rows(self.bb, self.env.get(x, x), (0, h), want, h, f"{x.name}_p{c}"), pads


def check_training_regions(regions) -> None:
    """A training step splits regions along the batch only: its per-sample ops (split_rules; the table refuses
    every op that reduces over the batch: batch norm's statistics, parameter gradients, the loss) keep each
    sample's arithmetic, where channels or rows would cut a batch norm's per-channel sums or a conv's weight
    gradient."""
    for r in regions:
        if int(r.axis) != 0:
            raise SplitRefused(f"region {r.start!r}..{r.end!r}: a training step splits regions along the batch "
                               f"(axis 0) only, not axis {r.axis}")


class SplitRegions:
    """A module pass: `func_name` with each Region computed in slices (module docstring). A training step
    (`tvm_swap.updates`) is split along the batch only (check_training_regions); its batch norm statistics and
    parameter gradients mix the samples, and the rules refuse them inside a region. Called as
    TVM's passes are (`SplitRegions(regions)(mod)`), but not wrapped by tvm.transform.module_pass: TVM's FFI
    would turn a SplitRefused raised inside into a RuntimeError, losing the type callers catch."""

    def __init__(self, regions, func_name: str = "main"):
        self.regions = [r for r in regions if int(r.k) > 1]
        self.func_name = func_name

    def __call__(self, mod):
        import tvm
        from tvm import relax

        if not self.regions:
            return mod
        gv = mod.get_global_var(self.func_name)
        func = mod[gv]
        if func.attrs is not None and "tvm_swap.updates" in func.attrs:
            check_training_regions(self.regions)
        out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
        out[gv] = split_function(func, self.regions, self.func_name)
        return relax.transform.Normalize()(out)
