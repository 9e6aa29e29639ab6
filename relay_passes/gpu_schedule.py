"""dlight default GPU schedules that survive a rule crashing on one kernel.

TVM 0.27's `dl.ApplyDefaultSchedule` stops the whole build when a rule raises: e.g. `dl.gpu.Reduction`
fails an internal check on `cross_entropy_with_logits` (a reduction to a 0-d tensor), so the stock CUDA
pipeline cannot build a training step with a cross-entropy loss. This pass applies the same rules in the
same order, and when a rule raises on a kernel, or gives a schedule whose cross-thread reduction TVM cannot
lower (max_pool2d's backward: "No matched reducer" at build time), it moves on to the next rule (ending with
Fallback). A kernel that builds under the stock pass gets exactly the same schedule.
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.target import Target

from tvm_swap.errors import UnsupportedModelError

SCHEDULE_FALLBACKS_ATTR = "tvm_swap.schedule_fallbacks"   # module attr: kernels where a rule raised
UNSCHEDULED_ATTR = "tvm_swap.unscheduled"                 # kernel attr: the PrimFunc before its GPU schedule


def _first_schedule(func, target, rules, name, failed):
    for rule in rules:
        try:
            space = rule.apply(func, target, False)
        except Exception as e:  # a rule bug: try the next rule
            failed.append(f"{name}: {type(rule).__name__} raised {type(e).__name__}")
            continue
        if space is None:
            continue
        sch = space[0] if isinstance(space, list) else space
        problem = _lowering_problem(sch)
        if problem:
            failed.append(f"{name}: {type(rule).__name__} gave a schedule TVM cannot lower ({problem})")
            continue
        return sch
    return None


def _lowering_problem(sch):
    """Why TVM's TIR lowering would reject this schedule, or "" (checks the cross-thread reductions).

    dlight's reduction rules bind reductions to threads without checking that TVM can lower the reducer:
    max_pool2d's backward kernel then fails at build time with "No matched reducer".
    """
    try:
        s_tir.transform.LowerCrossThreadReduction()(sch.mod)
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    return ""


def robust_default_schedule(rules):
    """A module pass like dl.ApplyDefaultSchedule(*rules) that skips a rule that raises on a kernel."""
    rules = list(rules)

    @tvm.transform.module_pass(opt_level=0, name="tvm_swap.RobustDefaultSchedule")
    def _pass(mod, _ctx):
        updated, failed = {}, []
        for gv, func in mod.functions_items():
            if not isinstance(func, tirx.PrimFunc) or func.attrs.get("tirx.is_scheduled", 0) == 1:
                continue
            target = func.attrs.get("target") or Target.current(allow_none=False)
            sch = _first_schedule(func, target, rules, gv.name_hint, failed)
            if sch is not None:
                assert isinstance(sch, s_tir.Schedule)
                # the kernel as it was before: an op a plan runs on the host is compiled from it for llvm
                updated[gv] = sch.mod["main"].with_attr("tirx.is_scheduled", True).with_attr(UNSCHEDULED_ATTR, func)
            elif failed and failed[-1].startswith(f"{gv.name_hint}:"):
                raise UnsupportedModelError(
                    f"no GPU schedule rule could schedule kernel {gv.name_hint!r} ({failed[-1]}); "
                    f"this operator is not supported on {target.kind.name}")
        for gv, func in updated.items():
            mod[gv] = func
        if failed:
            mod = mod.with_attr(SCHEDULE_FALLBACKS_ATTR, failed)
        return mod

    return _pass


def replace_default_schedule(passes):
    """The pass list with every dlight ApplyDefaultSchedule replaced by the robust version (same rules)."""
    out = []
    for p in passes:
        rules = getattr(p, "rules", None)
        if p.info.name == "ApplyDefaultSchedule" and rules is not None:
            out.append(robust_default_schedule(rules))
        else:
            out.append(p)
    return out
