"""The peer planners SwapAdvisor is measured against, under the same plan format and simulator.

    plan_noswap(ctx)  TVM's own static plan: everything resident, best-fit storage reuse (baseline_noswap)
    plan_odswap(ctx)  on-demand LRU swapping, prefetch by first-iteration order (baseline_odswap)
    plan_vdnn(ctx)    vDNN: offload layer inputs in forward, prefetch one layer ahead (baseline_vdnn)

Each takes a PlanningContext and returns an unverified Plan with `predicted` empty (api.plan_graph verifies
and simulates). `default_pool` is the exact-size pool odswap and vdnn share.
"""
from .common import PoolLayout, default_pool
from .noswap import noswap_need, plan_noswap, static_memory_plan
from .odswap import plan_odswap
from .vdnn import forward_ops, offload_candidates, plan_vdnn

__all__ = ["PoolLayout", "default_pool", "forward_ops", "noswap_need", "offload_candidates",
           "plan_noswap", "plan_odswap", "plan_vdnn", "static_memory_plan"]
