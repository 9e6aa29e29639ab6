"""ApplySwapPlan (a module pass) and apply_plan: write a verified swap plan into a lowered Relax function.

Input: the output of `relay_passes.lower` (after CallTIRRewrite; each kernel is `alloc = R.builtin.alloc_tensor`,
`kernel(inputs..., alloc)`, `lv = alloc`), the DataflowGraph extracted from it and a Plan for that graph.
Output: the same IRModule whose function is rebuilt in the plan's action order:

    main(inputs...)                                     # per-call inputs only; params live in the runtime
        tvm_swap.begin(inputs...)
        w = tvm_swap.object(-1, t, obj)                 # initial residents: views of their pool objects
        per action i, in plan order:
          compute:  [tvm_swap.wait(i)]                  # only if it depends on another stream
                    out = tvm_swap.object(i, t, obj)    # every kernel output: a view at offset 0 of its object
                    kernel(ins..., out)                 # the same kernel call, arguments remapped
                    [tvm_swap.record(i)]                # only if another stream waits on it
          recompute: the same as compute: the op's kernel call again, into the objects the action names
          (a compute the plan runs in place, Plan.inplace, names the object of the input it overwrites; that
          kernel is compiled without TVM's no-alias promise, relay_passes/inplace.py)
          swap_out: tvm_swap.swap_out(i, t_var)
          swap_in:  t_var = tvm_swap.swap_in(i [, host_source])    # later uses are remapped to t_var
          drop:     tvm_swap.drop(i)
          compute of a host op (Plan.host_ops): its kernel on host tensors, between tvm_swap.host_begin(i)
                    and tvm_swap.host_end(i) (relay_passes/host_ops.py)
        res = tvm_swap.end()                            # waits for every stream; flat tuple of results
        return <the original return structure, built from res>

Every call is an impure `R.call_packed` (the pipeline would drop unused pure calls, notes/tvm-0.27.md §4), and each takes
the action index so the runtime executes the plan's event graph from the plan itself. No
`R.builtin.alloc_tensor` is left for any planned tensor: all device memory of the function is the pool.
Two extra functions carry the plan and the runtime manifest as JSON strings (`tvm_swap_plan`,
`tvm_swap_manifest`, notes/tvm-0.27.md §9), so an exported library is self-describing.

How the graph is matched to the IR, positionally and checked: graph op k is the k-th kernel call; its outputs
are the kernel's trailing alloc arguments, its inputs the kernel's tensor arguments (constants count when the
graph lists them); views (R.reshape, tuples, aliases) resolve to their base tensor and are re-created from the
tensor's current variable wherever a kernel reads them.
"""
from __future__ import annotations

import json

from dataclasses import dataclass

import tvm

from tvm_swap.errors import PlanError, UnsupportedModelError
from tvm_swap.graph import PERSISTENT_KINDS, DataflowGraph, ir
from tvm_swap.graph.ir import Kind
from tvm_swap.input_slices import META_KEY as INPUT_SLICES_KEY
from tvm_swap.param_layouts import META_KEY as PARAM_LAYOUTS_KEY
from tvm_swap.plan import ActionKind, Plan, runs_kernel

from .host_ops import emit_host_op, host_kernels
from .inplace import allow_aliasing
from .param_layout import folded_layouts
from .split_input_train import INPUT_SPLITS_ATTR

PLAN_FUNC = "tvm_swap_plan"
MANIFEST_FUNC = "tvm_swap_manifest"


# ---------------------------------------------------------------- IR analysis
@dataclass(frozen=True)
class TensorRef:
    """A tensor-valued expression: `base` is ("param", i) or ("out", kernel, j); `ty` its own type (a view's)."""
    base: tuple
    ty: object


@dataclass(frozen=True)
class TupleRef:
    fields: tuple


@dataclass(frozen=True)
class LeafRef:
    """A non-variable argument (constant, prim value, shape), passed through unchanged."""
    expr: object


@dataclass
class Kernel:
    call: object          # the original DPS Call
    inputs: list          # per input argument: TensorRef | LeafRef
    out_types: list       # TensorType of each output alloc


@dataclass
class Program:
    func: object
    kernels: list
    ret: object           # Ref of the return value


def analyze(mod, func_name: str = "main") -> Program:
    """Kernels in program order with their arguments resolved to tensors (see the module docstring)."""
    from tvm import relax

    func = ir.relax_function(mod, func_name, PlanError)
    ir.check_tensor_params(func, func_name)
    ref: dict = {}
    for i, p in enumerate(func.params):
        ref[p] = TensorRef(("param", i), p.ty)
    pending_alloc: dict = {}      # alloc var -> its type, until a kernel writes it
    kernels: list[Kernel] = []

    def resolve(e):
        if isinstance(e, relax.Var):
            if e in pending_alloc:
                raise UnsupportedModelError(f"{e.name!r} is read before any kernel writes it")
            if e not in ref:
                raise UnsupportedModelError(f"variable {e.name!r} is not bound in {func_name!r}")
            return ref[e]
        if isinstance(e, relax.Tuple):
            return TupleRef(tuple(resolve(f) for f in e.fields))
        if isinstance(e, relax.TupleGetItem):
            t = resolve(e.tuple_value)
            if not isinstance(t, TupleRef):
                raise UnsupportedModelError(f"tuple item of a non-tuple value in {func_name!r}")
            return t.fields[e.index]
        return LeafRef(e)

    body = func.body
    for block in body.blocks:
        for b in block.bindings:
            v, val = b.var, b.value
            if isinstance(b, relax.MatchCast):
                ref[v] = _as_view(resolve(val), v.ty)
                continue
            if isinstance(val, relax.Call):
                kind = ir.classify(mod, val)
                if kind == Kind.ALLOC:
                    pending_alloc[v] = v.ty
                    continue
                if kind == Kind.IGNORED:
                    continue
                if kind == Kind.VIEW:
                    ref[v] = _as_view(resolve(ir.view_source(val)), v.ty)
                    continue
                if kind == Kind.KERNEL or (kind == Kind.PACKED and isinstance(val.op, relax.ExternFunc)
                                           and not ir.is_runtime_symbol(str(val.op.global_symbol))):
                    args = list(val.args)
                    n_out = 0
                    while n_out < len(args) and isinstance(args[-1 - n_out], relax.Var) \
                            and args[-1 - n_out] in pending_alloc:
                        n_out += 1
                    if n_out == 0:
                        raise UnsupportedModelError(f"kernel call {ir.callee_name(val.op)!r} writes no allocated "
                                                    f"output; in-place kernels are not supported")
                    outs = args[len(args) - n_out:]
                    k = len(kernels)
                    kernels.append(Kernel(val, [resolve(a) for a in args[:len(args) - n_out]],
                                          [pending_alloc[o] for o in outs]))
                    for j, o in enumerate(outs):
                        ref[o] = TensorRef(("out", k, j), pending_alloc.pop(o))
                    continue
                callee = ir.op_name(val) or ir.callee_name(val.op)
                raise UnsupportedModelError(
                    f"binding {v.name!r} calls {callee!r}, which the swap pass cannot "
                    f"place; lower the model with relay_passes.lower first")
            ref[v] = resolve(val)
    if pending_alloc:
        names = ", ".join(sorted(x.name for x in pending_alloc))
        raise UnsupportedModelError(f"allocations no kernel writes: {names}")
    return Program(func, kernels, resolve(body.body))


def _as_view(src, ty):
    """A view of `src` with type `ty` (a reshape: same dtype and byte size)."""
    from tvm import relax

    if not isinstance(src, TensorRef) or not isinstance(ty, relax.TensorType):
        return src
    if ir.dtype_of(ty) != ir.dtype_of(src.ty):
        raise UnsupportedModelError(f"a view changes dtype {ir.dtype_of(src.ty)} -> {ir.dtype_of(ty)}; the swap "
                                    f"pass only "
                                    f"supports reshapes of a tensor")
    return TensorRef(src.base, ty)


def _flat_leaves(r) -> list:
    if isinstance(r, TupleRef):
        return [x for f in r.fields for x in _flat_leaves(f)]
    return [r]


# ---------------------------------------------------------------- graph <-> IR
def match_graph(prog: Program, graph: DataflowGraph) -> dict:
    """Check graph op k == kernel k; map every base tensor of the IR (("param", i) | ("out", k, j)) to its id.

    Constants are not graph tensors (tvm_swap.graph.extract leaves them in the constant pool), so they
    stay inline kernel arguments.
    """
    if len(prog.kernels) != graph.num_ops:
        raise PlanError(f"the graph has {graph.num_ops} ops but the lowered function has {len(prog.kernels)} "
                        f"kernel calls; extract the graph from this lowered module")
    tob: dict = {}

    def bind(base, t, what):
        old = tob.setdefault(base, t)
        if old != t:
            raise PlanError(f"{what}: the graph names tensors {old} and {t} for the same IR value; "
                            f"the graph does not match the lowered module")

    sources = graph.meta.get("tensor_source") if isinstance(graph.meta, dict) else None
    if sources and len(sources) == graph.num_tensors:
        for t, src in enumerate(sources):
            if src and src[0] == "param":
                bind(("param", int(src[1])), t, f"parameter {graph.tensors[t].name!r}")
    for k, (kern, op) in enumerate(zip(prog.kernels, graph.ops)):
        name = ir.callee_name(kern.call.op)
        if op.kernel and op.kernel != name:
            raise PlanError(f"graph op {k} runs kernel {op.kernel!r} but the module's kernel {k} is {name!r}; "
                            f"extract the graph from this lowered module")
        if len(op.outputs) != len(kern.out_types):
            raise PlanError(f"graph op {k} ({name}) has {len(op.outputs)} outputs, the kernel writes "
                            f"{len(kern.out_types)}")
        tensors = [r for r in kern.inputs if isinstance(r, TensorRef)]
        if len(op.inputs) != len(tensors):
            raise PlanError(f"graph op {k} ({name}) reads {len(op.inputs)} tensors, the kernel takes "
                            f"{len(tensors)} tensor arguments; extract the graph from this lowered module")
        for r, t in zip(tensors, op.inputs):
            bind(r.base, t, f"input of op {k}")
        for j, t in enumerate(op.outputs):
            bind(("out", k, j), t, f"output {j} of op {k}")
    prod = graph.producer()
    for (kind, *_), t in tob.items():
        if (kind == "param") != (prod[t] < 0):
            what = "a parameter" if kind == "param" else "a kernel output"
            raise PlanError(f"graph tensor {graph.tensors[t].name!r} is {what} in the module but not in the graph; "
                            f"extract the graph from this lowered module")
    return tob


# ---------------------------------------------------------------- plan checks
def check_plan_fits(graph: DataflowGraph, plan: Plan) -> None:
    """Structural checks apply relies on (the verifier checks the semantics): ids in range, sizes fit objects."""
    if plan.graph_fingerprint != graph.fingerprint():
        raise PlanError(f"the plan was made for graph {plan.graph_fingerprint}, not this one "
                        f"({graph.fingerprint()}); re-plan for this model")
    host = set(plan.host_ops or ())
    if any(not 0 <= o < graph.num_ops for o in host):
        raise PlanError(f"the plan's host_ops {sorted(host)} name ops the graph does not have")
    nobj = plan.pool.num_objects
    obj_bytes = plan.pool.object_bytes()
    seen_ops = set()

    def fits(t, o, where):
        if not 0 <= o < nobj:
            raise PlanError(f"{where}: object {o} does not exist (the pool has {nobj})")
        if not 0 <= t < graph.num_tensors:
            raise PlanError(f"{where}: tensor {t} does not exist")
        if graph.tensors[t].nbytes > obj_bytes[o]:
            raise PlanError(f"{where}: tensor {graph.tensors[t].name!r} ({graph.tensors[t].nbytes} B) does not fit "
                            f"object {o} ({int(obj_bytes[o])} B)")

    for t, o in plan.initial_residents:
        fits(t, o, "initial resident")
    for i, a in enumerate(plan.actions):
        if any(not 0 <= d < i for d in a.deps):
            raise PlanError(f"action {i} waits on {list(a.deps)}; deps must name earlier actions")
        if a.kind == ActionKind.COMPUTE:
            if not 0 <= a.op < graph.num_ops or a.op in seen_ops:
                raise PlanError(f"action {i} computes op {a.op}, which is out of range or computed twice")
            seen_ops.add(a.op)
            if a.op in host:            # runs on the host: its outputs live in host memory (no objects)
                if a.out_objs:
                    raise PlanError(f"action {i} runs op {a.op} on the host but names device objects")
                continue
            outs = graph.ops[a.op].outputs
            if len(a.out_objs) != len(outs):
                raise PlanError(f"action {i}: op {a.op} has {len(outs)} outputs but {len(a.out_objs)} objects")
            for t, o in zip(outs, a.out_objs):
                fits(t, o, f"action {i}")
        elif a.kind == ActionKind.RECOMPUTE:
            if a.op not in seen_ops:
                raise PlanError(f"action {i} recomputes op {a.op}, which is out of range or not computed before it")
            outs = graph.ops[a.op].outputs
            if len(a.out_objs) != len(outs):
                raise PlanError(f"action {i}: op {a.op} has {len(outs)} outputs but {len(a.out_objs)} objects")
            for t, o in zip(outs, a.out_objs):
                fits(t, o, f"action {i}")
        else:
            fits(a.tensor, a.obj, f"action {i} ({a.kind})")
    if len(seen_ops) != graph.num_ops:
        raise PlanError(f"the plan computes {len(seen_ops)} of the graph's {graph.num_ops} ops")


# ---------------------------------------------------------------- manifest
def build_manifest(prog: Program, graph: DataflowGraph, tob: dict, func_name: str, target_kind: str):
    from tvm_swap.manifest import Manifest, OutputSpec, ParamSpec, TensorSpec

    func = prog.func
    num_input = func.attrs.get("num_input") if func.attrs is not None else None
    params = []
    for i, p in enumerate(func.params):
        t = tob.get(("param", i), -1)
        if t >= 0:
            role = "param" if graph.tensors[t].kind in PERSISTENT_KINDS else "input"
        elif num_input is not None:
            role = "input" if i < int(num_input) else "unused"
        else:
            role = "unused"
        params.append(ParamSpec(p.name, ir.shape_of(p.ty), ir.dtype_of(p.ty), role, t))
    outputs = []
    for leaf in _flat_leaves(prog.ret):
        if not isinstance(leaf, TensorRef):
            raise UnsupportedModelError(f"{func_name!r} returns a non-tensor value; only tensors can be returned")
        if leaf.base not in tob:
            raise UnsupportedModelError(f"{func_name!r} returns parameter {func.params[leaf.base[1]].name!r} "
                                        f"that no kernel reads; return only computed tensors")
        outputs.append(OutputSpec(tob[leaf.base], ir.shape_of(leaf.ty), ir.dtype_of(leaf.ty)))
    if graph.outputs and sorted(set(graph.outputs)) != sorted({o.tensor for o in outputs}):
        raise PlanError(f"the graph's outputs {graph.outputs} are not what {func_name!r} returns "
                        f"{[o.tensor for o in outputs]}; extract the graph from this lowered module")
    tensors = {t.id: TensorSpec(t.id, t.name, tuple(t.shape), t.dtype, t.nbytes, t.kind) for t in graph.tensors}
    return Manifest(func_name, target_kind, tensors, params, outputs, sorted(graph.updates.items()),
                    isinstance(prog.ret, TupleRef),
                    {"graph": graph.name, "fingerprint": graph.fingerprint(),
                     "op_outputs": [list(op.outputs) for op in graph.ops]})



# ---------------------------------------------------------------- rewrite
def _packed(name, args, ret_ty=None):
    from tvm import relax

    ty = ret_ty if ret_ty is not None else relax.TupleType([])
    return relax.Call(relax.ExternFunc(name), list(args), ty_args=[ty])


def _int(i):
    from tvm import relax

    return relax.prim_value(int(i))


def apply_plan(lowered_mod, graph: DataflowGraph, plan: Plan, func_name: str = "main", target: str = "llvm",
               trace: bool = False, debug_poison: bool = False):
    """The lowered module with `func_name` rebuilt to execute `plan` (see the module docstring).

    `plan` must be verified (tvm_swap.verify.check_plan) for `graph`, which must be extracted from
    `lowered_mod`. `target` ("llvm" / "cuda" or a Target) is recorded so the runtime picks its backend.
    trace: call `tvm_swap.wait` / `tvm_swap.record` around EVERY kernel, so a tracing runtime can time each
    one where it really runs (runtime_ext.trace). debug_poison: drops are real work (the runtime overwrites
    dropped objects), so kernels also wait on them; a program built without it cannot be run poisoned.
    Raises PlanError when plan, graph and module do not belong together.
    """
    from tvm import relax

    from tvm_swap.events import call_sites

    graph.validate()
    check_plan_fits(graph, plan)
    prog = analyze(lowered_mod, func_name)
    tob = match_graph(prog, graph)
    target_kind = target if isinstance(target, str) else target.kind.name
    target_kind = target_kind.split()[0]
    manifest = build_manifest(prog, graph, tob, func_name, target_kind)
    manifest.meta["traced"] = bool(trace)
    manifest.meta["poison_ready"] = bool(debug_poison)
    # load re-verifies the embedded plan against these before the first call (runtime_ext.library_check)
    manifest.meta["graph_json"] = graph.to_dict()
    manifest.meta["tvm_version"] = str(tvm.__version__)
    layouts = folded_layouts(prog.func)      # params shipped in their compute layout (relay_passes.param_layout)
    if layouts is not None:
        manifest.meta[PARAM_LAYOUTS_KEY] = layouts.to_dict()
    if prog.func.attrs is not None and INPUT_SPLITS_ATTR in prog.func.attrs:   # (relay_passes.split_input_train)
        manifest.meta[INPUT_SLICES_KEY] = json.loads(str(prog.func.attrs[INPUT_SPLITS_ATTR]))
    needs_wait, needs_record = call_sites(plan, poison=debug_poison)
    if trace:
        needs_wait = needs_record = [runs_kernel(a.kind) for a in plan.actions]
    kernel_of_op = dict(enumerate(prog.kernels))
    host_ops = set(plan.host_ops or ())
    if host_ops:             # what each host op calls: its kernel built for llvm (relay_passes.host_ops)
        manifest.meta["host_op_inputs"] = {str(o): list(graph.ops[o].inputs) for o in sorted(host_ops)}
        lowered_mod, host_callee = host_kernels(lowered_mod, {o: kernel_of_op[o].call for o in host_ops},
                                                target_kind)
    in_place = plan.inplace_by_op()             # op -> {out: in}: the output is a view of the input's object
    input_tensors = {p.tensor for p in manifest.params if p.role == "input" and p.tensor >= 0}

    def tensor_ty(t):
        tb = graph.tensors[t]
        return relax.TensorType(list(tb.shape), tb.dtype)

    old_params = prog.func.params
    new_params = [relax.Var(p.name, p.ty) for p, spec in zip(old_params, manifest.params) if spec.role == "input"]
    param_var = {spec.tensor: v for v, spec in zip(new_params, manifest.inputs) if spec.tensor >= 0}
    attrs = {"relax.force_pure": True, "num_input": len(new_params)}
    bb = relax.BlockBuilder()
    cur: dict[int, object] = {}    # tensor id -> the variable holding it on the device now

    def name_of(t):
        return graph.tensors[t].name.replace(".", "_") or f"t{t}"

    def current(t, what):
        if t not in cur:
            raise PlanError(f"{what} reads tensor {graph.tensors[t].name!r}, which the plan has not placed on "
                            f"the device; the plan is not valid for this graph (verify it)")
        return cur[t]

    with bb.function(func_name, new_params, attrs=attrs, pure=False):
        bb.emit(_packed("tvm_swap.begin", new_params), name_hint="_")   # the inputs: copies may start early
        for t, o in plan.initial_residents:
            cur[t] = bb.emit(_packed("tvm_swap.object", [_int(-1), _int(t), _int(o)], tensor_ty(t)),
                             name_hint=name_of(t))
        for i, a in enumerate(plan.actions):
            if a.kind == ActionKind.COMPUTE and a.op in host_ops:
                emit_host_op(bb, i, graph, a.op, kernel_of_op[a.op], tob, host_callee[a.op], _packed, _int)
            elif runs_kernel(a.kind):      # a recompute emits the op's kernel call again, at its own place
                op = graph.ops[a.op]
                kern = kernel_of_op[a.op]
                if needs_wait[i]:
                    bb.emit(_packed("tvm_swap.wait", [_int(i)]), name_hint="_")
                outs = [bb.emit(_packed("tvm_swap.object", [_int(i), _int(t), _int(o)], tensor_ty(t)),
                                name_hint=name_of(t)) for t, o in zip(op.outputs, a.out_objs)]
                args = []
                for r in kern.inputs:
                    if isinstance(r, TensorRef):
                        t = tob[r.base]
                        v = current(t, f"op {op.name!r}")
                        if ir.shape_of(r.ty) != tuple(graph.tensors[t].shape):
                            v = bb.emit(relax.op.reshape(v, list(ir.shape_of(r.ty))), name_hint=name_of(t) + "_view")
                        args.append(v)
                    else:
                        args.append(r.expr)
                c = kern.call
                bb.emit(relax.Call(c.op, args + outs, c.attrs, c.ty_args), name_hint="_")
                for t, v in zip(op.outputs, outs):
                    cur[t] = v
                    if a.kind == ActionKind.COMPUTE and t in in_place.get(a.op, {}):
                        cur.pop(in_place[a.op][t], None)     # overwritten: nothing reads it again
                if needs_record[i]:
                    bb.emit(_packed("tvm_swap.record", [_int(i)]), name_hint="_")
            elif a.kind == ActionKind.SWAP_OUT:
                bb.emit(_packed("tvm_swap.swap_out", [_int(i), current(a.tensor, f"swap-out (action {i})")]),
                        name_hint="_")
            elif a.kind == ActionKind.SWAP_IN:
                src = [param_var[a.tensor]] if a.tensor in input_tensors else []
                cur[a.tensor] = bb.emit(_packed("tvm_swap.swap_in", [_int(i), *src], tensor_ty(a.tensor)),
                                        name_hint=name_of(a.tensor))
            elif a.kind == ActionKind.DROP:
                current(a.tensor, f"drop (action {i})")
                bb.emit(_packed("tvm_swap.drop", [_int(i)]), name_hint="_")
                del cur[a.tensor]
        out_ty = relax.TupleType([relax.TensorType(list(o.shape), o.dtype) for o in manifest.outputs])
        res = bb.emit(_packed("tvm_swap.end", [], out_ty), name_hint="results")
        counter = iter(range(len(manifest.outputs)))

        def rebuild(r):
            if isinstance(r, TupleRef):
                return relax.Tuple([rebuild(f) for f in r.fields])
            return relax.TupleGetItem(res, next(counter))

        bb.emit_func_output(bb.emit(rebuild(prog.ret), name_hint="gv"))
    return _with_function(lowered_mod, func_name, bb.get()[func_name], plan, manifest,
                          [kernel_of_op[o].call.op for o in in_place])


def _with_function(lowered_mod, func_name: str, new_func, plan: Plan, manifest, in_place_kernels):
    """`lowered_mod` with `func_name` replaced, the in-place kernels' no-alias promise lifted, and the plan and
    manifest embedded as functions returning their JSON."""
    from tvm import relax

    out = tvm.IRModule(dict(lowered_mod.functions), attrs=lowered_mod.attrs)
    out.update_func(out.get_global_var(func_name), new_func)
    allow_aliasing(out, in_place_kernels)
    for fname, text in ((PLAN_FUNC, plan.to_json()), (MANIFEST_FUNC, manifest.to_json())):
        fb = relax.BlockBuilder()
        with fb.function(fname, []):
            fb.emit_func_output(tvm.ir.StringImm(text))
        out[fname] = fb.get()[fname]
    return out


@tvm.transform.module_pass(opt_level=0, name="tvm_swap.ApplySwapPlan")
class ApplySwapPlan:
    """Write a verified swap plan into a lowered Relax module: a module pass, usable in a
    `tvm.transform.Sequential` like TVM's own `relax.transform` passes.

        applied = ApplySwapPlan(graph, plan, target="llvm")(lowered)
        seq = tvm.transform.Sequential([ApplySwapPlan(graph, plan), *finalize_passes])

    Parameters
    ----------
    graph : DataflowGraph
        The graph extracted from the module the pass will run on (tvm_swap.graph.from_relax).
    plan : Plan
        A plan for `graph`, verified (tvm_swap.verify.check_plan; every plan from plan_graph is).
    func_name : str
        The function to rewrite.
    target : str or Target
        Recorded in the manifest so the runtime picks its backend ("llvm" or "cuda").
    trace : bool
        Call `tvm_swap.wait` / `tvm_swap.record` around every kernel, so a tracing runtime can time each one.
    debug_poison : bool
        Drops are real work (the runtime overwrites dropped objects), so kernels also wait on them.

    Returns
    -------
    A `tvm.transform.ModulePass`: IRModule -> IRModule with `func_name` rebuilt in plan order and the plan
    and manifest embedded (see the module docstring). Raises PlanError when plan, graph and module do not
    belong together.
    """

    def __init__(self, graph: DataflowGraph, plan: Plan, func_name: str = "main", target="llvm",
                 trace: bool = False, debug_poison: bool = False):
        self.graph, self.plan, self.func_name = graph, plan, func_name
        self.target, self.trace, self.debug_poison = target, trace, debug_poison

    def transform_module(self, mod, ctx):
        return apply_plan(mod, self.graph, self.plan, self.func_name, target=self.target, trace=self.trace,
                          debug_poison=self.debug_poison)


def count_calls(mod, func_name: str = "main") -> dict:
    """How many times `func_name` calls each extern function (tvm_swap.*, vm.builtin.*): for IR tests."""
    from tvm import relax

    counts: dict[str, int] = {}

    def visit(e):
        if isinstance(e, relax.Call) and isinstance(e.op, relax.ExternFunc):
            k = str(e.op.global_symbol)
            counts[k] = counts.get(k, 0) + 1

    relax.analysis.post_order_visit(mod[func_name].body, visit)
    return counts
