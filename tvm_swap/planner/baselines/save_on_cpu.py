"""save-on-cpu and save-on-cpu-async: PyTorch's activation offloading, under the shared pool and simulator.

`save-on-cpu` stands for `torch.autograd.graph.save_on_cpu()` (pin_memory=False): every tensor autograd
saves for backward is copied to the host by the pack hook right after it is produced, synchronously (the
next kernel waits for the copy), and the GPU copy is freed once forward no longer uses it; in backward
the unpack hook copies it back right before the op that needs it, again synchronously (the copy starts
when the previous op is done and the op waits for it).

`save-on-cpu-async` stands for torchtune's `OffloadActivations` (use_streams=True): pinned host buffers,
the copies on a side stream so compute does not wait for a swap-out (the GPU memory is freed when the
copy has finished), and in backward a one-layer prefetch: the tensors the next backward op group needs
are brought in while the current one runs (here: at the previous distinct first-backward-use position,
as vDNN's prefetch).

Both keep weights, gradients and optimizer state on the GPU and run out of memory when that plus the
activations forward still holds does not fit. Simplified: a saved tensor comes back once, at its first
backward use, and stays until its last (PyTorch unpacks per saving node); "saved for backward" is read
from the graph (any activation a backward op reads), not from autograd's per-op choice; pinned and
pageable copies use the same link speed; memory is the shared exact-size pool, not the caching allocator.
"""
from __future__ import annotations

from ...plan import Plan
from .common import use_positions
from .offload import PolicyLayout, forward_of, gap_policy, plan_policy, saved_activations
from ..context import PlanningContext

WHY = ("{name} keeps weights, gradients, optimizer state and the activations forward still uses on the GPU; "
       "it needs this much")


def _policy(ctx: PlanningContext, layout: PolicyLayout, sync: bool):
    g = ctx.graph
    fwd = forward_of(g)
    pos = {o: i for i, o in enumerate(layout.order)}
    fwd_pos = {pos[o] for o in fwd}
    uses = use_positions(g, layout.order)
    saved = saved_activations(g, fwd)

    def crosses(t, prev, nxt):        # the gap between forward's last use and backward's first
        return prev in fwd_pos and nxt not in fwd_pos

    if sync:
        return gap_policy(uses, saved, crosses, prefetch_at=lambda t, prev, nxt: nxt, sync=True)
    firsts = sorted({next(p for p in uses[t] if p not in fwd_pos) for t in saved})
    previous = {f: (firsts[k - 1] if k else f) for k, f in enumerate(firsts)}
    return gap_policy(uses, saved, crosses, prefetch_at=lambda t, prev, nxt: previous.get(nxt, nxt))


def plan_save_on_cpu(ctx: PlanningContext) -> Plan:
    layout = PolicyLayout.build(ctx)
    return plan_policy(ctx, layout, _policy(ctx, layout, sync=True), "save-on-cpu", WHY.format(name="save-on-cpu"))


def plan_save_on_cpu_async(ctx: PlanningContext) -> Plan:
    layout = PolicyLayout.build(ctx)
    return plan_policy(ctx, layout, _policy(ctx, layout, sync=False), "save-on-cpu-async",
                       WHY.format(name="save-on-cpu-async"))
