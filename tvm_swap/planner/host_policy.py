"""Which ops run on the host (plan_graph's `host_ops` option), for any planner: a policy over the optimizer's
update kernels, whose candidates seed the search over host placements ("auto").

    host_ops="optimizer"   every update kernel on the host (ZeRO-Offload's placement)
    host_ops="auto"        searched (swapadvisor/host_genes.py: a gene per op that may run on the host, the
                           genomes seeded from the candidates below, each scored by the simulator with the host
                           on its own stream, for the screening share of the budget or `host_generations`
                           generations). The candidates: the first k of the n update kernels (graph order) on
                           the host. The host's work (H: all n updates on the host) overlaps the device's (C:
                           the other ops), so k starts between n * min(1, C / H), where both take as long, and
                           the k where the host, starting once the first gradient exists, ends with the device
                           (balanced_fractions); then both ends, then the neighbours (+-0.01 n, +-0.02 n,
                           +-0.05 n, +-0.1 n) of each. Each is planned (a search planner with its seeds only,
                           generations=0) and simulated with the host on its own stream while 60% of the budget
                           lasts (the placement search's seeds and generations); the search planner then
                           searches from the fastest placement with the budget left (when at least 40% of it
                           is), and the faster of that and the screened plan is kept (a step with no op
                           that may run on the host, such as inference: the planner's own plan, with the
                           whole budget). The first updates of backward go to the host first: the host
                           works while backward goes on, where the last ones would add a tail; the updates
                           left on the device keep their state there when it fits.
    host_ops=[op ids]      those ops
Each set also gets the update op of every persistent tensor its ops read (host_split.close_host_ops: a step
counter updated and kept on the device would leave a stale host copy for the host's updates to read).
The device part of each candidate is host_split.device_graph: what stays on the device may stay resident
(its state updated in place), what goes to the host crosses as gradients out and weights in.
"""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from ..errors import InfeasibleLimitError, PlanError, TvmSwapError
from ..plan import Plan
from .context import PlanningContext
from .host_split import close_host_ops, device_graph, host_eligible, lift_plan, optimizer_host_ops

# the fractions tried around the balanced one, in this order: near ones first, as a seeds-only plan's time
# jumps from one split to the next (llama-13b at 141 GB: 0.82 s at 40% of the updates, 0.91 s at 39%, 0.82 s at 38%)
STEPS = (0.0, 0.01, -0.01, 0.02, -0.02, 0.05, -0.05, 0.1, -0.1)
SCREEN_SHARE, SEARCH_SHARE = 0.6, 0.4
# generations of the placement search (host_genes.py) when the planner runs a fixed number of generations
HOST_GENERATIONS = 2


def plan_on_host_split(ctx: PlanningContext, planner: str, host_ops) -> Plan:
    """`planner`'s plan of the device part, with `host_ops` put back on the host (not yet verified)."""
    from .registry import PLANNERS

    if not host_ops:
        return PLANNERS[planner](ctx)
    g_dev, keep = device_graph(ctx.graph, host_ops)
    check_device_part(g_dev, ctx)
    dev_plan = PLANNERS[planner](replace(ctx, graph=g_dev, op_time=ctx.op_time[keep]))
    return lift_plan(ctx.graph, dev_plan, keep, host_ops)


def check_device_part(g_dev, ctx: PlanningContext) -> None:
    """InfeasibleLimitError when the device part of a split has no plan under the limit: its floor is its own
    (plan_graph checked the whole step's), and a search planner asked below it finds no genome at all (the
    placement search's fuzz, scripts/fuzz.py, found one: a ValueError from inside the GA)."""
    from .graphindex import GraphIndex

    why = "the device part of this host placement"
    if g_dev.num_ops == 0:
        # (every op on the host: no device plan to make; the planners' indexes need an op. The fuzz's
        # 3-op graphs whose every op is eligible reached it: an IndexError from inside the GA)
        raise PlanError(f"{why} leaves no op on the device: keep at least one op there (host_ops names every op)")
    if ctx.pool == "arena":
        from .swapadvisor.arena import arena_fits, working_set_floor

        gi = GraphIndex.of(g_dev, ctx.alignment, keep_updated=False)
        floor = working_set_floor(gi) + gi.workspace
        if ctx.mem_limit >= floor and arena_fits(gi, ctx.mem_limit):
            return
        raise InfeasibleLimitError(ctx.mem_limit, max(floor, ctx.mem_limit + 1), f"{why} has no arena plan",
                                   exact=False)
    from .feasibility import min_feasible_limit

    floor = min_feasible_limit(g_dev, ctx.alignment)
    if ctx.mem_limit < floor:
        raise InfeasibleLimitError(ctx.mem_limit, floor, f"{why} needs a larger size-class pool")


def balanced_fractions(ctx: PlanningContext, ups: list[int]) -> tuple[float, float]:
    """(plain, late): the shares of the updates (graph order) on the host where the host's work H(k) meets the
    device's. plain: k / n = C / H(n), the host working from the start. late: the host starts only once the
    first update's gradient exists (the device seconds of its ancestors, host_bound._device_heads; a step
    counter's update, which waits on nothing, aside) and the updates left on the device add their seconds:
    first + H(k) = C + D(rest). The step's time lies between (the device also stalls on what it swaps),
    so the candidates start from their mean (llama-13b at 141 GB: plain 0.39, late 0.29, best found 0.34)."""
    from ..cost.devices import get_host
    from ..cost.host import host_times
    from .host_bound import _device_heads

    on_dev = np.ones(ctx.graph.num_ops, dtype=bool)
    on_dev[ups] = False
    h = host_times(ctx.graph, get_host(ctx.device))[ups]
    host_all = float(h.sum())
    if host_all <= 0:
        return 1.0, 1.0
    c = float(ctx.op_time[on_dev].sum())
    plain = min(1.0, c / host_all)
    heads = _device_heads(ctx.graph, ctx.op_time, on_dev)[ups]
    first = float(heads[heads > 0].min()) if (heads > 0).any() else 0.0
    d = np.asarray(ctx.op_time, dtype=np.float64)[ups]
    host_k = np.concatenate([[0.0], np.cumsum(h)])
    dev_rest = d.sum() - np.concatenate([[0.0], np.cumsum(d)])
    k = int(np.searchsorted(first + host_k - (c + dev_rest), 0.0))   # the first k where the host is slower
    return plain, min(1.0, k / len(ups))


def candidates(ctx: PlanningContext, choice) -> list[list[int]]:
    ups = optimizer_host_ops(ctx.graph)
    if choice == "optimizer":
        return [ups]
    if choice == "auto":
        out = []
        plain, late = balanced_fractions(ctx, ups)
        mid = 0.5 * (plain + late)
        for f in [mid, plain, late] + [mid + step for step in STEPS[1:]] + [plain + step for step in STEPS[1:]]:
            c = close_host_ops(ctx.graph, ups[:round(min(1.0, max(0.0, f)) * len(ups))])
            if c not in out:
                out.append(c)
        return out
    if isinstance(choice, (list, tuple)):
        return [close_host_ops(ctx.graph, choice)]
    raise TvmSwapError(f"host_ops must be 'optimizer', 'auto' or a list of op ids, got {choice!r}")


def _search_placement(ctx: PlanningContext, planner: str, seeds: list, t0: float):
    """The search over host placements (swapadvisor/host_genes.py) from the policy's candidates `seeds`, each
    genome planned as the seeds were screened (a search planner with generations=0) and simulated with the
    host on its own stream: for SCREEN_SHARE of the budget, or `host_generations` generations (planner option,
    default HOST_GENERATIONS) when the search runs a fixed number of generations."""
    from .host_sim import simulate_plan
    from .registry import SEARCH_PLANNERS
    from .swapadvisor.host_genes import search_host_ops

    screen = replace(ctx, generations=0) if planner in SEARCH_PLANNERS else ctx

    def score(ops):
        try:
            p = plan_on_host_split(screen, planner, ops)
        except (InfeasibleLimitError, PlanError):       # (PlanError: the arena's fragmentation refusal)
            return float("inf"), None
        return float(simulate_plan(ctx.graph, p, ctx.op_time, ctx.device).time_s), p

    gens = host_generations(ctx)
    # (generations=0 plans the seeds only: here, the policy's candidates)
    gens = None if ctx.generations is None else 0 if ctx.generations == 0 else int(gens)
    deadline = None if gens is not None else t0 + SCREEN_SHARE * ctx.budget_s
    return search_host_ops(ctx.graph, score, seeds, deadline, gens, ctx.seed)


def host_generations(ctx: PlanningContext) -> int:
    """The placement search's generations option (HOST_GENERATIONS when not given), checked."""
    gens = ctx.options.get("host_generations", HOST_GENERATIONS)
    if not isinstance(gens, (int, np.integer)) or isinstance(gens, bool) or gens < 0:
        raise TvmSwapError(f"host_generations must be a non-negative integer, got {gens!r}")
    return int(gens)


def plan_with_host(ctx: PlanningContext, planner: str, choice) -> Plan:
    """The plan of `planner` with the ops `choice` names on the host (see the module docstring)."""
    from .host_sim import simulate_plan
    from .registry import SEARCH_PLANNERS

    if not ctx.device.host:
        raise TvmSwapError(f"device {ctx.device.name!r} names no host spec, so no op can be placed on its host; "
                           f"use a device with one (h100, h200, cpu) or leave host_ops out")
    t0 = time.perf_counter()
    if choice == "auto":
        host_generations(ctx)           # (a bad option is refused, whatever the graph)
        if not host_eligible(ctx.graph):
            # no op may run on the host (no optimizer update: an inference step): the planner's own plan, with
            # the whole budget; the placement search would screen the one empty placement, then plan it again
            plan = plan_on_host_split(ctx, planner, [])
            plan.search["host_policy"] = {"choice": "auto", "host_ops": 0, "eligible": 0}
            return plan
    cands = candidates(ctx, choice)
    if len(cands) == 1 and choice != "auto":
        try:
            plan = plan_on_host_split(ctx, planner, cands[0])
        except (InfeasibleLimitError, PlanError) as e:     # (PlanError: the arena's fragmentation refusal)
            if not cands[0]:
                raise
            # the device part alone does not fit (its arena floor need not be below the whole step's):
            # every op on the device, so a refusal names what the planner itself needs
            plan = plan_on_host_split(ctx, planner, [])
            plan.search["host_policy"] = {"choice": choice if isinstance(choice, str) else "list", "host_ops": 0,
                                          "fell_back": str(e)[:200]}
            return plan
        plan.search["host_policy"] = {"choice": choice if isinstance(choice, str) else "list",
                                      "host_ops": len(cands[0])}
        return plan
    search = planner in SEARCH_PLANNERS
    best, summary = _search_placement(ctx, planner, cands, t0)
    if best is None:         # no split fits (see above): every op on the device
        plan = plan_on_host_split(ctx, planner, [])
        plan.search["host_policy"] = {"choice": "auto", "host_ops": 0, **summary}
        return plan
    c, plan, t_best = list(best.ops), best.plan, best.time_s
    left = ctx.budget_s - (time.perf_counter() - t0)
    if search and ctx.generations != 0 and (ctx.generations or left >= SEARCH_SHARE * ctx.budget_s):
        found = plan_on_host_split(replace(ctx, budget_s=max(left, 0.1 * ctx.budget_s)), planner, c)
        # a search cut by the budget may end below its own seeds: keep the faster
        if simulate_plan(ctx.graph, found, ctx.op_time, ctx.device).time_s <= t_best:
            plan = found
    plan.search["host_policy"] = {"choice": "auto", "host_ops": len(c), **summary}
    return plan
