"""A kernel's workspace as extra output parameters of its PrimFunc, so the plan places it like any tensor.

A fused kernel's global-scope intermediate buffers (a root-block `alloc_buffer`: the convolution's result before
its bias, max-pool backward's argmax) are allocated by TVM from its own workspace allocator when the kernel
runs, beside the pool a plan manages: the planner had to keep the largest of them as a reserve for the whole
iteration. `LiftWorkspace` (run after CallTIRRewrite, so every kernel call is `kernel(inputs..., outputs...)`)
makes each such buffer an extra trailing output parameter of its PrimFunc and gives every call of that kernel a
fresh `R.builtin.alloc_tensor` for it. The graph then has a tensor written by that kernel and read by no one
(tvm_swap.graph.extract lists it in meta["workspace_tensors"]): an arena range for that kernel's duration only,
placed, simulated, verified and allocated from the plan's pool like any other tensor.

Values are unchanged: the kernel computes the same expressions into the same buffer, now passed in.

What stays inside the kernel (the reserve `OpInfo.workspace` still counts): a buffer TVM's own lowering shrinks
(PlanAndUpdateBufferAllocationLocation + CompactBufferAllocation: an intermediate held one element or row at a
time, which llvm puts on the stack when under 1 KB; lifting it would allocate it whole), buffers of other scopes
(shared and local memory on a GPU are not device memory a pool holds), buffers allocated below the root block
(a GPU schedule's per-thread-block caches), and a library call's own workspace (cuBLAS, cuDNN: no PrimFunc).
"""
from __future__ import annotations

import tvm
from tvm import relax

from .gpu_schedule import UNSCHEDULED_ATTR

WORKSPACE_PARAMS_ATTR = "tvm_swap.workspace_params"   # PrimFunc attr: how many trailing params are workspace
MIN_LIFT_BYTES = 1024     # smaller buffers stay inside (llvm puts them on the stack): not worth an arena range


def liftable_buffers(prim_func) -> list:
    """The root-block global buffers of `prim_func` that TVM's lowering would allocate at their full size (and,
    for a GPU-scheduled kernel, that its unscheduled version, which a host op compiles, allocates too)."""
    from tvm_swap.graph.extract import allocated_global_buffers, buffer_nbytes

    compacted: dict[str, list[int]] = {}
    for name, nbytes in allocated_global_buffers(prim_func):
        compacted.setdefault(name, []).append(nbytes)
    names = [str(b.name) for b in _root_buffers(prim_func)]
    bufs = [b for b in _root_buffers(prim_func)
            if b.scope() == "global" and names.count(str(b.name)) == 1
            and compacted.get(str(b.name)) == [buffer_nbytes(b)] and buffer_nbytes(b) >= MIN_LIFT_BYTES]
    plain = _unscheduled(prim_func)
    return bufs if plain is None or _matching(plain, bufs) is not None else []


def _root_buffers(prim_func) -> list:
    root = getattr(prim_func.body, "block", None)
    return list(getattr(root, "alloc_buffers", None) or ())


def _unscheduled(prim_func):
    return prim_func.attrs.get(UNSCHEDULED_ATTR) if prim_func.attrs is not None else None


def _matching(prim_func, bufs):
    """`prim_func`'s root buffers with the names, shapes and dtypes of `bufs`, in their order; None if any is
    missing or ambiguous."""
    key = lambda b: (str(b.name), tuple(int(d) for d in b.shape), str(b.dtype))  # noqa: E731
    mine = [key(b) for b in _root_buffers(prim_func)]
    if any(mine.count(key(b)) != 1 for b in bufs):
        return None
    return [_root_buffers(prim_func)[mine.index(key(b))] for b in bufs]


def lift_prim_func(prim_func, bufs):
    """`prim_func` with `bufs` (root-block allocations) as trailing parameters instead (its unscheduled version
    too, so a host op's llvm kernel takes the same arguments)."""
    from tvm.s_tir import SBlock, SBlockRealize

    realize = prim_func.body
    root = realize.block
    keep = [b for b in root.alloc_buffers if not any(b.same_as(x) for x in bufs)]
    block = SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, root.body, root.init, keep,
                   root.match_buffers, root.annotations, root.span)
    body = SBlockRealize(realize.iter_values, realize.predicate, block, realize.span)
    done = int(prim_func.attrs[WORKSPACE_PARAMS_ATTR]) if prim_func.attrs is not None \
        and WORKSPACE_PARAMS_ATTR in prim_func.attrs else 0
    out = tvm.tirx.PrimFunc(list(prim_func.params) + list(bufs), body, prim_func.ret_type, prim_func.attrs,
                            prim_func.span).with_attr(WORKSPACE_PARAMS_ATTR, done + len(bufs))
    plain = _unscheduled(prim_func)
    if plain is not None:
        out = out.with_attr(UNSCHEDULED_ATTR, lift_prim_func(plain, _matching(plain, bufs)))
    return out


def _alloc(buf):
    shape = [int(d) for d in buf.shape]
    return relax.op.builtin.alloc_tensor(relax.ShapeExpr(shape), str(buf.dtype), 0, "global")


@relax.expr_functor.mutator
class _CallSites(relax.PyExprMutator):
    """Every call of a lifted kernel calls its new PrimFunc (a new GlobalVar of the same name, typed by the new
    parameters) with one fresh allocation per lifted buffer as trailing arguments."""

    def __init__(self, mod, lifted):
        super().__init__(mod)
        self.lifted = lifted            # kernel name -> (its new GlobalVar, its lifted buffers)

    def visit_var_binding_(self, binding):
        call = binding.value
        hit = self.lifted.get(call.op.name_hint) if isinstance(call, relax.Call) \
            and isinstance(call.op, tvm.ir.GlobalVar) else None
        if not hit:
            return super().visit_var_binding_(binding)
        gv, bufs = hit
        allocs = [self.builder_.emit(_alloc(b), name_hint=f"ws_{b.name}") for b in bufs]
        new = self.builder_.normalize(
            relax.Call(gv, [self.visit_expr(a) for a in call.args] + allocs, call.attrs, call.ty_args))
        self.builder_.emit_normalized(relax.VarBinding(binding.var, new))


@tvm.transform.module_pass(opt_level=0, name="tvm_swap.LiftWorkspace")
class LiftWorkspace:
    """Kernels' full-size global intermediates as output parameters (see the module docstring)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        lifted = {gv: bufs for gv, f in mod.functions.items() if isinstance(f, tvm.tirx.PrimFunc)
                  for bufs in [liftable_buffers(f)] if bufs}
        if not lifted:
            return mod
        rest = tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv not in lifted}, attrs=mod.attrs)
        sites = _CallSites(rest, {})
        for gv, bufs in lifted.items():        # a new GlobalVar: its type follows the new parameters
            new_gv = sites.builder_.add_func(lift_prim_func(mod[gv], bufs), gv.name_hint)
            sites.lifted[gv.name_hint] = (new_gv, bufs)
        for gv, f in list(rest.functions.items()):
            if isinstance(f, relax.Function):
                sites.builder_.update_func(gv, sites.visit_expr(f))
        return sites.builder_.get()
