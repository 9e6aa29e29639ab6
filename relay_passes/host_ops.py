"""Ops a plan places on the host (Plan.host_ops), written into the program by relay_passes.apply.

A host op is emitted at its place in the plan's action order as

    tvm_swap.host_begin(i)                         # the host waits for its deps (the copies out it reads)
    h_in  = tvm_swap.host_tensor(i, t)             # each tensor it reads: the host copy (host memory)
    h_out = tvm_swap.host_tensor(i, t)             # each output: its host buffer (a swap_in may bring it in)
    host_kernel(h_in..., constants..., h_out...)   # the op's kernel, compiled for llvm
    tvm_swap.host_end(i)                           # done: the actions waiting on it may go

The kernel runs on the thread that runs the program, on host memory (pinned on CUDA, seen by TVM as CPU
memory), so it runs after every action before it was issued and before any after it is. On llvm it is the
op's own kernel. For another target (CUDA) the op's PrimFunc as it was before its GPU schedule (kept by
relay_passes.gpu_schedule) is added under `<name>_host` with an llvm target, so the library holds it
compiled for the host beside the device kernels (`host_kernels`).
"""
from __future__ import annotations

from tvm_swap.errors import PlanError
from tvm_swap.graph import ir

from .gpu_schedule import UNSCHEDULED_ATTR

HOST_SUFFIX = "_host"


def host_kernels(mod, calls: dict, target_kind: str):
    """(module, op -> the callee its host compute calls). For a non-llvm target the module returned holds
    llvm copies of the ops' PrimFuncs (`<name>_host`). `calls`: op -> the op's original kernel Call."""
    import tvm

    if target_kind == "llvm" or not calls:
        return mod, {o: c.op for o, c in calls.items()}
    from tvm import relax

    host = tvm.target.Target("llvm")
    bb = relax.BlockBuilder(mod)
    out, made = {}, {}
    for o, c in calls.items():
        if not isinstance(c.op, tvm.ir.GlobalVar) or not isinstance(mod[c.op], tvm.tirx.PrimFunc):
            raise PlanError(f"op {o} calls {ir.callee_name(c.op)!r}, which is not a TIR kernel, so it cannot be "
                            f"compiled for the host; keep it on the device (leave it out of host_ops)")
        name = c.op.name_hint
        if name not in made:
            f = mod[c.op].attrs.get(UNSCHEDULED_ATTR) if mod[c.op].attrs is not None else None
            if f is None:
                raise PlanError(f"kernel {name!r} carries no unscheduled version to compile for the host (it was "
                                f"lowered without relay_passes.gpu_schedule); lower the model with "
                                f"relay_passes.lower, or keep op {o} on the device")
            f = f.with_attr("target", host).with_attr("global_symbol", name + HOST_SUFFIX)
            made[name] = bb.add_func(f, name + HOST_SUFFIX)
        out[o] = made[name]
    return bb.get(), out


def emit_host_op(bb, i: int, graph, a_op: int, kern, tob: dict, callee, packed, prim) -> None:
    """Emit action i, graph op `a_op` run on the host by `callee` (see the module docstring).
    kern: the op's relay_passes.apply.Kernel; tob: IR base -> tensor id; packed/prim: apply's helpers."""
    from tvm import relax

    op = graph.ops[a_op]

    def tensor_ty(t):
        return relax.TensorType(list(graph.tensors[t].shape), graph.tensors[t].dtype)

    bb.emit(packed("tvm_swap.host_begin", [prim(i)]), name_hint="_")
    host_of: dict = {}

    def host_tensor(t):
        if t not in host_of:
            host_of[t] = bb.emit(packed("tvm_swap.host_tensor", [prim(i), prim(t)], tensor_ty(t)),
                                 name_hint=f"host_t{t}")
        return host_of[t]

    args = []
    for r in kern.inputs:
        base = getattr(r, "base", None)
        if base is None:             # a constant or prim value: passed as it is
            args.append(r.expr)
            continue
        t = tob[base]
        v = host_tensor(t)
        shape = ir.shape_of(r.ty)
        if shape != tuple(graph.tensors[t].shape):
            v = bb.emit(relax.op.reshape(v, list(shape)), name_hint=f"host_t{t}_view")
        args.append(v)
    outs = [host_tensor(t) for t in op.outputs]
    c = kern.call
    bb.emit(relax.Call(callee, args + outs, c.attrs, c.ty_args), name_hint="_")
    bb.emit(packed("tvm_swap.host_end", [prim(i)]), name_hint="_")
