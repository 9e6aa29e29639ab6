"""The one list of planners. PlannerName is the enum every caller names a planner with (CLI choices,
scripts, tests); PLANNERS maps each to `plan(ctx: PlanningContext) -> Plan`.

    swapadvisor            genetic search over schedule and allocation, then its swap plan (swapadvisor/)
    swapadvisor-nosearch   the swap planner on the default schedule and a single-class pool
    odswap                 on-demand LRU swapping, prefetch by first-iteration order (baselines/odswap.py)
    vdnn                   vDNN: offload layer inputs in forward, prefetch one layer ahead (baselines/vdnn.py)
    noswap                 TVM's own static plan: everything resident, best-fit reuse (baselines/noswap.py)
    tflms                  TensorFlow LMS: a swap pair per far forward-to-backward edge, tuned (baselines/tflms.py)
    save-on-cpu            torch.autograd.graph.save_on_cpu: synchronous copies (baselines/save_on_cpu.py)
    save-on-cpu-async      torchtune's offloading: side stream, one-layer prefetch (baselines/save_on_cpu.py)
    zero-offload           DeepSpeed ZeRO-Offload: params, grads, optimizer state on the host (baselines/zero_offload.py)
    recompute-only         activation recomputation without offload: evicted activations are dropped and
                           recomputed, only params and optimizer state are swapped (baselines/recompute_only.py)
    checkpoint-sqrt        activation checkpointing every sqrt(n) layers, recomputed in backward (Chen et al. 2016;
                           torch.utils.checkpoint.checkpoint_sequential) (baselines/checkpoint.py)

A new planner: add a member here and its function to PLANNERS; nothing else lists planners.
"""
from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from ..plan import Plan
from .baselines import (plan_checkpoint_sqrt, plan_noswap, plan_odswap, plan_recompute_only, plan_save_on_cpu,
                        plan_save_on_cpu_async, plan_tflms, plan_vdnn, plan_zero_offload)
from .context import PlanningContext
from .swapadvisor.planners import plan_swapadvisor, plan_swapadvisor_nosearch


class PlannerName(str, Enum):
    """A planner's name; a str subclass, so "odswap" and PlannerName.ODSWAP are the same key."""
    SWAPADVISOR = "swapadvisor"
    SWAPADVISOR_NOSEARCH = "swapadvisor-nosearch"
    ODSWAP = "odswap"
    VDNN = "vdnn"
    NOSWAP = "noswap"
    TFLMS = "tflms"
    SAVE_ON_CPU = "save-on-cpu"
    SAVE_ON_CPU_ASYNC = "save-on-cpu-async"
    ZERO_OFFLOAD = "zero-offload"
    RECOMPUTE_ONLY = "recompute-only"
    CHECKPOINT_SQRT = "checkpoint-sqrt"

    __hash__ = str.__hash__

    def __str__(self) -> str:
        return self.value


PLANNERS: dict[PlannerName, Callable[[PlanningContext], Plan]] = {
    PlannerName.SWAPADVISOR: plan_swapadvisor,
    PlannerName.SWAPADVISOR_NOSEARCH: plan_swapadvisor_nosearch,
    PlannerName.ODSWAP: plan_odswap,
    PlannerName.VDNN: plan_vdnn,
    PlannerName.NOSWAP: plan_noswap,
    PlannerName.TFLMS: plan_tflms,
    PlannerName.SAVE_ON_CPU: plan_save_on_cpu,
    PlannerName.SAVE_ON_CPU_ASYNC: plan_save_on_cpu_async,
    PlannerName.ZERO_OFFLOAD: plan_zero_offload,
    PlannerName.RECOMPUTE_ONLY: plan_recompute_only,
    PlannerName.CHECKPOINT_SQRT: plan_checkpoint_sqrt,
}
BASELINE_NAMES = (PlannerName.ODSWAP, PlannerName.VDNN, PlannerName.NOSWAP, PlannerName.TFLMS,
                  PlannerName.SAVE_ON_CPU, PlannerName.SAVE_ON_CPU_ASYNC, PlannerName.ZERO_OFFLOAD,
                  PlannerName.RECOMPUTE_ONLY, PlannerName.CHECKPOINT_SQRT)
# the planners with an arena mode (the baselines model the paper's size-class pool only)
SEARCH_PLANNERS = (PlannerName.SWAPADVISOR, PlannerName.SWAPADVISOR_NOSEARCH)
# the planners that meet any limit at or above the pool's floor: below it they are refused naming that floor
# (api._refusal asks the others for a floor of their own)
FEASIBLE_AT_THE_FLOOR = ("swapadvisor", "swapadvisor-nosearch")
