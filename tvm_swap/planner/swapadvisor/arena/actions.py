"""A plan's actions from one walk's decisions and the stays' byte ranges.

The rule (ArenaActionBuilder, the tested reference): every arrival waits for the drops of the previous tenants
of every byte it takes, so address reuse follows happens-before (what the verifier checks, with its own code).
`plan_actions` builds the same actions with the deps packed_builder.pack_decisions derives (numpy), which is what
plan_arena uses; `emit_actions` goes through the builder (tests compare the two)."""
from __future__ import annotations

import numpy as np

from ....errors import PlanError
from ....plan import Arena
from ...builder import ActionBuilder, copies_after_steps
from ..packed_builder import pack_decisions
from .decisions import Decisions


class SegmentPaint:
    """A value for every byte of the arena, changed by painting ranges that start and end at fixed cut points
    (the objects' bounds), e.g. 'the last drop that freed each byte': one value per elementary segment between
    cuts, so paint and values are list slices (a map of coalesced segments paid a list insert per paint, which
    made emit_actions quadratic: 22 CPU s at 10^5 ops). values(a, b) lists them in address order."""

    def __init__(self, cuts, initial=-1):
        self.pos = {x: k for k, x in enumerate(sorted(set(cuts)))}
        self.vs = [initial] * max(len(self.pos) - 1, 0)

    def values(self, a: int, b: int) -> list:
        return self.vs[self.pos[a]:self.pos[b]]

    def paint(self, a: int, b: int, v) -> None:
        i, j = self.pos[a], self.pos[b]
        self.vs[i:j] = [v] * (j - i)


class ArenaActionBuilder(ActionBuilder):
    """ActionBuilder over arena objects: an arrival waits for the drops that last freed any of its bytes."""

    def __init__(self, graph, arena: Arena):
        super().__init__(graph, arena.num_objects)
        self.off = arena.offsets
        self.size = arena.sizes
        self.freed = SegmentPaint(list(self.off) + [o + z for o, z in zip(self.off, self.size)], -1)

    def _free_deps(self, obj: int) -> list[int]:
        a = self.off[obj]
        return [d for d in dict.fromkeys(self.freed.values(a, a + self.size[obj])) if d >= 0]

    def _mark_free(self, obj: int, drop_action: int) -> None:
        a = self.off[obj]
        self.freed.paint(a, a + self.size[obj], drop_action)



def plan_actions(walk, d: Decisions, stay_obj: list[int], offsets, sizes) -> list:
    """The plan's actions: what `emit_actions` builds through ArenaActionBuilder, with the deps that
    packed_builder.pack_decisions derives for the same decisions and byte ranges (numpy: one sort per kind
    of event), so only the Action objects are made one by one here (ArenaActionBuilder cost ~10 us per
    action, 7.8 CPU s at 10^5 ops). The order is emit_actions'; tests/planner/swapadvisor/test_arena.py checks
    that both give the same actions, and the verifier checks the plan either way."""
    from ....plan import Action, ActionKind
    from ...simulator import KIND_CODE

    gi, n = walk.gi, walk.n
    zeros = np.zeros(max(gi.n_ops, gi.n_tensors), dtype=np.float64)
    packed = pack_decisions(n, np.asarray(walk.sched, dtype=np.int64), d.out_stays, d.swap_outs, d.drops,
                            d.swap_ins, gi.op_ptr, gi.op_tensors, gi.op_nin, zeros, zeros,
                            ranges=(offsets, sizes), recomputes=d.recomputes)
    ptr, dep = packed.dep_indptr.tolist(), packed.dep_indices.tolist()
    post_out, post_drop, post_in = copies_after_steps(n, d.swap_outs, d.drops,
                                                      [(q, t, stay_obj[sid]) for q, t, sid in d.swap_ins])
    where = {t: stay_obj[sid] for t, sid in d.pinned}      # tensor -> its object (what a swap-out names)
    pre_rc: list[list[tuple[int, tuple]]] = [[] for _ in range(n)]
    for s, op, sids in d.recomputes:
        pre_rc[s].append((op, tuple(stay_obj[x] for x in sids)))
    ops = gi.graph.ops
    sched = walk.sched
    COMPUTE, RECOMPUTE, SWAP_OUT, DROP, SWAP_IN = (ActionKind.COMPUTE, ActionKind.RECOMPUTE, ActionKind.SWAP_OUT,
                                                   ActionKind.DROP, ActionKind.SWAP_IN)
    out = []
    for s in range(-1, n):
        if s >= 0:
            for op, objs in pre_rc[s]:
                k = len(out)
                out.append(Action(RECOMPUTE, op, -1, -1, tuple(dep[ptr[k]:ptr[k + 1]]), objs))
                for t, o in zip(ops[op].outputs, objs):
                    where[t] = o
            op = sched[s]
            objs = tuple(stay_obj[x] for x in d.out_stays[s])
            k = len(out)
            out.append(Action(COMPUTE, op, -1, -1, tuple(dep[ptr[k]:ptr[k + 1]]), objs))
            for t, o in zip(ops[op].outputs, objs):
                where[t] = o
        j = s + 1
        for t in post_out[j]:
            k = len(out)
            out.append(Action(SWAP_OUT, -1, t, where[t], tuple(dep[ptr[k]:ptr[k + 1]])))
        for t in post_drop[j]:
            k = len(out)
            out.append(Action(DROP, -1, t, where.pop(t), tuple(dep[ptr[k]:ptr[k + 1]])))
        for t, o in post_in[j]:
            k = len(out)
            out.append(Action(SWAP_IN, -1, t, o, tuple(dep[ptr[k]:ptr[k + 1]])))
            where[t] = o
    kinds = np.fromiter((KIND_CODE[a.kind] for a in out), dtype=np.int8, count=len(out))
    if len(out) != len(packed.kind) or not np.array_equal(kinds, packed.kind):
        raise PlanError("planner bug: the arena's actions and their packed deps are in different orders")
    return out


def emit_actions(walk, d: Decisions, arena: Arena, stay_obj: list[int]):
    """Every decision through ArenaActionBuilder in plan order (as swapplan._emit: after compute i come its
    swap-outs, drops and swap-ins; swap-ins in need order, never issued before the one needed earlier).
    The reference for `plan_actions` (tests), which plan_arena uses."""
    n = walk.n
    b = ArenaActionBuilder(walk.gi.graph, arena)
    post_out, post_drop, post_in = copies_after_steps(n, d.swap_outs, d.drops,
                                                      [(q, t, stay_obj[sid]) for q, t, sid in d.swap_ins])
    for t, sid in d.pinned:
        b.place_initial(t, stay_obj[sid])
    pre_rc: list[list[tuple[int, list]]] = [[] for _ in range(n)]
    for s, op, sids in d.recomputes:    # in rebuild order: a chain's inputs before what reads them
        pre_rc[s].append((op, [stay_obj[x] for x in sids]))
    sched = walk.sched
    over: dict = {}
    for op, y, x in d.inplace:
        over.setdefault(op, {})[y] = x
    for s in range(-1, n):
        if s >= 0:
            for op, objs in pre_rc[s]:
                b.recompute(op, objs)
            b.compute(sched[s], [stay_obj[x] for x in d.out_stays[s]], over.get(sched[s]))
        j = s + 1
        for t in post_out[j]:
            b.swap_out(t)
        for t in post_drop[j]:
            b.drop(t)
        for t, o in post_in[j]:
            b.swap_in(t, o)
    return b
