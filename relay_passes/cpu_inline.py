"""Fused llvm kernels without full-size intermediates: elementwise stages inline, epilogues per output element.

TVM 0.27's CPU pipeline has no default schedule: FuseTIR's output runs as written, and every stage of a fused
kernel but the last writes a global buffer of its full shape, which TVM allocates as kernel workspace. On the
MXNet small_cnn at batch 128, `fused_batch_norm_relu` kept four 8 MiB intermediates (T_subtract, T_divide,
T_multiply, T_add: 32 MiB of workspace for an 8 MiB activation), `fused_conv2d_add` a padded copy of its input
and the convolution's result before the bias. The arena and the size-class pool both reserved the largest of
these for the whole iteration (what relay_passes.lift_workspace does not lift still is).

This pass (llvm targets only: GPU targets get dlight's schedules, which inline on their own) rewrites each
unscheduled PrimFunc with the schedule primitives TVM has for it, to a fixed point:
- `compute_inline` of every spatial stage into its readers (padding into the convolution, batch-norm's
  subtract/divide/multiply into the final add, ...), and `reverse_compute_inline` of elementwise consumers
  into spatial producers (a trailing relu);
- a spatial stage that reads a reduction's result (the bias add after a convolution or matmul) is computed
  under the reduction's spatial loops (`reverse_compute_at`), right after that output element's reduction
  finishes. TVM's own lowering (PlanAndUpdateBufferAllocationLocation + CompactBufferAllocation) then shrinks
  the reduction's buffer to the one element it holds at a time; `tvm_swap.graph.extract.kernel_workspace`
  measures the buffers after those two passes.

Values are unchanged: every element is computed by the same expression in the same order (reductions keep
their loop order); only where the intermediate values are stored changes. The unlimited build
(`lower_unlimited_build`) uses the same kernels, so swap-planned builds still compare bitwise against it.
Cost: a stage inlined into a reader that reads each element k times is computed k times (padding inside a
convolution: a bounds test per multiply-add); llvm kernels are unscheduled anyway.
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.s_tir.schedule import _ffi_api as _sch

SPATIAL, REDUCE = 0, 2           # tirx.IterVar iter types (kDataPar, kCommReduce)

# Most attempts below are refused by the primitive's own checks (a block that cannot be inlined is tried again
# after every change): the schedule's primitives are called through TVM's C++ functions, not the Python methods'
# per-call type checker, on an untraced schedule that does not render the refused attempts' error messages
# (the same primitives, so the same kernels; a third of the lowering's time before).
_compute_inline = _sch.ScheduleComputeInline
_reverse_compute_inline = _sch.ScheduleReverseComputeInline


def _schedule(func):
    return s_tir.Schedule._create_non_traced(func, error_render_level="none")


def _root_blocks(sch):
    try:
        return list(_sch.ScheduleGetChildBlocks(sch, _sch.ScheduleGetSBlock(sch, "root", None)))
    except Exception:  # no root block (hand-written or already lowered TIR)
        return []


def _inline_once(sch) -> bool:
    for block in _root_blocks(sch):
        for prim in (_compute_inline, _reverse_compute_inline):
            try:
                prim(sch, block)
            except Exception:  # the primitive's own checks refuse it: try the next one
                continue
            return True
    return False


def _attach_epilogue_once(sch) -> bool:
    """Move one spatial consumer of a root reduction under that reduction's spatial loops; True if moved."""
    get = _sch.ScheduleGet
    for block in _root_blocks(sch):
        iters = [int(iv.iter_type) for iv in get(sch, block).iter_vars]
        if REDUCE not in iters:
            continue
        n_spatial = next((i for i, t in enumerate(iters) if t != SPATIAL), len(iters))
        loops = list(_sch.ScheduleGetLoops(sch, block))
        if n_spatial == 0 or len(loops) < n_spatial:
            continue
        for consumer in _sch.ScheduleGetConsumers(sch, block):
            if any(int(iv.iter_type) != SPATIAL for iv in get(sch, consumer).iter_vars):
                continue
            if get(sch, consumer) not in [get(sch, b) for b in _root_blocks(sch)]:
                continue                                    # already attached
            try:
                _sch.ScheduleReverseComputeAt(sch, consumer, loops[n_spatial - 1], True, -1)
            except Exception:  # the consumer needs more than one output element of the reduction
                continue
            return True
    return False


def inline_stages(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """The kernel with its elementwise stages inlined and epilogues attached (see the module docstring)."""
    if func.attrs is not None and func.attrs.get("tirx.is_scheduled", 0) == 1:
        return func
    try:
        sch = _schedule(func)
    except Exception:  # not schedulable TIR (e.g. opaque blocks): keep it as it is
        return func
    changed = False
    while True:
        if _inline_once(sch):
            changed = True
            continue
        if _attach_epilogue_once(sch):
            changed = True
            continue
        break
    return sch.mod["main"] if changed else func


@tvm.transform.module_pass(opt_level=0, name="tvm_swap.InlineFusedStages")
def InlineFusedStages(mod, _ctx):  # noqa: N802 - a TVM pass, named like TVM's
    """Module pass: `inline_stages` on every PrimFunc of the module."""
    updated = {}
    for gv, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            new = inline_stages(func)
            if not new.same_as(func):
                updated[gv] = new
    for gv, func in updated.items():
        mod[gv] = func
    return mod

