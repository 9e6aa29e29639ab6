"""Which regions to split, along which axis and in how many slices, so that every op fits `room` bytes.

    regions = choose_regions(func, room)         # [Region(start, end, axis, k)] for SplitRegions

Estimated on the Relax function (before fusion): an op's need is the bytes of its tensor arguments and its
result (an elementwise op whose input dies there: the larger of the two, as the arena runs it in place). Each op
needing more than `room` seeds a region; the region grows while what bounds it does not fit: a tensor it reads
from before is sliced by a kernel holding it whole plus one slice; a tensor read after it is joined by a
`concat` holding all slices and the whole. The axis is the batch where there is one, else channels, else rows
(relay_passes.split_region says which ops each keeps bitwise); K is the smallest that brings each op of the
region to `room`. The estimate only proposes: tvm_swap.limits.split_to_fit lowers the split module and checks the
floor exactly.
"""
from __future__ import annotations

from .split_region import ELEMWISE, Region, SplitRefused, _flat_bindings, activations, plan_region

MAX_GROW = 64          # bindings a region may grow by (a chain CNN's block is a few dozen)


def _nbytes(ty) -> int:
    from tvm import relax

    if isinstance(ty, relax.TupleType):
        return _nbytes(ty.fields[0]) if ty.fields else 0
    try:
        n = 1
        for d in ty.shape.values:
            n *= int(d)
        return n * ((ty.dtype.bits * ty.dtype.lanes + 7) // 8 if hasattr(ty.dtype, "bits") else
                    _dtype_bytes(str(ty.dtype)))
    except (AttributeError, TypeError):
        return 0


def _dtype_bytes(dtype: str) -> int:
    import numpy as np

    return 1 if dtype == "bool" else np.dtype(dtype).itemsize


def _args(call):
    from tvm import relax

    out = []
    for a in call.args:
        out += list(a.fields) if isinstance(a, relax.Tuple) else [a]
    return [a for a in out if isinstance(a, relax.Var) and isinstance(a.ty, relax.TensorType)]


class _Facts:
    """Sizes, readers and per-op needs of one function's bindings."""

    def __init__(self, func):
        from tvm import relax

        self.func = func
        self.bindings = _flat_bindings(func)
        self.act = activations(func, self.bindings)
        self.index = {b.var: i for i, b in enumerate(self.bindings)}
        self.readers: dict = {}
        for i, b in enumerate(self.bindings):
            for v in relax.analysis.free_vars(b.value):
                self.readers.setdefault(v, []).append(i)
        for v in relax.analysis.free_vars(func.body.body):
            self.readers.setdefault(v, []).append(len(self.bindings))
        self.need = [self._need(i) for i in range(len(self.bindings))]

    def _need(self, i: int) -> int:
        from tvm import relax

        b = self.bindings[i]
        v = b.value
        if b.var not in self.act or not isinstance(v, relax.Call):
            return 0
        ins = {a: _nbytes(a.ty) for a in _args(v)}
        out = _nbytes(b.var.ty)
        name = v.op.name if hasattr(v.op, "name") else ""
        first = _args(v)[0] if _args(v) else None
        if (name in ELEMWISE or name == "relax.nn.batch_norm") and first is not None \
                and len(self.readers.get(first, [])) == 1 and ins.get(first) == out:
            ins.pop(first)                  # written in place over its dying input
            return sum(ins.values()) + out
        return sum(ins.values()) + out


def _k_for(facts, s: int, e: int, rules: dict, room: int, dim: int) -> int | None:
    """The smallest K with every split op of bindings[s..e] at most `room` (None: none does)."""
    k = 1
    for i, rule in rules.items():
        if rule == "item":
            continue
        v = facts.bindings[i].value
        whole = sliced = 0
        for pos, a in enumerate(v.args):
            mode = rule.get(pos, ("W", None))
            for f, x in (enumerate(a.fields) if hasattr(a, "fields") else [(None, a)]):
                m = rule.get((pos, f), mode) if f is not None else mode
                nb = _nbytes(getattr(x, "ty", None)) if hasattr(x, "ty") else 0
                if m[0] == "W":
                    whole += nb
                else:
                    sliced += nb
        sliced += _nbytes(facts.bindings[i].var.ty)
        if whole >= room:
            return None
        k = max(k, -(-sliced // (room - whole)))
    return k if k <= dim else None


def _boundary(facts, s: int, e: int, rules: dict, k: int, room: int) -> tuple[bool, bool]:
    """(whether a tensor read from before the region is too big to slice, whether one read after it is too
    big to join), with K slices."""
    inside = {facts.bindings[i].var for i in range(s, e + 1)}
    bad_in = bad_out = False
    for i, rule in rules.items():
        var = facts.bindings[i].var
        if any(r > e for r in facts.readers.get(var, [])):
            bad_out |= 2 * _nbytes(var.ty) > room
        if rule == "item":
            continue
        v = facts.bindings[i].value
        for pos, a in enumerate(v.args):
            for f, x in (enumerate(a.fields) if hasattr(a, "fields") else [(None, a)]):
                m = rule.get((pos, f) if f is not None else pos, ("W", None))
                if m[0] in ("S", "H") and x not in inside:
                    nb = _nbytes(x.ty)
                    bad_in |= nb + -(-nb // k) > room
    return bad_in, bad_out


def grow_region(facts, seed: int, axis: int, room: int, taken: set):
    """Region around bindings[seed] split along `axis` that fits `room`, or None."""
    s = e = seed
    for _ in range(MAX_GROW):
        if any(i in taken for i in range(s, e + 1)):
            return None
        try:
            dim, rules = plan_region(facts.func, facts.bindings, facts.act, s, e, axis)
        except SplitRefused:
            return None
        k = _k_for(facts, s, e, rules, room, dim)
        if k is None:
            return None
        bad_in, bad_out = _boundary(facts, s, e, rules, k, room)
        if not bad_in and not bad_out:
            return (s, e, Region(facts.bindings[s].var.name, facts.bindings[e].var.name, axis, k)) if k > 1 else None
        if bad_in:
            if s == 0 or facts.bindings[s - 1].var not in facts.act:
                return None
            s -= 1
        if bad_out:
            if e + 1 >= len(facts.bindings) or facts.bindings[e + 1].var not in facts.act:
                return None
            e += 1
    return None


def _axes(facts, i: int, training: bool) -> list[int]:
    from .micro_batch import _shape

    out = _shape(facts.bindings[i].var.ty.fields[0] if hasattr(facts.bindings[i].var.ty, "fields")
                 else facts.bindings[i].var.ty) or []
    axes = (0,) if training else (0, 1, 2)      # (a training step: the batch only, split_region)
    return [a for a in axes if len(out) > a and out[a] > 1]


def choose_regions(func, room: int) -> list:
    """[Region] so that, by the Relax estimate, no op needs more than `room` bytes; ops no region helps are
    left as they are (the exact check after lowering names them). A training step's regions are along the
    batch only, of per-sample ops (its batch norm statistics and parameter gradients end a region)."""
    facts = _Facts(func)
    training = func.attrs is not None and "tvm_swap.updates" in func.attrs
    taken: set = set()
    regions = []
    for i in sorted(range(len(facts.bindings)), key=lambda j: -facts.need[j]):
        if facts.need[i] <= room:
            break
        if i in taken:
            continue
        for axis in _axes(facts, i, training):
            found = grow_region(facts, i, axis, room, taken)
            if found is not None:
                s, e, region = found
                taken |= set(range(s, e + 1))
                regions.append(region)
                break
    return regions
