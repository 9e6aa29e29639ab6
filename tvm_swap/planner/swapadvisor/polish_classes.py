"""After the search: a size-class genome (the paper's CLS/CNT Allocation, the size-class island's) moved to its
best neighbour, one step at a time, its schedule fixed.

Why: the size-class island's operators redraw counts and flip class boundaries at random (AllocationSpace.mutate),
so on a large graph 3 generations leave the pool a step or two from a faster one. The arena polish (polish.py)
moves only arena genes, so where the size-class island won (BRNN-4-8K@64 at 16 GB: its genome is the plan) nothing
polished it. Measured on BRNN-4-8K@64 at 16 GB (seed 0): from the minimal pool seed (0.677 of ideal) 0.746 after
13 evaluations; from the 3-generation search's winner (0.7859) only 0.7863 (17 evaluations: it was a step from
a local optimum of these moves).

The neighbours of an Allocation: one object more or one fewer in a class (repaired to the budget: the other
classes give up bytes, AllocationSpace.repair), then each class boundary split or merged (the counts kept per
size), last the same pool over the wrap index (wrap_move). Each is simulated; the first faster one becomes the
best and its neighbours are walked next (first improvement), within `max_evals` evaluations and, under a wall-clock budget, no evaluation started that would end
after the deadline. Never slower than the genome it starts from: a neighbour replaces it only when faster, and the
plan is made from it like any other genome (verified by plan_graph).
"""
from __future__ import annotations

from .encoding import Allocation, WrapAllocation, cls_from_steps, cls_steps


def neighbours(space, a: Allocation) -> list[Allocation]:
    """One object more or fewer per class, then each class boundary flipped (split or merge), all repaired, each
    of `a`'s kind (plain, kept or wrap: the kinds share sizes, so one space repairs them all); last the same pool
    over the other index (wrap_move): last, so the climb takes it only where no other neighbour is faster, and it
    ends no slower than the climb without it (the same steps up to that point)."""
    kind = type(a)

    def fix(cls, cnt) -> Allocation:
        r = space.repair(cls, cnt)
        return r if type(r) is kind else kind(r.cls, r.cnt)

    out = []
    for c in range(a.num_classes):
        for d in (1, -1):
            cnt = a.cnt.copy()
            cnt[c] = max(1, int(cnt[c]) + d)
            out.append(fix(a.cls, cnt))
    steps, per_size = cls_steps(a.cls), a.cnt[a.cls]
    for i in range(1, len(steps)):
        s = steps.copy()
        s[i] = 1 - s[i]
        cls = cls_from_steps(s)
        out.append(fix(cls, space._per_class_mean(cls, per_size)))
    return out + wrap_move(space, a)


def wrap_move(space, a: Allocation) -> list[Allocation]:
    """A plain Allocation as a WrapAllocation of the same classes and counts (the updated params made last and
    read first kept across the iteration boundary: planner/wrap_keep.py), and back; [] where the graph has no
    wrap index, `a` is a KeptAllocation, or updated params may not be kept (graphindex.KEEP_UPDATED off, or the
    planner option keep_updated=False: islands.size_class_island marks its space). On BRNN-4-8K@64 (16 GB, 3 generations, seed 0) the polished plan
    13.98 s -> 13.47 s: its 10 GiB of first-layer and embedding updates no longer copied out after the last
    kernel, nor read back before the first."""
    from ..graphindex import KEEP_UPDATED
    from ..wrap_keep import wrap_index

    if not KEEP_UPDATED or not getattr(space, "wrap_ok", True):     # (keep_updated off: no param kept)
        return []
    if type(a) is Allocation:
        gi = space.gi
        return [WrapAllocation(a.cls.copy(), a.cnt.copy())] if wrap_index(gi.graph, gi.alignment) is not None else []
    if type(a) is WrapAllocation:
        return [Allocation(a.cls.copy(), a.cnt.copy())]
    return []


def polish_classes(space, schedule, alloc, time_s: float, max_evals: int, deadline: float | None,
                   times) -> tuple[object, float, int]:
    """(genome, its time, evaluations made): `alloc` (simulated `time_s` on `schedule`) moved to faster neighbours
    while one is found (see the module docstring). `space`: the AllocationSpace `alloc` was bred in; `times`: a
    polish.PolishTimes (a batch of its width at a time; the neighbours after the first faster one in a batch are
    not counted, as one at a time would not have timed them). Anything but an Allocation is returned as it is."""
    if not isinstance(alloc, Allocation) or space is None or max_evals <= 0:
        return alloc, time_s, 0
    best, best_t, n = alloc, time_s, 0
    seen = {alloc.key()}          # timed (a neighbour of an earlier best is not timed again)

    def fresh(a: Allocation) -> list[Allocation]:
        out = {}
        for b in neighbours(space, a):
            if b.key() not in seen:
                out.setdefault(b.key(), b)
        return list(out.values())

    cands, i = fresh(best), 0
    while i < len(cands) and n < max_evals and times.may_start(deadline):
        batch = cands[i:i + min(times.width, max_evals - n)]
        moved = False
        for g, t in zip(batch, times(schedule, batch)):
            n += 1
            i += 1
            seen.add(g.key())
            if t < best_t:
                best, best_t, moved = g, t, True
                break
        if moved:
            cands, i = fresh(best), 0
    return best, best_t, n
