"""Which ops run on the host: a deterministic policy over the optimizer's update kernels (plan_graph's
`host_ops` option), for any planner; the search choosing per op is later work.

    host_ops="optimizer"   every update kernel on the host (ZeRO-Offload's placement)
    host_ops="auto"        the first k of the n update kernels (graph order) on the host, for k in
                           0, n/4, n/2, 3n/4, n: each candidate's device part planned by the fast planner
                           (swapadvisor-nosearch for the swapadvisor planners), lifted and simulated with the
                           host on its own stream; the fastest is planned again by the planner asked for,
                           with the budget left. The first updates of backward go to the host first: the
                           host then works while backward goes on, where the last ones would add a tail.
    host_ops=[op ids]      those ops
The device part of each candidate is host_split.device_graph: what stays on the device may stay resident
(its state updated in place), what goes to the host crosses as gradients out and weights in.
"""
from __future__ import annotations

import time
from dataclasses import replace

from ..errors import TvmSwapError
from ..plan import Plan
from .context import PlanningContext
from .host_split import device_graph, lift_plan, optimizer_host_ops

FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)


def plan_on_host_split(ctx: PlanningContext, planner: str, host_ops) -> Plan:
    """`planner`'s plan of the device part, with `host_ops` put back on the host (not yet verified)."""
    from .registry import PLANNERS

    if not host_ops:
        return PLANNERS[planner](ctx)
    g_dev, keep = device_graph(ctx.graph, host_ops)
    dev_plan = PLANNERS[planner](replace(ctx, graph=g_dev, op_time=ctx.op_time[keep]))
    return lift_plan(ctx.graph, dev_plan, keep, host_ops)


def candidates(ctx: PlanningContext, choice) -> list[list[int]]:
    ups = optimizer_host_ops(ctx.graph)
    if choice == "optimizer":
        return [ups]
    if choice == "auto":
        out = []
        for f in FRACTIONS:
            c = ups[:round(f * len(ups))]
            if c not in out:
                out.append(c)
        return out
    if isinstance(choice, (list, tuple)):
        return [sorted({int(o) for o in choice})]
    raise TvmSwapError(f"host_ops must be 'optimizer', 'auto' or a list of op ids, got {choice!r}")


def plan_with_host(ctx: PlanningContext, planner: str, choice) -> Plan:
    """The plan of `planner` with the ops `choice` names on the host (see the module docstring)."""
    from .host_sim import simulate_plan
    from .registry import SEARCH_PLANNERS

    if not ctx.device.host:
        raise TvmSwapError(f"device {ctx.device.name!r} names no host spec, so no op can be placed on its host; "
                           f"use a device with one (h100, h200, cpu) or leave host_ops out")
    t0 = time.perf_counter()
    cands = candidates(ctx, choice)
    if len(cands) == 1:
        plan = plan_on_host_split(ctx, planner, cands[0])
        plan.search["host_policy"] = {"choice": choice if isinstance(choice, str) else "list", "host_ops": len(cands[0])}
        return plan
    screen = "swapadvisor-nosearch" if planner in SEARCH_PLANNERS else planner
    tried = []
    for c in cands:
        try:
            p = plan_on_host_split(replace(ctx, budget_s=max(1.0, 0.1 * ctx.budget_s)), screen, c)
        except TvmSwapError as e:       # (an InfeasibleLimitError: this split does not fit)
            tried.append({"host_ops": len(c), "time_s": None, "why": str(e)[:120]})
            continue
        tried.append({"host_ops": len(c), "time_s": float(simulate_plan(ctx.graph, p, ctx.op_time, ctx.device).time_s)})
    ok = [(r["time_s"], i) for i, r in enumerate(tried) if r["time_s"] is not None]
    if not ok:
        raise TvmSwapError("no placement of the optimizer's updates fits: " + "; ".join(
            f"{r['host_ops']} on the host: {r.get('why')}" for r in tried))
    best = cands[min(ok)[1]]
    left = max(0.1 * ctx.budget_s, ctx.budget_s - (time.perf_counter() - t0))
    plan = plan_on_host_split(replace(ctx, budget_s=left), planner, best)
    plan.search["host_policy"] = {"choice": "auto", "host_ops": len(best), "screened_with": screen, "tried": tried}
    return plan
