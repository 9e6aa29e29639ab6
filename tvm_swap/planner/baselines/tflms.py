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

Checked against IBM's source (github.com/IBM/tensorflow-large-model-support, `lms/lms.py` and
`tensorflow_large_model_support/lms.py`, class LMS), which this model follows or restricts, never exceeds:
- what moves: every op output of rank > 1 whose consumer is more than `swapout_threshold` topological levels
  away (`_insert_swap_nodes`: `_get_order(op) - src_op_order > self._swapout_threshold`), variables, reads and
  constants excluded: one swap-out per tensor, the near consumers keep the original. Here only forward-to-backward
  edges of activations (no long forward or backward edges are taken at the thresholds that win);
- swap-ins: one per group of far consumers whose levels lie within `swapin_groupby` of each other (`_groupby`,
  `_insert_swap_nodes_for_ts`), so a tensor read by k far groups crosses back k times and may sit on the GPU
  twice. Here a gap is merged into the previous use when the swap-in would start before it, i.e. groupby = ahead:
  one point of TFLMS's (ahead, groupby) space, which the tool's own tuner reaches (it tries the largest groupby
  first); a groupby below ahead (two copies of a tensor at once) is not representable in this walker;
- when: a control edge from an op at a level below `dest level - swapin_ahead` on a path to the consumer
  (`_do_direct_order`, `_search_by_level`: at most 10 levels further back, else the swap-in is synchronous);
  sync_mode 0 (default): copies on TensorFlow's own copy streams, overlapping compute. Here: gated, async;
- tuning: by hand, or TFLMS 2's auto-tuner (`_search_params`): with swapin_ahead 1 and groupby 0, a binary
  search of swapout_threshold over [1, levels] for the largest one its memory simulator accepts, then of
  swapin_ahead over [1, levels] for the largest one that still fits, then groupby. A coarse grid alone misses
  that largest fitting threshold (WResNet-152-4 batch 16 at 16 GB: the grid's best, ops/2, left a third of the
  memory unused, 0.622 of ideal; the search's threshold 2705 gives 0.881 at a lead of 1 and 0.942 at its lead of
  83), so both run here and the faster plan is kept (`tflms_autotune`, default on; off: the grid alone). The
  lead is searched with groupby = lead, not TFLMS's 0, so it may come out longer than TFLMS's tuner would find.
Not modelled, and the likely rest of the paper's "at least 3x" (SwapAdvisor runs in MXNet, TFLMS in TensorFlow
1.x): TensorFlow's BFC allocator (fragmentation; and `MinSystemMemory` in its GPU device factory keeps
max(300 MiB, 5-6%) of the free memory from it), its executor's per-op and per-copy overheads, kernel speed
differences between the frameworks; our simulator gives every planner the same roofline kernels and perfect
stream overlap.
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


def autotune(fits, lo_threshold: int, lo_ahead: int, hi: int) -> tuple[int, int] | None:
    """TFLMS 2's `_search_params`: the largest threshold that fits at the shortest lead, then the largest lead that
    still fits at it, each by the tool's binary search over [lo, hi] (it assumes fitting is monotone, as here);
    None if even the most aggressive setting does not fit. `fits(threshold, ahead)`: whether its need fits."""
    if not fits(lo_threshold, lo_ahead):
        return None

    def largest(ok, lo):
        best, left, right = lo, lo + 1, hi
        while left <= right:
            mid = (left + right) // 2
            if ok(mid):
                best, left = mid, mid + 1
            else:
                right = mid - 1
        return best

    threshold = largest(lambda th: fits(th, lo_ahead), lo_threshold)
    return threshold, largest(lambda ah: fits(threshold, ah), lo_ahead)


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
    v = ctx.options.get("tflms_autotune", True)
    tune = {"on": True, "off": False, True: True, False: False}.get(v.lower() if isinstance(v, str) else v)
    if tune is None:
        raise TvmSwapError(f"bad tflms option tflms_autotune={v!r}: use 'on' or 'off'")
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

    def consider(th: int, ahead: int) -> dict:
        nonlocal best, least
        policy = tflms_policy(ctx, layout, th, ahead, facts)
        hit = need_of(policy)
        need = hit[0]
        least = need[0] if least is None else min(least, need[0])
        if need[0] > ctx.mem_limit:
            return {"threshold": th, "ahead": ahead, "need_bytes": int(need[0]), "time_s": None}
        if hit[2] is None:
            hit[2] = plan_policy(ctx, layout, policy, "tflms", "", need=need)
            hit[1] = float(simulate(ctx.graph, hit[2].actions, ctx.op_time, ctx.device).time_s)
        t, plan = hit[1], hit[2]
        if best is None or t < best[0]:
            best = (t, (th, ahead), plan)
        return {"threshold": th, "ahead": ahead, "need_bytes": int(need[0]), "time_s": t}

    for ahead in aheads:
        for th in grid:
            tried.append(consider(th, ahead))
    tuned = None
    if tune:
        # The grid's smallest setting is the search's floor (it needs the least, see above); a lead past the
        # graph takes no gap at all, so the graph's op count bounds both searches.
        found = autotune(lambda th, ah: need_of(tflms_policy(ctx, layout, th, ah, facts))[0][0] <= ctx.mem_limit,
                         min(grid), min(aheads), ctx.graph.num_ops)
        tuned = consider(*found) if found else None
    if best is None:
        raise InfeasibleLimitError(
            ctx.mem_limit, least, f"tflms keeps weights, gradients and optimizer state on the GPU and swaps "
            f"only activations; at its best threshold (of {grid}, swap-ins {aheads} ops ahead) it needs this much")
    _, (th, ahead), plan = best
    plan.search = {**plan.search, "threshold": th, "ahead": ahead, "grid": tried, "autotune": tuned}
    return plan
