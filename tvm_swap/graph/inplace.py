"""Which outputs of a kernel may take the memory of which of its inputs (an elementwise op written in place).

A kernel may write output `y` into input `x`'s bytes when that cannot change any value it computes: `x` and
`y` have one shape and dtype, exactly one block writes `y`, that block iterates over data-parallel axes only
and writes `y` at a single point per iteration, and `x` is read by that block alone, at that same point. Then
each element of `y` is written after the only read of the same element of `x`, and no other element of `x`
is read after it: the result is the same whether `x` and `y` share memory or not, on any loop order or
thread binding (block regions are stated in block iterators, which scheduling does not change). Anything
else (reductions, broadcasts of `x`, transposes, other blocks reading `x`, a block that caches `x` in shared
memory) is refused: conservative by design.

Reads the blocks' declared regions (T.reads / T.writes), which TVM derives from the accesses when it lowers.
"""
from __future__ import annotations

DATA_PAR = 0          # IterVar.iter_type of a spatial (data-parallel) block iterator


def _blocks(stmt):
    """Every SBlock under `stmt` (root block included), in program order."""
    out, stack = [], [stmt]
    while stack:
        s = stack.pop()
        if s is None or isinstance(s, (int, float, str)):
            continue
        if hasattr(s, "iter_vars") and hasattr(s, "reads") and hasattr(s, "writes"):
            out.append(s)
        kids = [getattr(s, a, None) for a in ("body", "block", "then_case", "else_case", "init")]
        kids += list(getattr(s, "seq", None) or ())
        stack.extend(reversed([k for k in kids if k is not None]))
    return out


def _point_indices(region):
    """The index expressions of a region that covers one element per dimension, else None."""
    idx = []
    for r in region.region:
        try:
            if int(r.extent) != 1:
                return None
        except (TypeError, ValueError):
            return None
        idx.append(r.min)
    return idx


def _same(a, b) -> bool:
    import tvm_ffi

    return len(a) == len(b) and all(tvm_ffi.structural_equal(x, y) for x, y in zip(a, b))


def _shape(buf):
    try:
        return tuple(int(d) for d in buf.shape)
    except (TypeError, ValueError):
        return None


def _buffer(region):
    buf = getattr(region, "source", None)
    return getattr(region, "buffer", None) if buf is None else buf


def elementwise_aliases(prim_func) -> tuple[tuple[int, int], ...]:
    """((input param index, output param index), ...) of the pairs the kernel may run in place (see above).
    `prim_func.params` are its buffers in call order; any param may be the output (the caller knows which)."""
    params = list(prim_func.params)
    writes, reads = [], []               # (param index, block, region); buffers compared by identity
    for blk in _blocks(prim_func.body):
        for regs, acc in ((blk.writes, writes), (blk.reads, reads)):
            for reg in regs:
                buf = _buffer(reg)
                k = next((k for k, p in enumerate(params) if buf is not None and p.same_as(buf)), -1)
                if k >= 0:
                    acc.append((k, blk, reg))
    pairs = []
    for j, y in enumerate(params):
        w = [(b, r) for k, b, r in writes if k == j]
        if len(w) != 1 or _shape(y) is None:
            continue
        blk, wreg = w[0]
        if any(int(iv.iter_type) != DATA_PAR for iv in blk.iter_vars) or getattr(blk, "init", None) is not None:
            continue
        widx = _point_indices(wreg)
        if widx is None or any(k == j for k, _, _ in reads):
            continue
        for k, x in enumerate(params):
            if k == j or _shape(x) != _shape(y) or str(x.dtype) != str(y.dtype) or any(q == k for q, _, _ in writes):
                continue
            rd = [(b, r) for q, b, r in reads if q == k]
            if rd and all(b.same_as(blk) and _same(_point_indices(r) or [], widx) for b, r in rd):
                pairs.append((k, j))
    return tuple(pairs)
