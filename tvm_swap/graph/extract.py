"""DataflowGraph from a lowered Relax IRModule (the output of relay_passes.lower).

One op per kernel call; one tensor per storage (function parameter or `R.builtin.alloc_tensor`, or the
result of a non-DPS packed call). Everything else that names a tensor is a view of one:

- `lv = alloc`, `R.reshape(x, s)`, `R.memory.view(x, ...)`, `R.memory.ensure_zero_offset(x)`,
  `vm.builtin.reshape` calls, match_cast of a var: an alias of the base tensor.
- Tuples and TupleGetItem: structure over base tensors (never a tensor of their own).
- Constants (`R.const`, `metadata["ir.GenericConst"]`): not tensors. They live in the executable's
  constant pool, not in the pool a plan manages; `meta["constant_bytes"]` has their total.

How tensors and ops map back to the IR (for relay_passes.apply):
- `tensors[i].name` is the Relax var name (`Var.name`) of the parameter or alloc binding it came from,
  made unique by appending `#k` when two vars share a name. Parameters must be tensors: tuple parameters
  are refused, as plan application refuses them (both read the IR through graph/ir.py).
- `meta["tensor_source"][i]` is exact: `["param", index]` (the function parameter),
  `["alloc", block, binding]` (position of the alloc binding in `func.body.blocks[block].bindings`), or
  `["call", block, binding]` (a packed call that returned a new tensor).
- `meta["op_binding"][o]` is `[block, binding]` of op o's kernel call; `ops[o].kernel` is the PrimFunc's
  GlobalVar name (or the packed function's name). `TensorInfo.views` lists the var names that alias it.

Kinds
- Parameters: the first `num_inputs` are "input" (default: the `num_input` function attribute, else all);
  the others "param", unless `param_kinds` (or the function attribute `tvm_swap.param_kinds`, a map
  name -> kind) says "optimizer_state" (or "input").
- Function results are "output", except those that update a parameter, which take that parameter's kind.
- Updates: `updates={flat_output_index: flat_param_index}`, or the function attribute
  `tvm_swap.updates`: a list of `[flat_output_index, flat_param_index]` pairs, where the output index
  counts the leaves of the returned (possibly nested) tuple depth-first and the param index is as in
  tensor_source. An explicit `updates` argument wins over the attribute.
- Intermediates are "activation", or "gradient" (best effort, only used in reports): a tensor is a
  gradient when one of its var names contains "adjoint" or "grad" (relax.transform.Gradient names its
  adjoints `<x>_adjoint`), or the op that writes it reads a gradient or has "backward"/"grad" in its
  kernel name. Backward kernels only consume gradients, forward kernels never do, so this marks the
  backward pass and nothing of the forward one.

Cost fields
- `OpInfo.flops`: TVM's `tvm.s_tir.analysis.estimate_tir_flops` on the kernel; if it fails, one flop per
  innermost block iteration (a loop-nest estimate; those kernels are listed in `meta["flops_estimated"]`).
  Packed (library) calls get 0 flops.
- `meta["kernels"]`: per PrimFunc name, its argument shapes/dtypes and structural hash (for profiling).
- `meta["inplace"]`: `[op, out, in]` where the kernel may write `out` into `in`'s memory (graph/inplace.py:
  elementwise over `in`), `in` is an intermediate and both have one size and dtype; absent when there is none.
- `OpInfo.workspace`: bytes of the kernel's own global-scope intermediate buffers (FuseTIR keeps the
  intermediates of a fused kernel inside it; TVM allocates them from its workspace when the kernel
  runs). An upper bound on llvm, where buffers under 1 KB go on the stack. Buffers relay_passes.lift_workspace
  made output parameters are not counted: they are tensors written by the op and read by no one, listed in
  `meta["workspace_tensors"]` as `[op, tensor]` (graph/workspace.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import GraphError, UnsupportedModelError
from . import ir
from .dataflow import KINDS, DataflowGraph, OpInfo, TensorInfo
from .workspace import META_KEY as WORKSPACE_META_KEY
from .ir import FINALIZED_OPS, IGNORED_OPS, UNLOWERED_OPS, VIEW_OPS, VIEW_PACKED, Kind  # noqa: F401  (re-exported)

UPDATES_ATTR = "tvm_swap.updates"
WORKSPACE_PARAMS_ATTR = "tvm_swap.workspace_params"   # relay_passes.lift_workspace: trailing params that are workspace
PARAM_KINDS_ATTR = "tvm_swap.param_kinds"
PARAM_KIND_CHOICES = ("input", "param", "optimizer_state")
GRADIENT_NAME_HINTS = ("adjoint", "grad")
GRADIENT_KERNEL_HINTS = ("backward", "grad")



class _Const:
    """Marker for a constant argument (not a tensor of the graph)."""


CONST = _Const()


@dataclass
class _Tensor:
    name: str
    shape: tuple
    dtype: str
    nbytes: int
    source: list
    kind: str = "activation"
    producer: int = -1
    views: list = None


def _unique(name, used):
    if name not in used:
        used[name] = 0
        return name
    while True:
        used[name] += 1
        cand = f"{name}#{used[name]}"
        if cand not in used:
            used[cand] = 0
            return cand


def _flatten(ref):
    """Leaves of a nested tuple ref, depth-first."""
    if isinstance(ref, tuple):
        return [leaf for r in ref for leaf in _flatten(r)]
    return [ref]


def _attr(func, key):
    attrs = func.attrs
    if attrs is None or key not in attrs:
        return None
    return attrs[key]


class _Extractor:
    def __init__(self, mod, func_name):
        self.mod = mod
        self.func_name = func_name
        self.func = ir.relax_function(mod, func_name, GraphError)
        ir.check_tensor_params(self.func, func_name)
        self.tensors: list[_Tensor] = []
        self.ops: list[dict] = []
        self.env: dict = {}          # relax Var -> tensor id | tuple of refs | CONST | None
        self.used_names: dict = {}
        self.constant_bytes = 0
        self.constants_seen: set = set()
        self.flops_estimated: list[str] = []
        self._kernel_cache: dict = {}
        self._alias_cache: dict = {}
        self.inplace: list = []          # [op, out, in] the kernel allows (filtered by graph_from_relax)
        self.workspace_tensors: list = []    # [op, tensor]: an op's lifted workspace (graph/workspace.py)
        self.kernels: dict = {}      # PrimFunc name -> {"args": [[shape, dtype], ...], "hash": str}

    # ---- tensors ----
    def new_tensor(self, var_name, ty, source, what):
        shape, dtype, nbytes = ir.tensor_type(ty, what)
        t = _Tensor(_unique(var_name, self.used_names), shape, dtype, nbytes, source, views=[])
        self.tensors.append(t)
        return len(self.tensors) - 1

    def bind_params(self):
        from tvm import relax

        flat = 0
        self.param_leaves = []       # (tensor id, param index) per flat index

        def bind(name, ty, pidx):
            nonlocal flat
            if isinstance(ty, relax.TupleType):
                return tuple(bind(f"{name}.{i}", f, pidx) for i, f in enumerate(ty.fields))
            tid = self.new_tensor(name, ty, ["param", flat], f"parameter {name!r}")
            self.param_leaves.append((tid, pidx))
            flat += 1
            return tid

        for i, p in enumerate(self.func.params):
            self.env[p] = bind(p.name, p.ty, i)

    def ref(self, expr, where):
        """The graph reference of an argument expression: tensor id, tuple of refs, CONST or None."""
        from tvm import relax

        if isinstance(expr, relax.Var):
            if expr not in self.env:
                raise GraphError(f"{where}: variable {expr.name!r} is used before it is defined")
            return self.env[expr]
        if isinstance(expr, relax.Tuple):
            return tuple(self.ref(f, where) for f in expr.fields)
        if isinstance(expr, relax.TupleGetItem):
            base = self.ref(expr.tuple_value, where)
            if not isinstance(base, tuple):
                raise GraphError(f"{where}: TupleGetItem of a non-tuple")
            return base[expr.index]
        if ir.is_constant(expr):
            if hash(expr) not in self.constants_seen:
                self.constants_seen.add(hash(expr))
                self.constant_bytes += self._constant_nbytes(expr)
            return CONST
        return None              # shapes, prim values, strings, dtypes: not data

    @staticmethod
    def _constant_nbytes(expr):
        try:
            return int(ir.tensor_type(expr.ty, "constant")[2])
        except UnsupportedModelError:
            return 0

    # ---- ops ----
    def kernel_info(self, gv):
        """(flops, workspace bytes) of a PrimFunc, cached by its GlobalVar name."""
        name = gv.name_hint
        if name not in self._kernel_cache:
            pf = self.mod[gv]
            flops, estimated = kernel_flops(pf, name)
            if estimated:
                self.flops_estimated.append(name)
            self._kernel_cache[name] = (flops, kernel_workspace(pf))
            self.kernels[name] = kernel_signature(pf)
        return self._kernel_cache[name]

    def note_inplace(self, gv, args, where):
        """The (out, in) tensor pairs the op just added may run in place (graph/inplace.py), kept per op."""
        from .inplace import elementwise_aliases

        name = gv.name_hint
        if name not in self._alias_cache:
            self._alias_cache[name] = elementwise_aliases(self.mod[gv])
        op = self.ops[-1]
        refs = [self.ref(a, where) for a in args]
        for k, j in self._alias_cache[name]:
            if k < len(refs) and j < len(refs) and isinstance(refs[k], int) and isinstance(refs[j], int) \
                    and refs[j] in op["outputs"] and refs[k] in op["inputs"]:
                self.inplace.append([len(self.ops) - 1, refs[j], refs[k]])

    def note_workspace(self, gv):
        """The op just added writes its lifted workspace (relay_passes.lift_workspace) as its last outputs."""
        attrs = self.mod[gv].attrs
        k = int(attrs[WORKSPACE_PARAMS_ATTR]) if attrs is not None and WORKSPACE_PARAMS_ATTR in attrs else 0
        outs = self.ops[-1]["outputs"]
        self.workspace_tensors += [[len(self.ops) - 1, t] for t in outs[len(outs) - k:]] if k else []

    def add_op(self, kernel, args_refs, out_refs_new, pos, flops, workspace):
        inputs, outputs = [], []
        for r in args_refs:
            for leaf in _flatten(r):
                if isinstance(leaf, int):
                    inputs.append(leaf)
        op_id = len(self.ops)
        for t in out_refs_new:
            self.tensors[t].producer = op_id
            outputs.append(t)
        inputs = [t for t in inputs if t not in outputs]
        self.ops.append(dict(kernel=kernel, inputs=inputs, outputs=outputs, pos=pos, flops=flops,
                             workspace=workspace))

    def dps_call(self, kernel, args, pos, where, flops=0.0, workspace=0):
        """A destination-passing call: trailing args that are fresh allocations are its outputs."""
        refs = [self.ref(a, where) for a in args]
        n_out = 0
        for r in reversed(refs):
            if isinstance(r, int) and self.tensors[r].source[0] == "alloc" and self.tensors[r].producer < 0:
                n_out += 1
            else:
                break
        outs = refs[len(refs) - n_out:] if n_out else []
        self.add_op(kernel, refs[:len(refs) - n_out], outs, pos, flops, workspace)
        return n_out

    def visit_binding(self, b, pos):
        from tvm import relax

        var, value = b.var, b.value
        where = f"{self.func_name}: binding {var.name!r}"
        kind = Kind.ALIAS if isinstance(b, relax.MatchCast) else ir.classify(self.mod, value)
        if kind in (Kind.ALIAS, Kind.CONSTANT):
            self.env[var] = self.ref(value, where)
        elif kind == Kind.CONTROL_FLOW:
            raise UnsupportedModelError(f"{where}: control flow (if/else) is not supported; use a graph "
                                        f"without data-dependent branches")
        elif kind == Kind.OTHER and not isinstance(value, relax.Call):
            self.env[var] = None
        elif kind == Kind.ALLOC:
            self.env[var] = self.new_tensor(var.name, var.ty, ["alloc", *pos], where)
        elif kind == Kind.VIEW:
            self.env[var] = self.ref(ir.view_source(value), where)
        elif kind == Kind.PACKED:
            symbol, args = ir.packed_call(value)
            self.visit_packed(var, symbol, args, pos, where)
        elif kind == Kind.IGNORED:
            self.env[var] = None
        elif kind == Kind.RELAX_CALL:
            raise UnsupportedModelError(f"{where}: calls Relax function {value.op.name_hint!r}; inline it first "
                                        f"(relax.transform.InlinePrivateFunctions) so the graph is one function")
        elif kind == Kind.KERNEL:
            op = value.op
            flops, ws = self.kernel_info(op)
            n_out = self.dps_call(op.name_hint, value.args, pos, where, flops, ws)
            if n_out == 0:
                # An in-place kernel rewrites a tensor that already exists: a planner could not reorder
                # its readers safely, and the graph contract allows one writer per tensor.
                raise UnsupportedModelError(f"{where}: kernel {op.name_hint!r} writes its result in place "
                                            f"(call_tir_inplace); in-place kernels are not supported, so do not "
                                            f"run DataflowUseInplaceCalls before tvm_swap")
            self.note_inplace(op, value.args, where)
            self.note_workspace(op)
            self.env[var] = None
        elif kind == Kind.FINALIZED:
            raise GraphError(f"{where}: the module is already memory-planned ({ir.op_name(value)}); extract the "
                             f"graph from the output of relay_passes.lower, before finalize")
        elif kind == Kind.UNLOWERED or (kind == Kind.UNKNOWN_OP and not self.lowered):
            raise GraphError(f"{where}: the module is not lowered ({ir.op_name(value)}); run "
                             f"relay_passes.lower(mod, target) first")
        elif kind == Kind.UNKNOWN_OP:
            raise UnsupportedModelError(f"{where}: operator {ir.op_name(value)} has no kernel after lowering; it "
                                        f"is not supported (is it legalizable for this target?)")
        else:
            raise UnsupportedModelError(f"{where}: calls a {type(value.op).__name__}; only kernel calls are "
                                        f"supported")

    def visit_packed(self, var, symbol, args, pos, where):
        from tvm import relax

        if symbol in VIEW_PACKED:
            self.env[var] = self.ref(args[0], where)
            return
        n_out = self.dps_call(symbol, args, pos, where)
        if isinstance(var.ty, relax.TensorType):
            # Not DPS: the callee allocated a new tensor (it is not in the plan's pool).
            tid = self.new_tensor(var.name, var.ty, ["call", *pos], where)
            op = self.ops[-1]
            op["outputs"].append(tid)
            self.tensors[tid].producer = len(self.ops) - 1
            self.env[var] = tid
        else:
            if n_out == 0 and not self.ops[-1]["inputs"]:
                self.ops.pop()   # a side-effect call with no tensors (e.g. a print): not an op
            self.env[var] = None

    def run(self):
        from tvm import relax

        body = self.func.body
        if not isinstance(body, relax.SeqExpr):
            raise GraphError(f"{self.func_name}: body is not a sequence of bindings; run relay_passes.lower first")
        self.lowered = True
        for bi, blk in enumerate(body.blocks):
            if isinstance(blk, relax.DataflowBlock):
                self.lowered = False
            for j, b in enumerate(blk.bindings):
                self.visit_binding(b, [bi, j])
        self.ret = self.ref(body.body, f"{self.func_name}: return value")
        if not self.ops and not self.lowered:
            raise GraphError(f"{self.func_name}: the module is not lowered; run relay_passes.lower(mod, target) first")
        for blk in body.blocks:
            for b in blk.bindings:
                ref = self.env.get(b.var)
                if isinstance(ref, int) and b.var.name != self.tensors[ref].name.split("#")[0]:
                    self.tensors[ref].views.append(b.var.name)


def kernel_flops(prim_func, name="kernel"):
    """(flops, estimated): TVM's TIR flop estimate, or a loop-nest count when TVM cannot estimate."""
    import tvm

    try:
        from tvm.s_tir.analysis import estimate_tir_flops

        return float(estimate_tir_flops(tvm.IRModule({name: prim_func}))), False
    except Exception:  # TVM raises for unsupported TIR constructs; fall back below
        return float(_loop_nest_iterations(prim_func.body)), True


def kernel_signature(prim_func):
    """{"args": [[shape, dtype], ...] of every PrimFunc parameter (None for a scalar), "hash": structural hash}.

    Lets tvm_swap.cost.roofline time a kernel of a built executable with no access to the IR.
    """
    import tvm_ffi

    args = []
    for p in prim_func.params:
        shape = getattr(p, "shape", None)
        args.append(None if shape is None else [[_int(d, 0) for d in shape], str(p.dtype)])
    return {"args": args, "hash": f"{tvm_ffi.structural_hash(prim_func) & 0xFFFFFFFFFFFFFFFF:016x}"}


def _children(stmt):
    for attr in ("body", "block", "then_case", "else_case"):
        child = getattr(stmt, attr, None)
        if child is not None and not isinstance(child, (int, float, str)):
            yield child
    for child in getattr(stmt, "seq", None) or ():
        yield child


def _int(x, default=1):
    try:
        return int(x)
    except (TypeError, ValueError):
        return default


def _loop_nest_iterations(stmt, trip=1):
    """Sum over innermost blocks of the product of the loop extents around them (1 op per iteration)."""
    import tvm

    if isinstance(stmt, tvm.tirx.For):
        return _loop_nest_iterations(stmt.body, trip * _int(stmt.extent))
    if isinstance(stmt, tvm.tirx.BufferStore):
        return trip
    return sum(_loop_nest_iterations(c, trip) for c in _children(stmt))


def _buffer_nbytes(buf):
    dims = [_int(d, 0) for d in buf.shape]
    dt = buf.dtype
    bits = getattr(dt, "bits", None)
    if bits is None:
        import tvm_ffi

        dt = tvm_ffi.dtype(str(dt))
        bits = dt.bits
    return math.prod(dims) * ((bits * dt.lanes + 7) // 8)


def _allocated_after_lowering(prim_func):
    """The kernel after TVM's own allocation placement and compaction (the buffers it really allocates: an
    intermediate computed one element at a time shrinks to that element), or itself where they do not apply."""
    import tvm
    from tvm import s_tir

    seq = tvm.transform.Sequential([
        s_tir.transform.LowerInitBlock(), s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(), s_tir.transform.CompactBufferAllocation()])
    try:
        return seq(tvm.IRModule({"main": prim_func}))["main"]
    except Exception:  # noqa: BLE001 - measurement only: the buffers as written are an upper bound
        return prim_func


def kernel_workspace(prim_func):
    """Bytes of global-scope buffers a kernel allocates internally (its intermediates), measured after TVM's
    allocation placement and compaction (relay_passes.cpu_inline relies on it). Buffers lifted into output
    parameters (relay_passes.lift_workspace) are tensors of the graph instead, not counted here."""
    return int(sum(b for _, b in allocated_global_buffers(prim_func)))


# allocated_global_buffers' answers by the kernel's structural hash: [(kernel, answer)], kept for the process
# (lowering a module again, for a build at another limit or the reference build, meets the same kernels)
_ALLOCATED: dict[tuple, list] = {}
_ALLOCATED_MAX = 4096


def allocated_global_buffers(prim_func) -> list[tuple[str, int]]:
    """(name, bytes) of each global-scope buffer the kernel allocates, after TVM's allocation placement and
    compaction (a buffer compaction shrinks is listed at its compacted size)."""
    import tvm_ffi

    # (structural equality ignores buffer names, which the answer gives: they are part of the key)
    h = (tvm_ffi.structural_hash(prim_func, map_free_vars=False), _alloc_names(prim_func))
    entries = _ALLOCATED.setdefault(h, [])
    for func, answer in entries:            # (equal kernels only: a hash collision is not a hit)
        if func.same_as(prim_func) or tvm_ffi.structural_equal(func, prim_func, map_free_vars=False):
            return list(answer)
    answer = _allocated_global_buffers(prim_func)
    if len(_ALLOCATED) > _ALLOCATED_MAX:
        _ALLOCATED.clear()
        entries = _ALLOCATED.setdefault(h, [])
    entries.append((prim_func, tuple(answer)))
    return answer


def _alloc_names(prim_func) -> tuple:
    """The names of the buffers the kernel's statements allocate, in the order _allocated_global_buffers walks."""
    import tvm

    names, stack = [], [prim_func.body]
    while stack:
        s = stack.pop()
        names += [str(b.name) for b in getattr(s, "alloc_buffers", None) or ()]
        if isinstance(s, getattr(tvm.tirx, "AllocBuffer", ())):
            names.append(str(s.buffer.name))
        stack.extend(_children(s))
    return tuple(names)


def _allocated_global_buffers(prim_func) -> list[tuple[str, int]]:
    import tvm

    out = []
    stack = [_allocated_after_lowering(prim_func).body]
    while stack:
        s = stack.pop()
        bufs = list(getattr(s, "alloc_buffers", None) or ())
        if isinstance(s, getattr(tvm.tirx, "AllocBuffer", ())):
            bufs.append(s.buffer)
        for buf in bufs:
            if buf.scope() == "global":
                out.append((str(buf.name), int(_buffer_nbytes(buf))))
        stack.extend(_children(s))
    return out


def buffer_nbytes(buf) -> int:
    """Bytes of a TIR buffer of static shape."""
    return int(_buffer_nbytes(buf))


def _param_kinds(func, param_kinds):
    kinds = {}
    attr = _attr(func, PARAM_KINDS_ATTR)
    if attr is not None:
        kinds.update({str(k): str(v) for k, v in attr.items()})
    kinds.update(param_kinds or {})
    names = {p.name for p in func.params}
    for k, v in kinds.items():
        if k not in names:
            raise GraphError(f"param_kinds names {k!r}, which is not a parameter; parameters: {', '.join(names)}")
        if v not in PARAM_KIND_CHOICES:
            raise GraphError(f"param_kinds[{k!r}] = {v!r}; a parameter's kind is one of {PARAM_KIND_CHOICES}")
    return kinds


def _updates(func, updates):
    if updates is not None:
        return {int(k): int(v) for k, v in dict(updates).items()}
    attr = _attr(func, UPDATES_ATTR)
    if attr is None:
        return {}
    try:
        return {int(pair[0]): int(pair[1]) for pair in attr}
    except (TypeError, ValueError, IndexError):
        raise GraphError(f"function attribute {UPDATES_ATTR} must be a list of [output_index, param_index] "
                         f"pairs; got {attr}") from None


def _is_gradient_name(name):
    low = name.lower()
    return any(h in low for h in GRADIENT_NAME_HINTS)


def graph_from_relax(mod, func_name="main", num_inputs=None, param_kinds=None, updates=None, name=None,
                     target=None) -> DataflowGraph:
    """Extract the DataflowGraph of `func_name` from a lowered module (see the module docstring).

    target: recorded in meta; defaults to the `tvm_swap.target` module attribute set by relay_passes.lower.
    """
    ex = _Extractor(mod, func_name)
    func = ex.func
    n_params = len(func.params)
    if num_inputs is None:
        attr = _attr(func, "num_input")
        num_inputs = int(attr) if attr is not None else n_params
    if not 0 <= int(num_inputs) <= n_params:
        raise GraphError(f"num_inputs={num_inputs}, but {func_name!r} has {n_params} parameters")
    kinds_by_name = _param_kinds(func, param_kinds)

    ex.bind_params()
    ex.run()
    tensors = ex.tensors

    # Parameter kinds.
    for tid, pidx in ex.param_leaves:
        pname = func.params[pidx].name
        default = "input" if pidx < num_inputs else "param"
        tensors[tid].kind = kinds_by_name.get(pname, default)

    # Gradients: by name, then forward along the ops (see the module docstring).
    for op in ex.ops:
        reads_grad = any(tensors[t].kind == "gradient" for t in op["inputs"])
        kernel_says = any(h in op["kernel"].lower() for h in GRADIENT_KERNEL_HINTS)
        for t in op["outputs"]:
            names = [tensors[t].name, *tensors[t].views]
            if reads_grad or kernel_says or any(_is_gradient_name(n) for n in names):
                tensors[t].kind = "gradient"

    # Outputs and updates.
    out_leaves = _flatten(ex.ret)
    outputs = [leaf for leaf in out_leaves if isinstance(leaf, int)]
    upd_index = _updates(func, updates)
    graph_updates = {}
    for oi, pi in upd_index.items():
        if not 0 <= oi < len(out_leaves):
            raise GraphError(f"update output index {oi} is out of range: {func_name!r} returns "
                             f"{len(out_leaves)} values")
        if not 0 <= pi < len(ex.param_leaves):
            raise GraphError(f"update param index {pi} is out of range: {func_name!r} has "
                             f"{len(ex.param_leaves)} (flattened) parameters")
        new, (old, _) = out_leaves[oi], ex.param_leaves[pi]
        if not isinstance(new, int):
            raise GraphError(f"output {oi} is not a tensor, so it cannot update parameter {pi}")
        if tensors[old].kind not in ("param", "optimizer_state"):
            raise GraphError(f"output {oi} updates {tensors[old].name!r}, which is an input; only params and "
                             f"optimizer states can be updated")
        if new == old:
            continue             # returned unchanged
        graph_updates[new] = old
    for t in outputs:
        if t in graph_updates:
            tensors[t].kind = tensors[graph_updates[t]].kind
        elif tensors[t].producer >= 0:
            tensors[t].kind = "output"

    target = target if target is not None else _module_attr(mod, "tvm_swap.target")
    g = DataflowGraph(
        name=name or func_name,
        tensors=[TensorInfo(i, t.name, t.nbytes, t.shape, t.dtype, t.kind, tuple(t.views))
                 for i, t in enumerate(tensors)],
        ops=[OpInfo(i, f"{o['kernel']}#{i}", o["kernel"], tuple(o["inputs"]), tuple(o["outputs"]),
                    float(o["flops"]), int(o["workspace"])) for i, o in enumerate(ex.ops)],
        outputs=outputs,
        updates=graph_updates,
        meta={
            "source": "relax",
            "target": None if target is None else str(target),
            "func_name": func_name,
            "num_inputs": int(num_inputs),
            "tensor_source": [t.source for t in tensors],
            "op_binding": [o["pos"] for o in ex.ops],
            "constant_bytes": int(ex.constant_bytes),
            "flops_estimated": sorted(set(ex.flops_estimated)),
            "kernels": ex.kernels,
        },
    )
    results = set(outputs) | set(graph_updates)
    inplace = [[o, out, inp] for o, out, inp in ex.inplace
               if tensors[inp].producer >= 0 and inp not in results and tensors[inp].nbytes == tensors[out].nbytes
               and tensors[inp].dtype == tensors[out].dtype]
    if inplace:
        g.meta["inplace"] = inplace
    if ex.workspace_tensors:
        g.meta[WORKSPACE_META_KEY] = ex.workspace_tensors
    assert all(t.kind in KINDS for t in g.tensors)
    g.validate()
    return g


def _module_attr(mod, key):
    attrs = getattr(mod, "attrs", None)
    if attrs is None or key not in attrs:
        return None
    return attrs[key]
