"""Lowering: TVM's own Relax pipeline, split where a swap plan must be written in.

    lowered = lower(mod, target)            # fused kernels + explicit allocations, nothing planned yet
    (relay_passes.apply rewrites `lowered` here: order, pool objects, swap calls)
    ex = relax.build(finalize(lowered, target), target, relax_pipeline=None)

`lower` runs the target's default pipeline (tvm.relax.backend.<cpu_generic|cuda|...>.pipeline) up to and
including CallTIRRewrite: library dispatch, LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR,
(llvm: relay_passes.cpu_inline, which keeps a fused kernel's elementwise stages from materialising full-size
intermediates), (GPU: the dlight default schedules, through relay_passes.gpu_schedule so that one crashing rule falls back
to the next instead of failing the build: TVM's own CUDA pipeline cannot build a cross-entropy loss),
RewriteDataflowReshape, ToNonDataflow, RemovePurityChecking,
CallTIRRewrite, then relay_passes.lift_workspace (a kernel's full-size global intermediates as output
parameters, so a plan places them). `finalize` runs the rest: StaticPlanBlockMemory, (cuda: RewriteCUDAGraph), LowerAllocTensor,
KillAfterLastUse, LowerRuntimeBuiltin, ComputePrimValue, VMShapeLower, AttachGlobalSymbol. With default
options the two halves together are exactly `relax.get_default_pipeline(target)` (plus cpu_inline on llvm, and
lift_workspace, which changes where kernels' intermediates live, not their values).

Shape of the lowered IR (what relay_passes.apply and tvm_swap.graph.extract rely on): every function is
non-dataflow, carries `relax.force_pure`, and each kernel is three bindings

    alloc = R.builtin.alloc_tensor(R.shape([...]), R.dtype("float32"), 0, R.str("global"))   # one per output
    kernel(inputs..., alloc)          # PrimFunc GlobalVar (or ExternFunc) call, outputs last (DPS)
    lv = alloc                        # the old SSA name of the result

Views stay as bindings that allocate nothing: `R.reshape(lv, shape)` (from RewriteDataflowReshape, unfused
only), tuple construction and TupleGetItem, var-to-var aliases.
"""
from __future__ import annotations

import importlib

from tvm_swap.errors import KernelCodegenError, TvmSwapError, UnsupportedModelError

FUSE_PASSES = ("FuseOps", "FuseTIR")
FUSE_MAX_DEPTH_KEY = "relax.FuseOps.max_depth"
TARGET_ATTR = "tvm_swap.target"   # module attribute set by lower(): the target it lowered for

# Backends whose pipeline module has the four stage functions; others fall back to gpu_generic.
_BACKENDS = {"llvm": "cpu_generic", "cuda": "cuda", "rocm": "rocm", "metal": "gpu_generic"}


def as_target(target):
    """A tvm.target.Target from a string, dict or Target; a clear error for anything TVM rejects."""
    import tvm

    if isinstance(target, tvm.target.Target):
        return target
    try:
        return tvm.target.Target(target)
    except Exception as e:  # TVM raises several types for a bad target string
        raise TvmSwapError(f"unknown target {target!r} ({type(e).__name__}: {str(e).splitlines()[0]}); "
                           f"use e.g. 'llvm' or 'cuda'") from None


def _stage_passes(target):
    """(library_dispatch, legalize, dataflow_lower, finalize) pass lists of the target's default pipeline.

    tvm.relax.pipeline.dataflow_lower_passes is broken for llvm in 0.27 (cpu_generic's __init__ does not
    export it), so read the backend's pipeline module directly.
    """
    import tvm  # noqa: F401  (tvm.relax.backend needs tvm initialised)

    kind = target.kind.name
    backend = _BACKENDS.get(kind)
    if backend is None:
        if "gpu" not in target.keys:
            raise UnsupportedModelError(f"target kind {kind!r} is not supported; use 'llvm' or 'cuda'")
        backend = "gpu_generic"
    from .gpu_schedule import replace_default_schedule

    p = importlib.import_module(f"tvm.relax.backend.{backend}.pipeline")
    return (p.library_dispatch_passes(target), replace_default_schedule(p.legalize_passes(target)),
            p.dataflow_lower_passes(target), p.finalize_passes(target))


def _pass_context(fuse_max_depth):
    """The current PassContext plus the FuseOps depth limit, so callers' settings are kept."""
    import tvm

    cur = tvm.transform.PassContext.current()
    config = dict(cur.config.items()) if cur.config is not None else {}
    if fuse_max_depth is not None:
        if int(fuse_max_depth) < 1:
            raise TvmSwapError(f"fuse_max_depth must be >= 1 (got {fuse_max_depth}); use None for TVM's default")
        config[FUSE_MAX_DEPTH_KEY] = int(fuse_max_depth)
    return tvm.transform.PassContext(
        opt_level=cur.opt_level, config=config, required_pass=list(cur.required_pass),
        disabled_pass=list(cur.disabled_pass), instruments=list(cur.instruments))


def _relax_functions(mod, func_name):
    from tvm import relax

    funcs = {gv.name_hint: f for gv, f in mod.functions.items() if isinstance(f, relax.Function)}
    if func_name is None:
        return funcs
    if func_name not in funcs:
        have = ", ".join(sorted(funcs)) or "none"
        raise TvmSwapError(f"the module has no Relax function {func_name!r}; it has: {have}")
    return {func_name: funcs[func_name]}


def _symbolic_dims(ty):
    """Names of the non-constant dimensions in a Relax type (tensor, tuple of tensors, shape)."""
    from tvm import relax, tirx

    if isinstance(ty, relax.TensorType):
        if ty.shape is None:
            return ["<unknown shape>"]
        vals = getattr(ty.shape, "values", None)
        if vals is None:
            return [str(ty.shape)]
        return [str(d) for d in vals if not isinstance(d, tirx.IntImm)]
    if isinstance(ty, relax.TupleType):
        return [d for f in ty.fields for d in _symbolic_dims(f)]
    return []


def check_static_shapes(mod, func_name=None):
    """Raise UnsupportedModelError if a Relax function's parameters or results have dynamic shapes."""
    for name, f in _relax_functions(mod, func_name).items():
        for p in f.params:
            dims = _symbolic_dims(p.ty)
            if dims:
                raise UnsupportedModelError(
                    f"function {name!r} parameter {p.name!r} has a dynamic shape ({', '.join(dims)}); "
                    f"dynamic shapes are not supported: give static input shapes (e.g. export with fixed "
                    f"batch and sequence sizes)")
        dims = _symbolic_dims(f.ret_ty)
        if dims:
            raise UnsupportedModelError(
                f"function {name!r} returns a dynamic shape ({', '.join(dims)}); dynamic shapes are not "
                f"supported: give static input shapes")


def lower(mod, target="llvm", fuse=True, fuse_max_depth=None, func_name=None, fuse_transpose=True,
          lift_workspace=True):
    """Run the target's default Relax pipeline up to CallTIRRewrite (see the module docstring).

    fuse_transpose: a matmul reads an operand transposed in its last two axes in place, no kernel copies it
    first (relay_passes.transpose_matmul; results bitwise equal). lift_workspace: a kernel's full-size global
    intermediates become output tensors the plan places for that kernel only (relay_passes.lift_workspace;
    False keeps them as TVM's workspace, a reserve beside the pool). fuse: False skips FuseOps/FuseTIR (one
    kernel per Relax op). fuse_max_depth: caps how many ops FuseOps
    puts into one kernel (deep fusion stretches lifetimes in training graphs). func_name: the function whose
    shapes are checked (None: all Relax functions).
    """
    import tvm

    target = as_target(target)
    check_static_shapes(mod, func_name)
    dispatch, legalize, dataflow_lower, _ = _stage_passes(target)
    if not fuse:
        legalize = [p for p in legalize if p.info.name not in FUSE_PASSES]
    if target.kind.name == "llvm":      # no default CPU schedule: keep fused stages from materialising
        from .cpu_inline import InlineFusedStages

        legalize = legalize + [InlineFusedStages]
    if fuse_transpose:                  # before LegalizeOps, which would make the transpose its own kernel
        from .transpose_matmul import FuseTransposedOperands

        legalize = [FuseTransposedOperands()] + legalize
    from .bool_kernels import LegalizeBoolOps       # bool comparisons/arithmetic llvm cannot compile, in int8

    from .lift_workspace import LiftWorkspace       # kernel workspace as tensors the plan places (after CallTIRRewrite)

    lift = [LiftWorkspace()] if lift_workspace else []
    seq = tvm.transform.Sequential([LegalizeBoolOps] + dispatch + legalize + dataflow_lower + lift,
                                   name="tvm_swap.lower")
    with target, _pass_context(fuse_max_depth if fuse else None):
        out = _run_tvm(seq, mod, "lowering")
    # Shapes can only become dynamic through ops (e.g. unique, nonzero); catch them here too.
    check_static_shapes(out, func_name)
    # Recorded for graph extraction and the apply pass (which must finalize for the same target).
    return out.with_attr(TARGET_ATTR, str(target))


def finalize(mod, target="llvm"):
    """Run the target's default finalize passes (memory planning to VM lowering) on a lowered module."""
    import tvm

    target = as_target(target)
    *_, fin = _stage_passes(target)
    with target:
        return _run_tvm(tvm.transform.Sequential(fin, name="tvm_swap.finalize"), mod, "finalize")


def _run_tvm(passes, mod, stage):
    """Run TVM passes; a TVM failure becomes one clear UnsupportedModelError (the original is kept as .tvm_error)."""
    try:
        return passes(mod)
    except TvmSwapError:
        raise
    except Exception as e:  # TVM raises InternalError, ValueError, TVMError... with C++ tracebacks
        first = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        err = UnsupportedModelError(
            f"TVM's {stage} pipeline failed on this model ({type(e).__name__}: {first[:300]}); an operator or "
            f"pattern in it is not supported by TVM 0.27 for this target (try fuse=False or a smaller "
            f"fuse_max_depth if it failed in FuseOps/FuseTIR)")
        err.tvm_error = e
        raise err from None


def build_lowered(mod, target="llvm"):
    """relax.build of a lowered (and possibly rewritten) module: finalize + codegen, no other Relax passes.

    On llvm a failure of TVM's code generator (TVM 0.27 emits invalid LLVM IR for some kernels: "Instruction
    does not dominate all uses!" for a fused matmul + add of batch 4 and 10 or 14 columns) becomes one
    KernelCodegenError naming the kernels that fail when built alone, never TVM's traceback. (CUDA builds
    have their own boundary: relay_passes.cuda_build.)"""
    from tvm import relax

    target = as_target(target)
    fin = finalize(mod, target)
    if target.kind.name != "llvm":
        return relax.build(fin, target=target, relax_pipeline=None)
    try:
        return relax.build(fin, target=target, relax_pipeline=None)
    except TvmSwapError:
        raise
    except Exception as e:  # TVM raises InternalError, TVMError... with C++ tracebacks and the LLVM IR
        raise codegen_error(fin, target, e) from None


def _tvm_reason(e: Exception) -> str:
    """The first line of a TVM codegen failure that says what went wrong (not the LLVM IR it quotes)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    head = lines[0] if lines else type(e).__name__
    if head.endswith(":") and len(lines) > 1 and not lines[1].startswith(("%", "call ", "store ")):
        head = f"{head.removesuffix(' with the following errors:').rstrip(':')}: {lines[1]}"
    return head[:240]


def failing_kernels(mod, target) -> list[str]:
    """Names of the PrimFuncs of `mod` whose codegen fails when each is built alone (slow: the error path only)."""
    import tvm

    bad = []
    for gv, f in mod.functions.items():
        if not isinstance(f, tvm.tirx.PrimFunc):
            continue
        try:
            tvm.tirx.build(tvm.IRModule({gv: f.with_attr("global_symbol", gv.name_hint)}), target=target)
        except Exception:
            bad.append(gv.name_hint)
    return bad


def _kernel_dtypes(mod, names) -> list[str]:
    """The bool dtypes the named PrimFuncs of `mod` read or write (what relay_passes.bool_kernels handles)."""
    import tvm

    out = set()
    for gv, f in mod.functions.items():
        if gv.name_hint in names and isinstance(f, tvm.tirx.PrimFunc):
            out |= {str(p.dtype) for p in f.params if str(getattr(p, "dtype", "")) == "bool"}
    return sorted(out)


def codegen_error(mod, target, e: Exception) -> KernelCodegenError:
    """The short error for a codegen failure of the finalized module `mod` (see build_lowered). It offers
    fuse_max_depth=1 only for the failure that knob is known to fix (fused float kernels: test_codegen_error);
    a kernel on bool tensors fails unfused too, so there the model must compute in another dtype."""
    reason = _tvm_reason(e)
    bad = failing_kernels(mod, target)
    if not bad:
        err = KernelCodegenError(
            f"TVM {_tvm_version()}'s {target.kind.name} code generator failed on this model, though no kernel "
            f"fails when built alone ({reason}); try other shapes (e.g. another batch size), and report the model",
            bad, e)
        return err
    shown = ", ".join(repr(b) for b in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
    what = f"kernel{'s' if len(bad) > 1 else ''} {shown}"
    odd = _kernel_dtypes(mod, set(bad))
    if odd:
        return KernelCodegenError(
            f"TVM {_tvm_version()}'s {target.kind.name} code generator cannot compile {what}, which compute(s) on "
            f"{'/'.join(odd)} tensors ({reason}); tvm_swap legalizes bool comparisons, arithmetic and scans "
            "(relay_passes.bool_kernels) but not this op: cast those tensors to int32 or float32 in the model "
            "before it", bad, e)
    fused = any(b.startswith("fused_") for b in bad)
    todo = ("build with fuse_max_depth=1 (its ops as separate kernels) or change that op's shapes (e.g. another "
            "batch size)" if fused else "change that op's shapes (e.g. another batch size)")
    return KernelCodegenError(
        f"TVM's {target.kind.name} code generator failed on {what} ({reason}); this is a TVM {_tvm_version()} "
        f"bug for these shapes, not a fault of the model or the memory plan: {todo}", bad, e)


def _tvm_version() -> str:
    import tvm

    return str(getattr(tvm, "__version__", "")).split("+")[0] or "(unknown version)"


def lower_unlimited_build(mod, target="llvm", fuse=True, fuse_max_depth=None):
    """The plain build with TVM's own memory plan, for comparisons against a swap-planned build.

    Same kernels as `lower(mod, target, fuse, fuse_max_depth)`, so results can be compared bitwise. With the
    default options this equals `relax.build(mod, target, relax_pipeline=relax.get_default_pipeline(target))`
    plus relay_passes.cpu_inline on llvm.
    """
    return build_lowered(lower(mod, target, fuse=fuse, fuse_max_depth=fuse_max_depth), target)
