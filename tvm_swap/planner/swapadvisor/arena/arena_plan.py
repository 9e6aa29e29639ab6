"""The arena plan of one schedule and genome under a limit (plan_arena): the decisions and placement
(decide.py), one arena object per distinct (offset, size), the renaming between iterations (renaming.py) and
the actions (actions.py). A class genome plans as SwapAdvisor's size-class pool laid out in the arena."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ....errors import PlanError
from ....plan import Arena
from ...graphindex import GraphIndex
from .actions import plan_actions
from .capacity import arena_bytes_for
from .decide import decide_arena
from .genes import ArenaGenes, class_genome
from .renaming import permutation_cycles, renaming_cycles
from .rounds import forget_rounds


@dataclass
class ArenaPlan:
    """A planned iteration in arena mode (what SwapPlan is for size classes)."""
    schedule: np.ndarray
    arena: Arena
    tensor_class: np.ndarray
    initial_residents: list
    actions: list
    stats: dict = field(default_factory=dict)
    inplace: list = field(default_factory=list)     # (op, out, in) run in place (Plan.inplace)

    @property
    def pool(self) -> Arena:
        return self.arena

    def to_plan(self, graph, planner: str, mem_limit: int, device):
        from ....plan import Plan

        return Plan(graph_name=graph.name, graph_fingerprint=graph.fingerprint(), planner=planner,
                    mem_limit=int(mem_limit), device=device.to_dict(), schedule=[int(o) for o in self.schedule],
                    pool=self.arena, tensor_class=[int(c) for c in self.tensor_class],
                    initial_residents=[(int(t), int(o)) for t, o in self.initial_residents],
                    actions=list(self.actions), inplace=[tuple(int(x) for x in p) for p in self.inplace])


def plan_arena(gi: GraphIndex, schedule, mem_limit: int, genes: ArenaGenes | None = None, op_time=None,
               device=None) -> ArenaPlan:
    """The arena plan of `schedule` under `mem_limit` (see decide.py, rounds.py, walk.py). Raises PlanError when the
    walk or the placement cannot fit. With `op_time` and `device`, placement keeps a swapped-out tensor's
    bytes until its copy is likely done (cooling.cooled_lasts). Recompute genes never make a limit infeasible: when
    their plan does not fit (rebuilds hold their inputs, which can fragment a tight arena), the same genes
    without recompute are planned."""
    if isinstance(genes, ArenaGenes) and genes.recompute is not None and genes.recompute.any():
        try:
            return _plan_arena(gi, schedule, mem_limit, genes, op_time, device)
        except PlanError:
            genes = genes.copy()
            genes.recompute = None
    return _plan_arena(gi, schedule, mem_limit, genes, op_time, device)


def _plan_arena(gi: GraphIndex, schedule, mem_limit: int, genes: ArenaGenes | None, op_time, device) -> ArenaPlan:
    if gi.keep_updated:
        raise PlanError("arena plans use the exact periodicity rule: build the GraphIndex with keep_updated=False")
    schedule = np.asarray(schedule, dtype=np.int64)
    classes = class_genome(genes)
    if classes is not None:
        return _plan_with_classes(gi, schedule, mem_limit, classes)
    walk, d, offsets, sizes, capacity, rounds = decide_arena(gi, schedule, mem_limit, genes, op_time, device)
    forget_rounds()        # the feasibility check's decisions are used (or not): free them for what follows
    arena_bytes = arena_bytes_for(gi, mem_limit)
    # objects: one per distinct (offset, size)
    obj_of: dict = {}
    stay_obj = []
    for off, sz in zip(offsets, sizes):
        stay_obj.append(obj_of.setdefault((off, sz), len(obj_of)))
    objs = sorted(obj_of, key=obj_of.get)
    swaps = renaming_cycles(d, offsets, sizes, obj_of, objs)
    arena = Arena(arena_bytes, [o for o, _ in objs], [s for _, s in objs], gi.alignment, gi.workspace, swaps)
    actions = plan_actions(walk, d, stay_obj, offsets, sizes)
    tclass = np.where(gi.used, 0, -1).astype(np.int64)
    stats = {"capacity_bytes": int(capacity), "rounds": int(rounds), "placed_bytes": int(max(
        (o + s for o, s in zip(offsets, sizes)), default=0)), "evictions": int(d.evicted),
        "recomputes": len(d.recomputes)}
    return ArenaPlan(schedule, arena, tclass, [(t, stay_obj[sid]) for t, sid in d.pinned], actions, stats,
                     list(d.inplace))


def _plan_with_classes(gi: GraphIndex, schedule: np.ndarray, mem_limit: int, alloc) -> ArenaPlan:
    """SwapAdvisor's size-class plan (swapplan.plan_swaps) with its pool's objects laid side by side in the
    arena: disjoint ranges, so ArenaActionBuilder would give each arrival the same deps as ActionBuilder (the
    last drop of its object) and the actions carry over unchanged. A plain Allocation plans with no updated param
    kept (gi, keep_updated=False); a KeptAllocation as pool="size-classes" keeping them (a keep_updated index),
    whose renaming of objects within a class between iterations (Plan.next_object_map) becomes the arena's
    renaming cycles: objects of one class have equal sizes and overlap nothing, so any permutation of them maps
    the layout onto itself. The plan and its time are the size-class plan's either way."""
    from ....plan import class_backing
    from ..encoding import AllocationSpace, KeptAllocation, class_index
    from ..swapplan import plan_swaps

    if gi.keep_updated:
        raise PlanError("arena plans use the exact periodicity rule: build the GraphIndex with keep_updated=False")
    kept = isinstance(alloc, KeptAllocation)
    cgi = class_index(gi, alloc)
    sp = plan_swaps(cgi, AllocationSpace(cgi, mem_limit), schedule, alloc)
    pool = sp.pool
    arena_bytes = arena_bytes_for(gi, mem_limit)
    offs = [int(x) for x in pool.object_offset()]
    sizes = [int(x) for x in pool.object_bytes()]
    if max((o + z for o, z in zip(offs, sizes)), default=0) > arena_bytes:
        raise PlanError("the size-class pool does not fit in the arena")
    swaps = []
    if kept and sp.initial_residents:
        g = gi.graph
        swaps = permutation_cycles(class_backing(pool, sp.initial_residents, sp.actions, g.updates,
                                                  g.op_outputs()))
    arena = Arena(arena_bytes, offs, sizes, gi.alignment, gi.workspace, swaps)
    tclass = np.where(gi.used, 0, -1).astype(np.int64)
    stats = {"size_classes": [int(x) for x in pool.class_bytes], "class_counts": [int(x) for x in pool.class_count],
             "keep_updated": kept, "wrap": bool(cgi.early_out)}
    return ArenaPlan(schedule, arena, tclass, list(sp.initial_residents), list(sp.actions), stats)
