"""Whether a limit gets an arena plan on the default schedule, and the smallest limit that does (no op times
needed, so it runs before any profiling)."""
from __future__ import annotations

from ....errors import InfeasibleLimitError, PlanError
from ...graphindex import GraphIndex
from .capacity import arena_bytes_for, working_set_floor
from .genes import ArenaGenes
from .rounds import decide_and_place
from .walk import ArenaWalk

_MIN_ARENA: dict = {}   # id(GraphIndex) -> (GraphIndex, arena bytes of its min feasible limit)


def arena_fits(gi: GraphIndex, limit: int, walk: ArenaWalk | None = None) -> bool:
    """Whether the default schedule (`walk`, built for it when not given) gets an arena plan under `limit`
    (one decide/place, no op times; remembered with the graph per arena size)."""
    arena_bytes = arena_bytes_for(gi, limit)
    cache = gi.graph._cache.setdefault(("arena_fits", gi.alignment), {})   # arena bytes -> fits (one per graph)
    if arena_bytes not in cache:
        walk = walk if walk is not None else ArenaWalk(gi, gi.default_schedule())
        try:
            decide_and_place(walk, arena_bytes, ArenaGenes.plain(gi.n_tensors))
            cache[arena_bytes] = True
        except PlanError:
            cache[arena_bytes] = False
    return cache[arena_bytes]


def arena_min_limit(gi: GraphIndex, max_steps: int = 40) -> int:
    """The smallest limit (bytes) at which the default schedule gets an arena plan: the largest op's working
    set plus the workspace reserve, raised past whatever fragmentation the placement cannot avoid. Needs no
    op times, so it runs before any profiling."""
    if gi.keep_updated:
        raise PlanError("arena feasibility needs a GraphIndex built with keep_updated=False")
    # a search of dozens of decide/place rounds that depends only on the graph and the alignment: kept with
    # the graph's other derived facts, so the refusal check, the planner and a caller's floor share one
    cache = gi.graph._cache
    key = ("arena_min_limit", gi.alignment, max_steps)
    if key not in cache:
        try:
            cache[key] = _arena_min_limit(gi, max_steps)
        except InfeasibleLimitError as e:
            cache[key] = e
    hit = cache[key]
    if isinstance(hit, InfeasibleLimitError):
        raise InfeasibleLimitError(hit.mem_limit, hit.min_feasible, hit.reason, hit.exact, hit.reference_bytes)
    return hit


def _arena_min_limit(gi: GraphIndex, max_steps: int) -> int:
    a = gi.alignment
    lo = working_set_floor(gi) + gi.workspace
    walk = ArenaWalk(gi, gi.default_schedule())

    def fits(limit: int) -> bool:
        return arena_fits(gi, limit, walk)

    if fits(lo):
        return int(lo)
    bad, limit, step = lo, lo, max(a, lo // 256)
    for _ in range(max_steps):             # up in growing steps until a plan fits ...
        limit = (limit + step + a - 1) // a * a
        if fits(limit):
            break
        bad, step = limit, step * 2
    else:
        raise InfeasibleLimitError(limit, limit, "no arena placement found for the default schedule")
    while limit - bad > max(a, lo // 1024):   # ... then halve the gap (placement is not monotone: the
        mid = (bad + limit) // 2 // a * a     # result is a limit that was planned, not an interpolation)
        if mid <= bad:
            break
        if fits(mid):
            limit = mid
        else:
            bad = mid
    return int(limit)


def min_arena_bytes(gi: GraphIndex) -> int | None:
    """The arena bytes of the min feasible limit (None: none), remembered for the last graph index."""
    hit = _MIN_ARENA.get(id(gi))
    if hit is None or hit[0] is not gi:
        try:
            hit = (gi, arena_bytes_for(gi, arena_min_limit(gi)))
        except InfeasibleLimitError:
            hit = (gi, None)
        _MIN_ARENA.clear()
        _MIN_ARENA[id(gi)] = hit
    return hit[1]
