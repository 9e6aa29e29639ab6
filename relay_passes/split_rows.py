"""Rows (axis 2, NCHW) of a region, window ops included: each slice computes the rows its readers need.

    need = row_ranges(bindings, rules, later, k)       # var -> [(lo, hi) of its rows, per slice]

A tensor read after the region is cut into K blocks of rows; walking the region backwards, each op's slice
needs from its input the rows under its windows: a pointwise op the same rows, a conv or pool of kernel kh,
stride sh, dilation dh and top padding pt the rows [lo*sh - pt, (hi-1)*sh - pt + (kh-1)*dh + 1), cut to the
input (where the window hangs over the input's edge, that slice keeps the padding; inside, it reads real
rows). A value several ops read is computed over the union of what they need, so neighbouring slices
recompute a few rows (the halo). Every output row is the same sum over the same (padded) inputs in the same
order as in the unsplit op: results bitwise equal. The emitter (_RowEmitter) cuts each read to what the op
needs and sets the slice's padding; relay_passes.split_region does the rest as for the other axes.
"""
from __future__ import annotations

from .micro_batch import _op_name, _shape

ROWS = 2


def chunk_bounds(n: int, k: int) -> list[tuple[int, int]]:
    """[begin, end) of K blocks of n, as numpy.array_split cuts them (the first n % k one longer)."""
    q, r = divmod(n, k)
    out, b = [], 0
    for i in range(k):
        e = b + q + (1 if i < r else 0)
        out.append((b, e))
        b = e
    return out


def _window(call):
    """(kernel rows dilated, stride, top padding, bottom padding) of a conv or pool."""
    a = call.attrs
    if _op_name(call) == "relax.nn.conv2d":
        kh = int(_shape(call.args[1].ty)[2])
    else:
        kh = int(a.pool_size[0])
    dh = int(a.dilation[0]) if hasattr(a, "dilation") else 1
    return (kh - 1) * dh + 1, int(a.strides[0]), int(a.padding[0]), int(a.padding[2])


def input_rows(call, mode, rows: tuple[int, int], height: int):
    """((lo, hi) of the input rows a slice producing `rows` reads, (top, bottom) padding it keeps)."""
    lo, hi = rows
    if mode[0] != "H":
        return (lo, hi), None
    span, stride, top, _bottom = _window(call)
    start, end = lo * stride - top, (hi - 1) * stride - top + span
    return (max(start, 0), min(end, height)), (max(0, -start), max(0, end - height))


def _hull(a, b):
    return a if b is None else (min(a[0], b[0]), max(a[1], b[1]))


def _reads(call, rule):
    """(arg var, mode) of each argument read sliced ("S" or "H")."""
    from tvm import relax

    for pos, a in enumerate(call.args):
        fields = list(enumerate(a.fields)) if isinstance(a, relax.Tuple) else [(None, a)]
        for f, x in fields:
            mode = rule.get(pos if f is None else (pos, f), ("W", None))
            if mode[0] in ("S", "H") and isinstance(x, relax.Var):
                yield x, mode


def row_ranges(bindings, rules: dict, later: set, k: int) -> dict:
    """var -> [(lo, hi) per slice] of every value split in the region and every value it reads from before."""
    need: dict = {}

    def merge(v, c, rng):
        need.setdefault(v, [None] * k)
        need[v][c] = _hull(rng, need[v][c])

    for i in sorted(rules, reverse=True):
        b, rule = bindings[i], rules[i]
        height = _shape(b.var.ty.fields[0] if hasattr(b.var.ty, "fields") else b.var.ty)[ROWS]
        if b.var in later:
            for c, rng in enumerate(chunk_bounds(height, k)):
                merge(b.var, c, rng)
        if b.var not in need:                 # read by nothing after it: its own blocks
            for c, rng in enumerate(chunk_bounds(height, k)):
                merge(b.var, c, rng)
        for c in range(k):
            rows = need[b.var][c]
            if rule == "item":
                merge(b.value.tuple_value, c, rows)
                continue
            for x, mode in _reads(b.value, rule):
                merge(x, c, input_rows(b.value, mode, rows, _shape(x.ty)[ROWS])[0])
    return need


def cut_rows(bb, value, have: tuple[int, int], want: tuple[int, int], height: int, name: str):
    """`value` (holding rows `have` of a tensor of `height` rows) cut to rows `want`; itself when equal."""
    from tvm import relax

    if have == want:
        return value
    return bb.emit(relax.op.strided_slice(value, axes=[ROWS], begin=[want[0] - have[0]], end=[want[1] - have[0]]),
                   name_hint=name)


def with_padding(call, args, pads):
    """The conv or pool `call` on `args` with its top and bottom padding set to `pads`."""
    from tvm import relax

    a = call.attrs
    padding = [pads[0], int(a.padding[1]), pads[1], int(a.padding[3])]
    name = _op_name(call)
    if name == "relax.nn.conv2d":
        return relax.op.nn.conv2d(args[0], args[1], strides=a.strides, padding=padding, dilation=a.dilation,
                                  groups=a.groups, data_layout=a.data_layout, kernel_layout=a.kernel_layout,
                                  out_layout=a.out_layout, out_dtype=a.out_dtype)
    pool = relax.op.nn.max_pool2d if "max" in name else relax.op.nn.avg_pool2d
    extra = {"count_include_pad": a.count_include_pad} if "avg" in name else {}
    return pool(args[0], pool_size=a.pool_size, strides=a.strides, padding=padding, dilation=a.dilation,
                ceil_mode=a.ceil_mode, layout=a.layout, out_layout=a.out_layout, **extra)
