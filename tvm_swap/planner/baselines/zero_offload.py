"""zero-offload: DeepSpeed's ZeRO-Offload / ZeRO-Infinity parameter offload, under the shared pool and simulator.

What the tool does (Ren et al., ZeRO-Offload, USENIX ATC 2021; Rajbhandari et al., ZeRO-Infinity, SC 2021):
parameters, gradients and optimizer state live in host memory; activations live on the GPU. A parameter is
fetched to the GPU shortly before the op that reads it (a prefetch bucket ahead) and released after that op;
every gradient is copied to the host as soon as backward produces it and its GPU copy freed; the optimizer
step works on host-resident state. Activations are never offloaded: what forward keeps for backward must fit.

Here: nothing starts on the device (no initial residents); every parameter and optimizer-state tensor is
brought in `ahead` ops before each use and dropped right after it (unless the next use is within `ahead`
ops: the tool would hold the fetched bucket); every tensor an optimizer-update op reads that is not
persistent (the gradients) is copied out when produced, dropped, and brought back `ahead` ops before the
update (a gradient whose update comes within `ahead` ops stays: with the update on the GPU, sending it
away would only cost link time); updated values are copied out when produced (they replace the host copies). `ahead` is
tuned over a grid (DeepSpeed's `prefetch_bucket_size`, set by hand), each candidate simulated, the fastest
that fits kept.

The optimizer step (zero_update="host", the default, as the tool does): the update kernels run on the host
(Plan.host_ops; DeepSpeed's CPU Adam), on the host's copies of the fp32 master weights and moments, which never
cross the link: each gradient is copied out when backward produces it, the host's update waits for that
copy, and the new bf16 weights are fetched like every parameter at the next step. The host's time is the
roofline of the device's host spec (tvm_swap.cost.devices.HOSTS, tvm_swap.cost.host); the tool's one-step-delayed
update (which hides part of it behind the next step) is not modelled: each step waits for its own update.
zero_update="device" runs the update kernels on the GPU (ZeRO-Infinity's GPU-update mode): the optimizer state
then crosses the link in and out. Memory is the shared exact-size pool, not DeepSpeed's buffers.
"""
from __future__ import annotations

import numpy as np

from ...errors import InfeasibleLimitError, TvmSwapError
from ...graph import DataflowGraph
from ...plan import Plan
from .common import use_positions
from .offload import Policy, PolicyLayout, plan_policy, policy_need
from ..context import PlanningContext

AHEAD_GRID = (1, 4, 16)
WHY = ("zero-offload keeps parameters, gradients and optimizer state on the host and every activation on the "
       "GPU; {what} it needs this much")


def gradient_tensors(graph: DataflowGraph) -> list[int]:
    """Non-persistent tensors read by the ops that produce an updated persistent value (the gradients and
    the update's own intermediates): ZeRO offloads them as soon as they exist."""
    producer = graph.producer()
    update_ops = {int(producer[new]) for new in graph.updates if producer[new] >= 0}
    out = set()
    for o in update_ops:
        for t in graph.ops[o].inputs:
            if not graph.is_persistent(t) and producer[t] >= 0 and int(producer[t]) not in update_ops:
                out.add(t)
    return sorted(out)


def zero_policy(graph: DataflowGraph, order: list[int], ahead: int) -> Policy:
    """Every persistent tensor fetched `ahead` ops before each use and released after it; every gradient
    whose update is more than `ahead` ops away copied out when produced and fetched `ahead` ops before it."""
    uses = use_positions(graph, order)
    gaps: dict[tuple[int, int], int] = {}
    # inputs too: in the device part of a host-update step (host_split) the weights the host updates are inputs
    persistent = [t for t in graph.used_tensors() if graph.is_persistent(t) or graph.tensors[t].kind == "input"]
    for t in persistent:
        if uses[t]:
            gaps[(t, uses[t][0])] = max(0, uses[t][0] - ahead)    # the first use: a prefetch only
    # Between two uses a tensor leaves the device only when the next use is beyond the prefetch window
    # (inside it, the tool would hold the fetched bucket anyway).
    for t in (*persistent, *gradient_tensors(graph)):
        u = uses[t]
        for prev, nxt in zip(u, u[1:]):
            if nxt - ahead > prev:
                gaps[(t, nxt)] = nxt - ahead
    return Policy(gaps)


def plan_zero_offload(ctx: PlanningContext) -> Plan:
    where = ctx.options.get("zero_update", "host")
    if where not in ("host", "device"):
        raise TvmSwapError(f"zero_update must be 'host' (the optimizer on the CPU, as DeepSpeed runs it) or "
                           f"'device', got {where!r}")
    if where == "host" and ctx.device.host:
        from dataclasses import replace

        from ..host_split import device_graph, lift_plan, optimizer_host_ops

        host = optimizer_host_ops(ctx.graph)
        if host:
            g_dev, keep = device_graph(ctx.graph, host)
            dev_plan = _plan_on_device(replace(ctx, graph=g_dev, op_time=ctx.op_time[keep]))
            plan = lift_plan(ctx.graph, dev_plan, keep, host)
            plan.search["update_on"] = "host"
            return plan
    plan = _plan_on_device(ctx)
    plan.search["update_on"] = "device"
    return plan


def _plan_on_device(ctx: PlanningContext) -> Plan:
    try:
        aheads = ctx.options.get("zero_ahead", AHEAD_GRID)
        aheads = sorted({int(x) for x in (aheads if isinstance(aheads, (list, tuple)) else [aheads])})
    except (TypeError, ValueError) as e:
        raise TvmSwapError(f"bad zero_ahead option: {e}") from None
    if not aheads or aheads[0] < 0:
        raise TvmSwapError("zero_ahead must be op counts >= 0")
    from ..simulator import simulate

    layout = PolicyLayout.build(ctx)
    layout.resident = []               # nothing persistent lives on the device between steps
    # prefetches lengthen stays beyond the no-swap liveness the default roomy count is cut to: a class's
    # tensor count never fills
    layout.roomy = np.maximum(layout.roomy, np.bincount(
        [layout.tensor_class[t] for t in ctx.graph.used_tensors()], minlength=len(layout.sizes)) + 1)
    best, tried, least = None, [], None
    for ahead in aheads:
        policy = zero_policy(ctx.graph, layout.order, ahead)
        need = policy_need(ctx, layout, policy)
        least = need[0] if least is None else min(least, need[0])
        if need[0] > ctx.mem_limit:
            tried.append({"ahead": ahead, "need_bytes": int(need[0]), "time_s": None})
            continue
        plan = plan_policy(ctx, layout, policy, "zero-offload", "", need=need)
        t = float(simulate(ctx.graph, plan.actions, ctx.op_time, ctx.device).time_s)
        tried.append({"ahead": ahead, "need_bytes": int(need[0]), "time_s": t})
        if best is None or t < best[0]:
            best = (t, ahead, plan)
    if best is None:
        raise InfeasibleLimitError(ctx.mem_limit, least,
                                   WHY.format(what=f"prefetching {aheads[0]} op(s) ahead (the least it can),"))
    _, ahead, plan = best
    plan.search = {**plan.search, "ahead": ahead, "grid": tried}
    return plan
