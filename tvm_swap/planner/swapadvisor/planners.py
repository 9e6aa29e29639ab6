"""The two SwapAdvisor planners, each `plan(ctx: PlanningContext) -> Plan` (unverified; api.plan_graph
verifies and predicts):

    plan_swapadvisor           genetic search over schedule and memory genome (ga.py), then the swap plan
                               of the best genome (arena/ for pool "arena", swapplan.py for "size-classes")
    plan_swapadvisor_nosearch  the swap planner on the default schedule (arena: Belady, no headroom;
                               size classes: a single-class pool); with recompute on, every eviction
                               that may be recomputed is

Option `recompute` ("on" / "off"; arena pool only): the search also chooses, per evicted tensor, to copy it
out and back or to drop it and recompute it (arena.ArenaGenes.recompute). The search then runs two islands
side by side (islands.py): the swap-only search itself, unchanged, and the hybrid search, which explores swap vs
recompute jointly with the schedule; the plan is the faster island's best. So at the same seed and generations
the hybrid is never slower than recompute off, by construction, for 1.6-2x its evaluations; under a
wall-clock budget the islands share it (islands.py says what holds then).

In the arena pool the search also runs the size-class search itself as one more island (islands.size_class_island;
planner option `size_class_island`, default on): a size-class plan is an arena plan whose objects never overlap, so
at the same seed and generations the arena plan is never slower than pool="size-classes" (the island keeps updated
params on the device where that pool would, _keep_updated_or_not, with its renaming as arena cycles). Measured on BRNN-4-8K@64, where
the arena search alone ended below the size-class search (0.759 vs 0.786 of ideal at 3 generations): the
size-class CLS/CNT search climbs from its best seed (0.677) faster than the arena genomes do from theirs (0.726);
the arena's own plans lose 2.1-2.7 GiB of the 14.9 GiB arena to placement fragmentation (islands.py).

What runs depends on what it can win (issue 28; small graphs had become 10x dearer to plan than a month before,
for plans 0-34% faster): the search stops once its best is at the lower bound (bounds.lower_bound, which holds
for recomputing plans too; within SMALL_STOP_GAP on graphs of up to polish.POLISH_MAX_OPS ops, where the seeds are
timed first and the random genomes skipped when one is there). On those small graphs the hybrid island, the
polish (of one genome) and the partly-cooled island (up to PARTLY_MAX_OPS ops) run only where the best genome is
more than EXTRAS_MIN_GAP off the bound: they could win at most that. Side by side with 533543e over 300 fuzz graphs of 3-60 ops at 3 generations
(bench/small_graphs.py, benchmarks/small_graphs.md, and with the evaluations compiled benchmarks/speed28.md): see
there for the CPU per plan and plan times.
Under a time budget the first generation is timed in the order of what it is likely worth (seed_order.py) and the
size-class island's keep-updated choice is made on the workers (islands.size_class_islands).

Defaults (RECOMPUTE_DEFAULT): on for `swapadvisor` in the arena pool (on the issue's points with 3
generations, benchmarks/recompute.md: 1.01x to 1.52x swap-only, 0.99x on
RNN-8-8K@256, where the two searches diverged); off for `swapadvisor-nosearch` (its fixed rule, recompute whatever
may be, is slower than swap-only on WResNet-152-10 at 8 GB and BRNN-4-8K) and for the size-class pool (not
implemented there: the size-class swap planner, swapplan.py, has no rebuild step, and the arena search already
starts from size-class plans laid out in the arena, ArenaSpace.class_seeds).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ...errors import TvmSwapError
from ...plan import Plan
from ..context import PlanningContext
from ..graphindex import GraphIndex, keep_updated_modes
from .arena import ArenaGenes, plan_arena, recompute_candidates
from .encoding import AllocationSpace
from .ga import (Evaluator, GASettings, Genome, GeneticSearch, best_genome, best_seed_time, evolve,
                 some_seed_within)
from ..bounds import lower_bound
from .islands import hybrid_islands, island_summary, partly_cooled_island, size_class_islands
from .polish import (POLISH_MAX_OPS, POLISH_SHARE, POLISH_TIME_SHARE, PolishTimes, fewer_recomputes,
                     polish_memory)
from .polish_classes import polish_classes
from .polish_schedule import deadline_move
from .swapplan import plan_swaps


def plan_swapadvisor(ctx: PlanningContext) -> Plan:
    """Genetic search over schedule and allocation (ga.py), then the swap plan of the best genome."""
    try:
        settings = GASettings.from_options(ctx.options)
    except (TypeError, ValueError) as e:
        raise TvmSwapError(f"bad swapadvisor option: {e}") from None
    recompute = recompute_option(ctx, "swapadvisor")
    t0 = time.perf_counter()
    if ctx.pool == "arena":
        ev = Evaluator(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment, pool="arena",
                       recompute=recompute)
    else:
        ev = _keep_updated_or_not(ctx)
    if recompute:      # two islands: the swap-only search itself, and the hybrid one it feeds (islands.py)
        islands = hybrid_islands(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment, ctx.seed,
                                 settings, ev)
    else:
        islands = [GeneticSearch(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment, ctx.seed,
                                 settings, evaluator=ev)]
    if ctx.pool == "arena" and size_class_island_option(ctx):
        # the size-class search as one more island: never slower than pool="size-classes" (islands.py)
        islands += size_class_islands(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment, ctx.seed,
                                      settings, ev, ctx.options.get("keep_updated"),
                                      choose_now=ctx.generations is not None)
    polish = ctx.pool == "arena" and polish_option(ctx)
    small = ev.gi.n_ops <= POLISH_MAX_OPS
    # the search stops at the lower bound (nothing can beat it; bounds.py holds for recomputing plans too), and
    # on small graphs the extras run only where the gap to it leaves them more than EXTRAS_MIN_GAP to win
    floor_s = lower_bound(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment)
    at_floor_s = floor_s * (1 + (SMALL_STOP_GAP if small else AT_BOUND_RTOL))
    # (as best_seed_time(...) > floor_s * (1 + EXTRAS_MIN_GAP), timing only the seeds it takes to know)
    far = not small or not some_seed_within(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment,
                                            ctx.seed, ev, floor_s * (1 + EXTRAS_MIN_GAP), islands[0].space)
    if not far:             # (swap-only's seeds are within EXTRAS_MIN_GAP of the bound: the hybrid could win less)
        islands = [isl for isl in islands if isl.name != "hybrid"]
    if polish and ev.gi.n_ops <= PARTLY_MAX_OPS and far:
        # small graphs: the search again with partly cooled placements, as an island (islands.py)
        islands.append(partly_cooled_island(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment,
                                            ctx.seed, settings, ev))
    search = islands[0]
    deadline = None
    recompute_first = recompute and ctx.generations is None and swap_only_falls_short(ctx)
    # the budget left once the islands and bounds are set up (seconds on 10^4 ops: the tight bound, the seeds)
    budget = max(0.1 * ctx.budget_s, ctx.budget_s - (time.perf_counter() - t0))
    if polish and ctx.generations is None:
        # a wall-clock budget holds for search and polish together: the polish gets what the search leaves
        deadline = t0 + (1 - FINAL_PLAN_SHARE) * ctx.budget_s
        budget *= 1 - POLISH_TIME_SHARE
    polished = {}

    def then(res, pool) -> None:        # the polish, on the search's workers
        plain_best = min((isl.pop[0].time_s for isl in islands if isl.pop and isl.name != "hybrid"),
                         default=math.inf)
        # (decided on the islands recompute off runs too, as off decides, so on stays never slower than off)
        if polish and not res.interrupted and plain_best > floor_s * (1 + (EXTRAS_MIN_GAP if small else 0)):
            # (a batch of the workers' width takes about one evaluation's wall time of the search: the last
            # batch's once the workers were up, where measured; the search's average counts their start, which
            # at 15 s on Inception-4@32 left the polish no time: 2.9 s per evaluation against 1.2)
            per_eval = res.batch_s or res.search_s * getattr(pool, "workers", 1) / max(1, res.evaluations)
            # (and the final plan, about 2 evaluations' time (BERT-large, BRNN-4-8K; Inception-4@32 at load 11:
            # 0.9 s against 1.5-2.8 s per batch), still fits the budget)
            end = None if deadline is None else min(deadline, t0 + ctx.budget_s - FINAL_PLAN_EVALS * per_eval)
            polished.update(_polish(ev, islands, res, small, end, PolishTimes(ev, pool, per_eval)))

    res = evolve(islands, budget_s=budget, generations=ctx.generations, workers=ctx.workers,
                 progress=ctx.progress, executor=ctx.options.get("executor", "processes"),
                 ray_address=ctx.options.get("ray_address"), stop_at_s=at_floor_s,
                 recompute_first=recompute_first, then=then, final_reserve=0 if deadline is not None else 3)
    if ctx.pool == "arena":
        sp = plan_arena(search.gi, res.best.schedule, ctx.mem_limit, res.best.alloc, ctx.op_time, ctx.device)
    else:
        sp = plan_swaps(search.gi, search.space, res.best.schedule, res.best.alloc)
    plan = sp.to_plan(ctx.graph, "swapadvisor", ctx.mem_limit, ctx.device)
    plan.search = {
        "search_s": round(res.search_s, 4), "generations": res.generations, "evaluations": res.evaluations,
        "seed": ctx.seed, "population": settings.population, "history": res.history,
        "seed_times_s": res.seed_times, "recompute": recompute,
    }
    if len(islands) > 1:
        plan.search["islands"] = island_summary(islands)
    if polished:
        plan.search["polish"] = polished
    if res.interrupted:         # Ctrl-C: the best plan so far, still verified and predicted by plan_graph
        plan.search["interrupted"] = True
    return plan


def _polish(ev: Evaluator, islands: list, res, small: bool, deadline: float | None = None, times=None) -> dict:
    """Polish the search's best genome in place (res.best; polish.py) and say what it did.

    Recompute on runs the islands recompute off runs (all but the hybrid one, unchanged) and polishes what off
    would, as off would, so recompute on stays never slower than off. Small graphs: the fastest genome the grid can
    move of those islands and of all, the grid coarse first, within POLISH_SHARE of all evaluations. Larger ones (a budget of POLISH_SHARE of the evaluations): the best
    of those islands within the share of their evaluations (what off polishes), and the overall best, when the
    hybrid island found it, within the share of all evaluations. Under a wall-clock budget (`deadline`, the
    search having run for 1 - POLISH_TIME_SHARE of it) no evaluation starts that would end after the deadline.
    `times`: where the polish evaluates (polish.PolishTimes: on the search's workers)."""
    plain = [isl for isl in islands if isl.name != "hybrid"]
    if small:
        # the fastest genome the grid can move only (each island's best doubled to quadrupled the polish's
        # evaluations; on 87 fuzz graphs the whole polish moved 5 plans: bench/small_graphs.py), which is
        # not the best where a size-class genome won (fuzz case 205: the grid took a swap-only genome 12% below it)
        # (off's start, and the hybrid's best where it is faster: on polishes what off polishes, and more)
        starts = []
        for group in (plain, islands):
            movable = [g for isl in group for g in isl.pop[:1] if _grid_moves(g.alloc)]
            if movable:
                g = min(movable, key=lambda g: g.time_s)
                if all(g is not s for s, _ in starts):
                    starts.append((g, None))
    else:
        # (under a budget that timed the recompute seeds first, the other islands may hold no genome yet)
        own = best_genome(plain) if any(isl.pop for isl in plain) else res.best
        starts = [(own, int(POLISH_SHARE * sum(isl.evaluations for isl in plain)))]
        if res.best is not own:
            starts.append((res.best, int(POLISH_SHARE * res.evaluations)))
            if deadline is not None:
                # under a wall-clock budget the best first (the polish may end after a few evaluations: the
                # plan is then the best polished, not off's; what holds under a budget, islands.py says)
                starts.reverse()
    from_s, n, flips, moves, reordered, dn = res.best.time_s, 0, 0, 0, False, 0
    spaces = {id(isl.pop[0]): isl.space for isl in islands if isl.pop}   # a start's genome space (its island's)
    share = int(POLISH_SHARE * res.evaluations)
    for g, budget in starts:
        space = spaces.get(id(g))
        # (small graphs: the grid coarse first, COARSE_SMALL, within the share of the search's evaluations: the
        # whole grid once cost a search of a few genomes (the fuzz's) several times its own evaluations)
        alloc, t, k = polish_memory(ev, g.schedule, g.alloc, g.time_s, share if budget is None else budget,
                                    deadline, times, small and COARSE_SMALL, near=deadline is not None)
        # (a small graph's grid is cheap: its flips get the share for themselves)
        left = share if budget is None else max(0, budget - k)
        alloc, t, f = fewer_recomputes(ev, g.schedule, alloc, t, left, deadline, times)
        # (a size-class genome, which the two above leave as it is: its CLS/CNT neighbours; large graphs only,
        # where the size-class island wins plans and an evaluation is worth its CPU: polish_classes.py)
        c = 0
        if not small:
            alloc, t, c = polish_classes(space, g.schedule, alloc, t, max(0, left - f), deadline, times)
        # (last, the polished genome on its schedule's update-deadline order where faster: polish_schedule.py)
        done = Genome(g.schedule, alloc, t)
        moved, d = deadline_move(ev, done, deadline, times or PolishTimes(ev))
        n, flips, moves, reordered, dn = n + k + f + c + d, flips + f, moves + c, reordered or moved is not done, dn + d
        if moved.time_s < res.best.time_s:
            res.best = moved
    out = {"evaluations": n, "from_s": from_s, "to_s": res.best.time_s, "recompute_flips": flips}
    if moves:
        out["class_evaluations"] = moves
    if reordered:
        out["deadline_order"] = True
    if dn:
        # (the deadline move's one evaluation per start comes beside the climb's share, not out of it: taking it
        # from the share would change the grid's and flips' plans)
        out["deadline_evaluations"] = dn
    return out


# small graphs: the polish's grid coarse first, then the whole grid around the best of it (polish_memory): on the
# fuzz's graphs of 3-60 ops far from the bound the whole grid was 58-118 of the ~200-300 evaluations of a plan and
# moved none of 16 plans (bench/small_graphs.py, 76 cases); on main it moved 5 of 87 by 0.03-0.8%
COARSE_SMALL = True

# small graphs (POLISH_MAX_OPS): the search also stops within this share of the lower bound, where the rest of
# it could win at most that much (an evaluation costs milliseconds there, and a plan should too)
SMALL_STOP_GAP = 0.01

# under a time budget the recompute seeds are timed first (seed_order.py) where swap-only plans can reach at most
# this share of the ideal time: the activation-aware bound (tight_bound.py, swap-only) says so before any
# evaluation (NasNet-25@16 at 16 GB: 0.31; BERT-large@32 0.95, Inception-4@32 0.99, BRNN-4-8K@64 1.0)
RECOMPUTE_FIRST_BELOW = 0.8


def swap_only_falls_short(ctx: PlanningContext) -> bool:
    """Whether no swap-only plan can reach RECOMPUTE_FIRST_BELOW of the ideal time (tight_bound.py)."""
    from ..bounds import ideal_time
    from ..tight_bound import tight_lower_bound

    tight = tight_lower_bound(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment)
    return tight > 0 and ideal_time(ctx.graph, ctx.op_time) < RECOMPUTE_FIRST_BELOW * tight


# small graphs: the hybrid island, the polish and the partly-cooled island run only where the best genome (the best
# swap-only seed, for the islands) is more than this share slower than the lower bound: what they can win is at
# most that gap, so a plan without them is at most this much slower than with them. Measured on 87 fuzz graphs of
# 3-60 ops at 3 generations (bench/small_graphs.py, benchmarks/small_graphs.md, base 533543e): the polish
# moved 5 plans (by 0.03-0.8%), the partly-cooled island won 3 (0.05-0.3%), the hybrid 3 (0.3-1.9%), for most of
# the CPU; the median gap is 0.6%. A gate on the hybrid's seeds instead (run it where a recompute seed beats the
# swap-only seeds) missed wins of 2.8-7.2% far from the bound (fuzz cases 356, 363, 377)
EXTRAS_MIN_GAP = 0.03
# ... and the partly-cooled island only on graphs of at most this many ops: its wins were measured on bench_gap's
# dags of 8-20 ops (dag110@0.4: 5.51 -> 5.27-5.37 ms; dag96, dag100: 2-3%), on the fuzz graphs only near the bound
# (0.05-0.3%), while its evaluations (up to arena.PARTLY_COOLED_TRIES placements each) were 40% of the CPU of the
# fuzz's far-off graphs of 24-60 ops (bench/small_graphs.py)
PARTLY_MAX_OPS = 24

def _grid_moves(alloc) -> bool:
    """Whether polish_memory can move these genes (arena genes, not a size-class genome)."""
    return isinstance(alloc, ArenaGenes) and alloc.classes is None


# the search ends once its best is within this relative distance of the lower bound (bounds.lower_bound): the
# simulator and the bound add the same terms in different orders, so "at the bound" is up to rounding
AT_BOUND_RTOL = 1e-9

# under a wall-clock budget, the final plan's time in evaluations (a batch of the workers' width) kept back after
# the polish, besides FINAL_PLAN_SHARE
FINAL_PLAN_EVALS = 2

# under a wall-clock budget, the share of it kept back after the polish for the final plan (planning, verifying,
# predicting: BERT-large@32 ended 0.5-1.0 s past a 60 s budget with none kept back)
FINAL_PLAN_SHARE = 0.05

# planner -> whether it recomputes when the `recompute` option is not given (arena pool only; see above)
RECOMPUTE_DEFAULT = {"swapadvisor": True, "swapadvisor-nosearch": False}


def recompute_option(ctx: PlanningContext, planner: str) -> bool:
    """The `recompute` planner option as a bool: not given (or None), the planner's default in the arena pool
    (RECOMPUTE_DEFAULT) and off with size classes; "on" with the size-class pool is refused (arena only)."""
    v = ctx.options.get("recompute")
    if v is None:
        return RECOMPUTE_DEFAULT[planner] and ctx.pool == "arena"
    on = _on_off("recompute", v)
    if on and ctx.pool != "arena":
        raise TvmSwapError("recompute is planned in the arena pool only: use pool='arena' (--pool arena) or "
                           "recompute='off'")
    return on


def size_class_island_option(ctx: PlanningContext) -> bool:
    """Planner option `size_class_island` (default on; arena pool): whether the arena search also runs the
    size-class search as an island (islands.size_class_island). Off reproduces the arena search alone (for
    ablations: before/after in one session)."""
    return _on_off("size_class_island", ctx.options.get("size_class_island", True))


def _keep_updated_or_not(ctx: PlanningContext):
    """The GA's evaluator, keeping updated params on the device (graphindex.ROLE_KEEP_*) or not, whichever
    gives the faster best seed genome (ga.best_seed_time): keeping them saves their copies when memory allows,
    but under pressure the kept ones can crowd out activations (e.g. BERT-large at 16 GB). The arena's
    size-class island makes the same choice (islands.size_class_island)."""
    modes = keep_updated_modes(ctx.options.get("keep_updated"))     # planner option: skip the choice
    evs = [Evaluator(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment, k) for k in modes]
    if len(evs) == 1 or not evs[0].gi.old_of.max(initial=-1) >= 0:
        return evs[0]
    best = [best_seed_time(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment, ctx.seed, ev)
            for ev in evs]
    return evs[0] if best[0] <= best[1] else evs[1]


def plan_swapadvisor_nosearch(ctx: PlanningContext) -> Plan:
    """The swap planner on the default (graph) schedule and a single-class pool (arena: Belady, no headroom)."""
    recompute = recompute_option(ctx, "swapadvisor-nosearch")
    if ctx.pool == "arena":
        gi = GraphIndex.of(ctx.graph, ctx.alignment, keep_updated=False)
        genes = None
        if recompute:     # the fixed heuristic: every eviction that may be recomputed is
            genes = ArenaGenes(0.0, np.zeros(gi.n_tensors, dtype=np.int64), recompute=recompute_candidates(gi))
        plan = plan_arena(gi, gi.default_schedule(), ctx.mem_limit, genes, ctx.op_time, ctx.device).to_plan(
            ctx.graph, "swapadvisor-nosearch", ctx.mem_limit, ctx.device)
        plan.search = {"recompute": recompute}
        return plan
    gi = GraphIndex.build(ctx.graph, ctx.alignment)
    space = AllocationSpace(gi, ctx.mem_limit)
    sp = plan_swaps(gi, space, gi.default_schedule(), space.single_class())
    plan = sp.to_plan(ctx.graph, "swapadvisor-nosearch", ctx.mem_limit, ctx.device)
    plan.search = {"recompute": False}
    return plan


def polish_option(ctx: PlanningContext) -> bool:
    """Planner option `polish` (default on; arena pool): whether the search's best genome gets its scalar memory
    genes polished on a grid and its recomputes turned back into swaps where that is faster (polish.py; above
    polish.POLISH_MAX_OPS ops within a share of the search's evaluations, see _polish), and, on graphs of up to
    POLISH_MAX_OPS ops, the search runs the partly-cooled island too (islands.partly_cooled_island). Off
    reproduces the search without any of these (for ablations)."""
    return _on_off("polish", ctx.options.get("polish", True))


def _on_off(name: str, v) -> bool:
    """A planner option given as "on"/"off" (any case) or a bool."""
    on = {"on": True, "off": False, True: True, False: False}.get(v.lower() if isinstance(v, str) else v)
    if on is None:
        raise TvmSwapError(f"bad swapadvisor option {name}={v!r}: use 'on' or 'off'")
    return on
