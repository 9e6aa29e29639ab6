"""A limit no plan can meet, refused from the Relax function before lowering (issue 16: within a second).

    b = floor_bounds(mod, "main", target)     # None where the bounds below cannot be proven for this module
    check_before_lowering(mod, "5%", "main", target)   # raises EarlyInfeasibleError when b proves it

A percentage limit is a share of the *lowered* graph's no-swap need (tvm_swap.limits.mem_limit.no_swap_bytes), and the
exact floor (planner.api.feasible_floor) is of the lowered graph too, so the exact check needs lowering (seconds
for a training step). Two bounds known before lowering decide most limits far below the floor:

    no_swap = S + W     S: the storages of TVM's static plan; W: the largest kernel workspace (aligned)
    floor  >= WS + W    WS: the largest kernel's aligned inputs and outputs (planner.swapadvisor.arena's
                        working_set_floor; the size-class pool's floor is at least that too)

- S <= S_up, the aligned bytes of every parameter plus every tensor a call_tir writes, and every global buffer
  its kernel allocates, when each Relax op is legalized alone (this module runs the pipeline's library dispatch
  and LegalizeOps on one small function per distinct call). Why: the lowered graph's tensors are the parameters,
  the kernels' outputs and the buffers relay_passes.lift_workspace made outputs (a fused kernel's root
  buffers: legalized outputs fused inside, or a legalized kernel's own buffers); FuseOps and FuseTIR only turn
  some legalized outputs into a fused kernel's internal buffers, FoldConstant only turns some into constants,
  RewriteDataflowReshape only into views; none makes a tensor that a legalized call_tir did not write or
  allocate. A best-fit plan creates a storage only for a tensor, of that tensor's size.
- WS + W >= A, the largest raw bytes one live, unfolded op surely touches: the parameters it reads (deduplicated
  up to plain aliases), plus its result when that is a result of the function. Why: the kernel that runs the op
  after fusion takes each parameter the op reads as an input (in its WS), and a function result as an output.
  Inside a fused kernel nothing else is sure: on llvm relay_passes.cpu_inline inlines a fused kernel's
  elementwise stages and computes epilogues one element at a time, so values that stay inside one fused kernel
  and the buffers a kernel allocates alone (a convolution's padded input, ...) may never be materialised (GPU
  schedules do the same). What crosses kernels is: a fused kernel's inputs and outputs are tensors, and FuseOps
  (TVM's GraphPartitioner, on the op_pattern AnnotateTIROpPattern gives each legalized kernel) merges groups
  only by fusing a node into its post-dominator's group: an elementwise/broadcast node into a consumer of
  pattern at most injective or a reduction (never into a kOutEWiseFusable or opaque one: the edge into it
  carries that pattern), an injective node along an all-injective path, a kOutEWiseFusable node (convolution,
  matmul, pooling) forward along elementwise/broadcast consumers; reductions and opaque kernels fuse into
  nothing. So also counted, for an op run by one kernel: every input of a kOutEWiseFusable or opaque op (no
  producer joins its group); every input of a reduction that comes from a kernel of pattern above broadcast
  (not a reshape, which may become a view); and its result when it is a reduction or opaque op that a live
  op reads, or a kOutEWiseFusable op that a live kernel of pattern above broadcast reads (a reader outside its
  group: the result is an output of the group's kernel). Deeper fusion limits (fuse_max_depth) only cut
  groups, and the schedules (cpu_inline on llvm, dlight on cuda) work inside one kernel, so the bound holds on
  cuda as on llvm (relay_passes.lower runs the same Relax-level steps for both). Only ops
  whose legalization is exactly one call_tir of a kernel that is not a reshape count; an op whose inputs are
  not surely data (the parameters, and results of single kernels that read such data, through views and
  tuples; anything else may be folded into a constant by FoldConstant, e.g. a zeros_like) may itself be
  folded, and ops whose results the function never uses may be removed: neither counts.
- WS >= B, the largest parameter or result (aligned): it is an input or output of some kernel.

A percentage p gives limit = int(p (S + W)) <= p (S + W), refused when below WS + W. With M = max(A, B)
(WS + W >= both), WS + W - p (S + W) = p WS + (1 - p)(WS + W) - p S >= p B + (1 - p) M - p S_up, so the
limit is surely refused when p S_up < p B + (1 - p) M, i.e. p < M / (S_up - B + M), whatever S, W and WS
turn out to be: this is the test, so a refusal here is never wrong (a feasible limit is never refused;
tests/test_early_floor.py checks the bounds against the lowered graphs). The same fraction is a lower bound
on the floor as a share of the no-swap need (FloorBounds.floor_share_at_least), which the message gives.
A byte limit below M is refused too.
Everything else (and any module with a construct not covered: calls of other Relax functions, control
flow, dynamic shapes, targets other than llvm and cuda) goes on to lowering and the exact check, as before.
tests/test_early_floor.py checks the bounds against graphs lowered for both targets (lowering for cuda needs
no GPU).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from ..errors import InfeasibleLimitError
from ..units import format_bytes

ALIGN = 256
HINT = "a smaller batch lowers that; no fusion setting does (it is one op's own need)"


@dataclass
class FloorBounds:
    storage_max: int          # S_up: aligned bytes of every tensor the lowered graph can have
    op_min: int               # A: raw bytes one op's kernel surely touches at once (inputs, outputs, own buffers)
    op_name: str              # the Relax op that sets A, and its binding
    op_io: int                # of A: its inputs and outputs
    op_buffers: int           # of A: the buffers its kernel allocates
    boundary_min: int         # B: the largest parameter or result, aligned
    op_params: int = 0        # of op_io: the parameters that op reads (no batch size lowers those)

    def hint(self) -> str:
        """What would lower the bound that refuses: a smaller batch only where the op's need is not mostly its
        parameters, and neither where the largest single tensor (a parameter or result) sets it."""
        if self.boundary_min >= self.op_min:
            return "one tensor of the model sets it (the largest parameter or result); no batch or fusion setting " \
                   "lowers a parameter"
        if 2 * self.op_params >= self.op_io:
            dense = ("; for inference, split_dense=True runs a dense layer in slices of its output features, each "
                     "reading a slice of the weight" if self.op_name.startswith("op 'matmul'") else "")
            return (f"{format_bytes(self.op_params)} of it are the parameters that op reads, which no batch size or "
                    f"fusion setting lowers{dense}")
        return HINT

    def floor_share_at_least(self) -> float:
        """A lower bound on floor / no-swap need: with X = WS + W >= M = max(A, B) and W <= X - B, the ratio
        (WS + W) / (S + W) >= X / (S_up + X - B) >= M / (S_up + M - B)."""
        m = max(self.op_min, self.boundary_min)
        return m / (self.storage_max + m - self.boundary_min) if m else 0.0

    def refuses(self, frac: float) -> bool:
        """Whether a limit of `frac` x the no-swap need is surely below the floor: frac S_up < frac B + (1 - frac) M
        (the module docstring), i.e. frac below floor_share_at_least()."""
        return 0 < frac < 1 and frac < self.floor_share_at_least()


class EarlyInfeasibleError(InfeasibleLimitError):
    """A limit refused before lowering on the bounds above: the limit's bytes and the exact floor are not known
    yet (`mem_limit` is None for a percentage); `min_feasible` is a lower bound (exact=False) and
    `min_feasible_percent` a lower bound on the floor as a share of the no-swap need."""

    def __init__(self, text: str, limit_bytes, bounds: FloorBounds, hint: str):
        self.mem_limit = limit_bytes
        self.min_feasible = int(max(bounds.op_min, bounds.boundary_min))
        self.exact = False
        self.reference_bytes = None
        self.min_feasible_percent = _percent_floor(bounds.floor_share_at_least())
        b = bounds
        what = (f"{b.op_name} alone needs {format_bytes(b.op_min)} at once (the parameters it reads, and its "
                f"result where that is the function's)" +
                (f" plus {format_bytes(b.op_buffers)} of kernel buffers" if b.op_buffers else ""))
        if limit_bytes is None:
            self.reason = (f"known before lowering: {what}, and {text} of what the model needs without swapping is "
                           f"less: that need is at most {format_bytes(b.storage_max)} plus the largest kernel "
                           f"workspace; {hint}")
            head = f"memory limit {text}"
        else:
            self.reason = f"known before lowering: {what}; {hint}"
            head = f"memory limit {format_bytes(limit_bytes)} ({limit_bytes} bytes)"
        Exception.__init__(self, f"{head} cannot be met ({self.reason}); the smallest feasible limit is at least "
                                 f"{format_bytes(self.min_feasible)}, {self.min_feasible_percent}% of the no-swap need (the "
                                 f"exact floor, found after lowering, may be higher): raise mem_limit above that")


def _percent_floor(share: float) -> float:
    import math

    return math.floor(10000 * share) / 100      # rounded down: a lower bound stays one


# ---------------------------------------------------------------- reading the Relax function
def _static_bytes(ty) -> int | None:
    """Bytes of a tensor type with a static shape and known dtype; None otherwise."""
    from tvm import relax, tirx

    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    dims = getattr(ty.shape, "values", None)
    if dims is None:
        return None
    n = 1
    for d in dims:
        if not isinstance(d, tirx.IntImm):
            return None
        n *= d.value
    dt = str(ty.dtype.dtype) if hasattr(ty.dtype, "dtype") else str(ty.dtype)
    item = _itemsize(dt)
    return None if item is None else n * item


@functools.lru_cache(maxsize=None)
def _itemsize(dt: str) -> int | None:
    try:
        import tvm_ffi

        d = tvm_ffi.dtype(dt)
        return (d.bits * d.lanes + 7) // 8
    except Exception:  # noqa: BLE001
        return None


def _is_const(e) -> bool:
    import tvm

    return isinstance(e, tvm.ir.GenericConst)


class _Unsupported(Exception):
    """A construct the bounds do not cover: no early check for this module."""


def _leaf_bytes(ty) -> list[int]:
    from tvm import relax

    if isinstance(ty, relax.TupleType):
        return [b for f in ty.fields for b in _leaf_bytes(f)]
    if isinstance(ty, relax.TensorType):
        b = _static_bytes(ty)
        if b is None:
            raise _Unsupported("dynamic shape")
        return [b]
    return []


# op_pattern values (AnnotateTIROpPattern; tvm/relax/op_attr_types.h) and what FuseOps does with each
# (the module docstring: kernel boundaries)
BROADCAST, INJECTIVE, COMM_REDUCE, OUT_EWISE_FUSABLE, OPAQUE = 1, 2, 3, 4, 8
NO_PRODUCER_FUSED = (OUT_EWISE_FUSABLE, OPAQUE)     # every input of such a kernel comes from another kernel
NO_CONSUMER_FUSED = (COMM_REDUCE, OPAQUE)           # every reader of its result is another kernel


def _aligned(n: int) -> int:
    return (int(n) + ALIGN - 1) // ALIGN * ALIGN


def _isolated_call(call):
    """`call` with its Var arguments replaced by fresh Vars of the same types: (call, [fresh Vars],
    [the original Var of each])."""
    from tvm import relax

    originals: list = []
    mapping: dict = {}

    def arg(e):
        if isinstance(e, relax.Var):
            if e not in mapping:
                mapping[e] = relax.Var(f"a{len(originals)}", e.ty)
                originals.append(e)
            return mapping[e]
        if isinstance(e, relax.Tuple):
            return relax.Tuple([arg(f) for f in e.fields])
        if isinstance(e, (relax.TupleGetItem, relax.Call, relax.SeqExpr, relax.If)):
            raise _Unsupported(f"argument {type(e).__name__}")
        return e                      # constants, shapes, prim values, strings, dtypes: as they are

    new_args = [arg(a) for a in call.args]
    return relax.Call(call.op, new_args, call.attrs, call.ty_args), [mapping[v] for v in originals], originals


def _function(call, params, name: str):
    """A Relax function running `call` alone on `params`."""
    from tvm import relax

    bb = relax.BlockBuilder()
    with bb.function(name, params):
        with bb.dataflow():
            out = bb.emit_output(call)
        bb.emit_func_output(out)
    return bb.get()[name]


@dataclass
class _Legal:
    """What one call becomes when legalized alone."""
    written: list             # bytes of every tensor its calls write
    kernel: tuple | None      # one call_tir and nothing else: (parameter indices it reads, raw output bytes,
                              # raw bytes of the buffers it allocates, whether it is a reshape)
    identity: int | None      # no call at all, the result is this parameter
    pattern: int | None = None   # the kernel's op_pattern (AnnotateTIROpPattern), when `kernel` is set


def _global_buffers(pf) -> list[int]:
    """Declared bytes of a legalized kernel's global-scope root buffers: relay_passes.lift_workspace may make
    them tensors of the lowered graph (a fused kernel's intermediates are legalized outputs, already counted)."""
    import tvm

    from ..graph.extract import buffer_nbytes

    root = getattr(getattr(pf, "body", None), "block", None) if isinstance(pf, tvm.tirx.PrimFunc) else None
    return [buffer_nbytes(b) for b in getattr(root, "alloc_buffers", None) or () if b.scope() == "global"]


def _legalized_facts(mod_legal, name: str) -> _Legal:
    import tvm
    from tvm import relax

    from ..graph.extract import kernel_workspace

    func = mod_legal[name]
    params = {p: i for i, p in enumerate(func.params)}
    written: list[int] = []
    tirs, others = [], 0
    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call):
                opn = v.op.name if isinstance(v.op, tvm.ir.Op) else None
                if opn == "relax.call_tir":
                    tirs.append((b, v))
                    written += _global_buffers(mod_legal[v.args[0]])
                elif opn is None or not opn.startswith("relax."):
                    raise _Unsupported(f"call of {v.op}")
                else:
                    others += 1
                written += _leaf_bytes(b.var.ty)
            elif not (isinstance(v, (relax.Var, relax.Tuple, relax.TupleGetItem)) or _is_const(v)):
                raise _Unsupported(type(v).__name__)
    kernel = identity = None
    result = func.body.body
    if not tirs and not others and isinstance(result, relax.Var) and result in params:
        identity = params[result]
    if len(tirs) == 1 and others == 0:
        b, v = tirs[0]
        pf = mod_legal[v.args[0]]
        targs = v.args[1]
        fields = targs.fields if isinstance(targs, relax.Tuple) else [targs]
        if isinstance(pf, tvm.tirx.PrimFunc) and all((isinstance(f, relax.Var) and f in params) or _is_const(f)
                                                     for f in fields):
            reads = [params[f] for f in fields if not _is_const(f)]
            kernel = (reads, sum(_leaf_bytes(b.var.ty)), int(kernel_workspace(pf)),
                      bool(relax.analysis.has_reshape_pattern(pf)))
            attrs = pf.attrs
            pattern = int(attrs["op_pattern"]) if attrs is not None and "op_pattern" in attrs else None
            return _Legal(written, kernel, identity, pattern)
    return _Legal(written, kernel, identity)


# ---------------------------------------------------------------- the bounds
def floor_bounds(mod, func_name: str = "main", target="llvm") -> FloorBounds | None:
    """The bounds of the module docstring, or None when they cannot be proven for this module or target."""
    try:
        return _floor_bounds(mod, func_name, target)
    except _Unsupported:
        return None
    except Exception:  # noqa: BLE001 - an early check only: whatever TVM raises here, lowering reports exactly
        return None


def _target_kind(target) -> str:
    kind = getattr(getattr(target, "kind", None), "name", None)
    if kind is None and isinstance(target, dict):
        kind = str(target.get("kind", ""))
    if kind is None:
        kind = str(target).split()[0] if target is not None else "llvm"
    return kind


_CHECKED_KINDS = ("llvm", "cuda")      # the targets whose lowered graphs the bounds are tested against


def _vars_in(e) -> list:
    from tvm import relax

    if isinstance(e, relax.Var):
        return [e]
    if isinstance(e, relax.Tuple):
        return [v for f in e.fields for v in _vars_in(f)]
    if isinstance(e, relax.TupleGetItem):
        return _vars_in(e.tuple_value)
    if isinstance(e, relax.Call):
        return [v for a in e.args for v in _vars_in(a)]
    return []


def _bindings(func):
    from tvm import relax

    body = func.body
    if not isinstance(body, relax.SeqExpr):
        raise _Unsupported("body")
    for block in body.blocks:
        for b in block.bindings:
            if isinstance(b, relax.MatchCast):
                if not isinstance(b.value, relax.Var):
                    raise _Unsupported("match_cast")
            elif not isinstance(b, relax.VarBinding):
                raise _Unsupported("binding")
            v = b.value
            if isinstance(v, (relax.SeqExpr, relax.If, relax.Function)):
                raise _Unsupported(type(v).__name__)
            if isinstance(v, relax.Call) and not _is_op(v.op):
                raise _Unsupported("call of a function")
            yield b.var, v


def _is_op(op) -> bool:
    import tvm

    return isinstance(op, tvm.ir.Op)


def _legalize_calls(calls, target):
    """Legalize every distinct call alone (one module, the pipeline's library dispatch then LegalizeOps):
    per call, (facts of _legalized_facts, the original Var of each parameter of its function)."""
    import tvm
    import tvm_ffi
    from tvm import relax

    from relay_passes.cuda_build import resolve_target
    from relay_passes.lower import _stage_passes

    funcs, names, originals_of = {}, [], []
    by_hash: dict = {}
    for i, call in enumerate(calls):
        new, _, originals = _isolated_call(call)
        h = tvm_ffi.structural_hash(new, map_free_vars=True)
        same = [n for n, c in by_hash.get(h, ()) if tvm_ffi.structural_equal(new, c, map_free_vars=True)]
        if same:
            names.append(same[0])      # the same call on the same types: legalized the same way
        else:
            name = f"op{i}"
            fresh, params, _ = _isolated_call(call)    # (building a function normalizes, and so changes, its call)
            funcs[name] = _function(fresh, params, name)
            by_hash.setdefault(h, []).append((name, new))
            names.append(name)
        originals_of.append(originals)
    t = resolve_target(target)          # (a CUDA target gets its arch, as compile_model's does)
    dispatch, *_ = _stage_passes(t)
    iso = tvm.IRModule({tvm.ir.GlobalVar(n): f for n, f in funcs.items()})
    with t:
        legal = tvm.transform.Sequential(dispatch + [relax.transform.LegalizeOps(),
                                                     relax.transform.AnnotateTIROpPattern()])(iso)
    facts = {n: _legalized_facts(legal, n) for n in funcs}
    return [(facts[n], o) for n, o in zip(names, originals_of)]


class _UnionFind:
    """Union-find over Relax vars (the views of one tensor share a root)."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, v):
        while v in self.parent:
            v = self.parent[v]
        return v

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[ra] = rb

    def pair(self):
        return self.find, self.union


def _floor_bounds(mod, func_name, target):
    from tvm import relax

    if _target_kind(target) not in _CHECKED_KINDS:
        return None
    func = mod[func_name]
    if not isinstance(func, relax.Function):
        return None
    bindings = list(_bindings(func))
    param_bytes = [b for p in func.params for b in _leaf_bytes(p.ty)]
    storage = sum(_aligned(b) for b in param_bytes)
    boundary = max([_aligned(b) for b in param_bytes + _leaf_bytes(func.ret_ty)] + [0])

    # live: the vars the result depends on (an op whose result is unused may be removed)
    deps = {var: _vars_in(v) for var, v in bindings}
    live, stack = set(), _vars_in(func.body.body)
    while stack:
        x = stack.pop()
        if x not in live:
            live.add(x)
            stack.extend(deps.get(x, ()))

    calls = [(var, v) for var, v in bindings if isinstance(v, relax.Call)]
    legal_list = _legalize_calls([v for _, v in calls], target)
    legal = iter(legal_list)
    # Kernel boundaries (see the module docstring): each op's kernel pattern (AnnotateTIROpPattern), and which
    # results a live op reads directly: any call, or a kernel that is neither elementwise/broadcast nor a reshape
    pattern = {var: facts.pattern for (var, _), (facts, _) in zip(calls, legal_list)
               if facts.kernel is not None and not facts.kernel[3]}
    read_by_any, read_beyond_broadcast = set(), set()
    for (var, v), (facts, originals) in zip(calls, legal_list):
        if var not in live:
            continue
        read_by_any.update(_vars_in(v))
        if pattern.get(var) is not None and pattern[var] > BROADCAST:
            read_beyond_broadcast.update(originals[i] for i in facts.kernel[0])

    # In program order. `sure`: vars that are surely data in the lowered graph (not constants FoldConstant
    # made): parameters, and the results of single-kernel calls reading one of them (a kernel reading only
    # constants, e.g. zeros_like's, is folded); anything else counts as possibly constant. Views: union-find
    # over vars, a reshape kernel's result (or any result not surely a new tensor) joined to inputs of its size.
    find, union = _UnionFind().pair()
    sure = set(func.params)
    params = set(func.params)           # parameters and plain aliases of them: surely a kernel's inputs
    results = set(_vars_in(func.body.body))
    tuple_fields: dict = {}
    best = (0, "", 0, 0, 0)
    for var, v in bindings:
        if isinstance(v, relax.Var):
            union(var, v)
            if v in sure:
                sure.add(var)
            if v in params:
                params.add(var)
        elif isinstance(v, relax.Tuple):
            tuple_fields[var] = list(v.fields)
        elif isinstance(v, relax.TupleGetItem):
            tv = v.tuple_value
            fields = tuple_fields.get(tv)
            if fields is not None:
                f = fields[v.index]
                if isinstance(f, relax.Var):
                    union(var, f)
                    if f in sure:
                        sure.add(var)
            elif tv in sure:                       # a field of a kernel's tuple result: a tensor of its own
                sure.add(var)
        elif isinstance(v, relax.Call):
            facts, originals = next(legal)
            storage += sum(_aligned(x) for x in facts.written)
            sizes = _leaf_bytes(var.ty)
            if facts.identity is not None:
                union(var, originals[facts.identity])
                if originals[facts.identity] in sure:
                    sure.add(var)
                if originals[facts.identity] in params:
                    params.add(var)
                continue
            if facts.kernel is None or facts.kernel[3]:
                # not surely a new tensor (a reshape may become a view): possibly a view of an input of its size
                for a in _vars_in(v):
                    if len(sizes) == 1 and _leaf_bytes(a.ty) == sizes:
                        union(var, a)
                if facts.kernel is not None and any(originals[i] in sure for i in facts.kernel[0]):
                    sure.add(var)              # a view of a tensor, or a tensor: data either way
                continue
            reads, out_bytes, buffers, _ = facts.kernel
            ins = [originals[i] for i in reads if originals[i] in sure]
            if not ins:
                continue                       # may be folded into a constant
            sure.add(var)
            if var not in live:
                continue
            classes: dict = {}
            mine = pattern.get(var)
            for a in ins:
                # parameters; the inputs of a kernel no producer fuses into; a reduction's inputs that are not
                # elementwise/broadcast results (or reshapes, which may be views). Anything else may be
                # inlined into the kernel that runs this op.
                if (a in params or mine in NO_PRODUCER_FUSED
                        or (mine == COMM_REDUCE and pattern.get(a) is not None and pattern[a] > BROADCAST)):
                    r = find(a)
                    classes[r] = max(classes.get(r, 0), sum(_leaf_bytes(a.ty)))
            buffers = 0                        # a kernel's own buffers may be inlined too (cpu_inline)
            out_sure = (var in results or (mine in NO_CONSUMER_FUSED and var in read_by_any)
                        or (mine == OUT_EWISE_FUSABLE and var in read_beyond_broadcast))
            io = sum(classes.values()) + (out_bytes if out_sure else 0)
            if io + buffers > best[0]:
                weights = sum(b for r, b in classes.items() if any(find(p) == r for p in ins if p in params))
                best = (io + buffers, f"op {v.op.name.removeprefix('relax.')!r} (binding {var.name!r})", io, buffers,
                        weights)
    if best[0] == 0:
        return None
    return FloorBounds(int(storage), int(best[0]), best[1], int(best[2]), int(best[3]), int(boundary), int(best[4]))


# ---------------------------------------------------------------- the check
def check_before_lowering(mod, mem_limit, func_name: str = "main", target="llvm",
                          bounds: FloorBounds | None = None) -> FloorBounds | None:
    """Raise EarlyInfeasibleError when the bounds prove `mem_limit` below the floor; returns the bounds (None
    when not provable for this module, or nothing to check)."""
    from .mem_limit import MemLimit

    given = MemLimit.of(mem_limit)
    if given is None or given.error is not None:       # (a bad limit is worded by MemLimit.resolve)
        return None
    if given.is_percent:
        if not given.share < 1:
            return None
        b = bounds or floor_bounds(mod, func_name, target)
        if b is not None and b.refuses(given.share):
            raise EarlyInfeasibleError(given.given.strip(), None, b, b.hint())
        return b
    limit = given.absolute
    b = bounds or floor_bounds(mod, func_name, target)
    if b is not None and limit < max(b.op_min, b.boundary_min):
        raise EarlyInfeasibleError(str(given.given), limit, b, b.hint())
    return b


__all__ = ["FloorBounds", "EarlyInfeasibleError", "floor_bounds", "check_before_lowering"]
