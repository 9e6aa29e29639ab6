"""tflms: TensorFlow Large Model Support (Le et al. 2018; IBM's TFLMS) under the shared pool and simulator.

TFLMS rewrites the training graph: for every edge from a forward op to a backward op whose topological
distance is at least `swapout_threshold`, it inserts a swap-out after the producer and a swap-in before
the consumer, started `swapin_ahead` ops earlier (a control edge: the swap-in starts when that op has
finished, so here it waits for the compute before its position, GatedActionBuilder; before this it could
start as soon as the copy stream and its memory were free, earlier than TFLMS can). Only activations are swapped; weights,
gradients and optimizer state stay on the GPU, and what does not fit runs out of memory. Users tune the
threshold (and how far ahead swap-ins start) by hand; here both are tuned over a grid, each candidate
simulated, the fastest that fits kept.

Simplified: distance is counted in the default schedule (TFLMS uses the graph's topological levels); one
swap-out per tensor, and one swap-in per gap before a far backward use (TFLMS makes one per edge, or
groups them); the swap-in is issued at the op `ahead` positions before its consumer (no separate lb/ub
range); memory is the shared exact-size pool, not TensorFlow's BFC allocator. Options: `tflms_thresholds`
(the grid, in ops; default: fractions of the op count), `tflms_ahead` (ops, an int or a list; default
AHEAD_GRID: TFLMS's default lb of 1, and further ahead, which hides more of each copy but holds memory longer).
"""
from __future__ import annotations

from ...errors import InfeasibleLimitError, TvmSwapError
from ...plan import Plan
from .common import use_positions
from .offload import PolicyLayout, forward_of, gap_policy, plan_policy, policy_need
from ..context import PlanningContext

GRID_FRACTIONS = (1 / 512, 1 / 128, 1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2)
AHEAD_GRID = (1, 4, 16)


def threshold_grid(n_ops: int) -> list[int]:
    """Thresholds a user would try by hand: 1 op, then fractions of the graph."""
    return sorted({1, *(max(1, round(n_ops * f)) for f in GRID_FRACTIONS)})


def tflms_policy(ctx: PlanningContext, layout: PolicyLayout, threshold: int, ahead: int, facts=None):
    """The gaps TFLMS takes at (threshold, ahead); `facts` (_policy_facts) when trying many settings."""
    uses, acts, fwd_pos, prod_pos = facts or _policy_facts(ctx, layout)
    return gap_policy(uses, acts,
                      wants_gap=lambda t, prev, nxt: nxt not in fwd_pos and nxt - prod_pos[t] >= threshold,
                      prefetch_at=lambda t, prev, nxt: nxt - ahead, gated=True)


def _policy_facts(ctx: PlanningContext, layout: PolicyLayout):
    """What every (threshold, ahead) shares: use positions, the forward activations, forward positions and
    each activation's producer position."""
    g = ctx.graph
    fwd = forward_of(g)
    pos = {o: i for i, o in enumerate(layout.order)}
    fwd_pos = {pos[o] for o in fwd}
    uses = use_positions(g, layout.order)
    producer = g.producer()
    acts = [t for t in g.used_tensors() if not g.is_persistent(t) and producer[t] >= 0
            and int(producer[t]) in fwd and g.tensors[t].kind == "activation"]
    prod_pos = {t: pos[int(producer[t])] for t in acts}
    return uses, acts, fwd_pos, prod_pos


def plan_tflms(ctx: PlanningContext) -> Plan:
    try:
        aheads = ctx.options.get("tflms_ahead", AHEAD_GRID)
        aheads = [int(x) for x in (aheads if isinstance(aheads, (list, tuple)) else [aheads])]
        grid = [int(x) for x in ctx.options.get("tflms_thresholds") or threshold_grid(ctx.graph.num_ops)]
    except (TypeError, ValueError) as e:
        raise TvmSwapError(f"bad tflms option: {e}") from None
    if not aheads or min(aheads) < 0 or not grid or min(grid) < 1:
        raise TvmSwapError("tflms_ahead must be ops >= 0 and tflms_thresholds positive op counts")
    from ..simulator import simulate

    layout = PolicyLayout.build(ctx)
    facts = _policy_facts(ctx, layout)
    # Settings often take the same gaps (thresholds past the longest edge, leads past the previous use):
    # the same gaps are the same walk, need and time, so each distinct policy is walked and simulated once.
    seen: dict = {}           # the policy's gaps -> (need, time or None, plan or None)

    def need_of(policy):
        key = tuple(sorted(policy.gaps.items()))
        if key not in seen:
            seen[key] = [policy_need(ctx, layout, policy), None, None]
        return seen[key]

    # The smallest threshold with the shortest lead offloads every gap any other setting does, each for no
    # longer, so nothing needs less memory: if it does not fit, nothing in the grid does.
    floor = need_of(tflms_policy(ctx, layout, min(grid), min(aheads), facts))[0][0]
    if floor > ctx.mem_limit:
        raise InfeasibleLimitError(
            ctx.mem_limit, floor, "tflms keeps weights, gradients and optimizer state on the GPU and swaps only "
            "activations; even swapping every forward-to-backward edge it needs this much")
    best, tried, least = None, [], None
    for ahead in aheads:
        for th in grid:
            policy = tflms_policy(ctx, layout, th, ahead, facts)
            hit = need_of(policy)
            need = hit[0]
            least = need[0] if least is None else min(least, need[0])
            if need[0] > ctx.mem_limit:
                tried.append({"threshold": th, "ahead": ahead, "need_bytes": int(need[0]), "time_s": None})
                continue
            if hit[2] is None:
                hit[2] = plan_policy(ctx, layout, policy, "tflms", "", need=need)
                hit[1] = float(simulate(ctx.graph, hit[2].actions, ctx.op_time, ctx.device).time_s)
            t, plan = hit[1], hit[2]
            tried.append({"threshold": th, "ahead": ahead, "need_bytes": int(need[0]), "time_s": t})
            if best is None or t < best[0]:
                best = (t, (th, ahead), plan)
    if best is None:
        raise InfeasibleLimitError(
            ctx.mem_limit, least, f"tflms keeps weights, gradients and optimizer state on the GPU and swaps "
            f"only activations; at its best threshold (of {grid}, swap-ins {aheads} ops ahead) it needs this much")
    _, (th, ahead), plan = best
    plan.search = {**plan.search, "threshold": th, "ahead": ahead, "grid": tried}
    return plan
