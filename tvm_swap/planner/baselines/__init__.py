"""The peer planners SwapAdvisor is measured against, under the same plan format and simulator.

    plan_noswap(ctx)  TVM's own static plan: everything resident, best-fit storage reuse (noswap.py)
    plan_odswap(ctx)  on-demand LRU swapping, prefetch by first-iteration order (odswap.py)
    plan_vdnn(ctx)    vDNN: offload layer inputs in forward, prefetch one layer ahead (vdnn.py)
    plan_tflms(ctx)   TFLMS: swap activations across far forward->backward edges, threshold tuned (tflms.py)
    plan_save_on_cpu(ctx), plan_save_on_cpu_async(ctx)
                      PyTorch's save_on_cpu (synchronous) and torchtune's offloading (side stream, one-layer
                      prefetch) (save_on_cpu.py)
    plan_zero_offload(ctx)
                      DeepSpeed ZeRO-Offload: params, gradients, optimizer state on the host (zero_offload.py)

    plan_recompute_only(ctx)
                      activation recomputation without offload: evicted activations are dropped and rebuilt
                      by recompute actions, only params and optimizer state are swapped (recompute_only.py)
    plan_checkpoint_sqrt(ctx)
                      activation checkpointing every sqrt(n) layers (Chen et al. 2016; torch.utils.checkpoint's
                      checkpoint_sequential): segment boundaries kept, the rest recomputed in backward (checkpoint.py)

Each takes a PlanningContext and returns an unverified Plan with `predicted` empty (api.plan_graph verifies
and simulates). `default_pool` is the exact-size pool odswap and vdnn share.
"""
from .checkpoint import plan_checkpoint_sqrt
from .common import PoolLayout, default_pool
from .noswap import noswap_need, plan_noswap, static_memory_plan
from .odswap import plan_odswap
from .recompute_only import plan_recompute_only
from .save_on_cpu import plan_save_on_cpu, plan_save_on_cpu_async
from .tflms import plan_tflms
from .vdnn import forward_ops, offload_candidates, plan_vdnn
from .zero_offload import plan_zero_offload

__all__ = ["PoolLayout", "default_pool", "forward_ops", "noswap_need", "offload_candidates",
           "plan_checkpoint_sqrt", "plan_noswap", "plan_odswap", "plan_recompute_only", "plan_save_on_cpu",
           "plan_save_on_cpu_async", "plan_tflms", "plan_vdnn", "plan_zero_offload", "static_memory_plan"]
