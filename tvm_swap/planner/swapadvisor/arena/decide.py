"""One genome's decisions and placement on one schedule under one limit (what plan_arena emits as actions
and the scorer packs for the simulator), with frozen tensors pinned when that fits, and the simulator's
judgement of a placement (`make_judge`) that cooling.py uses to pick between placements."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ....errors import PlanError
from ...graphindex import GraphIndex
from ...simulator import simulate_time
from ..packed_builder import pack_decisions
from . import tuning
from .capacity import arena_bytes_for
from .decisions import Decisions
from .feasibility import min_arena_bytes
from .genes import ArenaGenes
from .rounds import decide_and_place
from .walk import ArenaWalk


class Decided(NamedTuple):
    """decide_arena's result: the walk (its schedule's facts), the decisions and every stay's bytes."""
    walk: ArenaWalk
    decisions: Decisions
    offsets: list
    sizes: list
    capacity: int
    rounds: int


def decide_arena(gi: GraphIndex, schedule: np.ndarray, mem_limit: int, genes: ArenaGenes | None, op_time,
                 device) -> Decided:
    """plan_arena's decisions and placement. The scorer packs these directly (ArenaScorer.packed); plan_arena
    emits them as actions."""
    if gi.keep_updated:
        raise PlanError("arena plans use the exact periodicity rule: build the GraphIndex with keep_updated=False")
    arena_bytes = arena_bytes_for(gi, mem_limit)
    genes = genes if genes is not None else ArenaGenes.plain(gi.n_tensors)
    walk = ArenaWalk(gi, schedule)
    judge = None
    if op_time is not None and device is not None:
        walk.set_timing(op_time, device.d2h_bandwidth)
        judge = make_judge(gi, schedule, op_time, device)
    try:
        got = decide_and_place(walk, arena_bytes, genes, judge=judge)
    except PlanError:
        # placement is not monotone in the arena's size: a smaller arena that worked for the min feasible
        # limit still fits in this one. Only for the plain genome (Belady, no headroom, nothing kept: the
        # no-search plan, always a GA seed), so a feasible limit always gets a plan, while a searched genome
        # that does not fit is simply unfit: finding the min arena costs dozens of decide/place rounds (33 s
        # on BRNN-4-8K@128), which a GA worker would otherwise pay on its first unfit genome
        small = min_arena_bytes(gi) if genes.is_plain() else None
        if small is None or small >= arena_bytes:
            raise
        got = decide_and_place(walk, small, genes, judge=judge)
    kept = walk.end_kept
    if kept:
        # frozen persistent tensors the first pass keeps to its end: pin them for the whole iteration
        pinned, partial = _pin_most(walk, arena_bytes, genes, kept, judge)
        if pinned is not None and partial and judge is not None and judge(*pinned[:3]) > judge(*got[:3]):
            pinned = None               # a partial pin that the simulator finds slower than pinning nothing
        if pinned is not None:
            got = pinned
    return Decided(walk, *got)


def _pin_most(walk: ArenaWalk, arena_bytes: int, genes: ArenaGenes, kept: list[int], judge):
    """Decisions with as many of `kept` pinned as fit, those first used earliest first (a tensor left unpinned
    is read from the host before its use every iteration: for a late use that copy overlaps the ops before
    it, for an early one it stalls the start). Pinning all can fail where the first pass fit: a pinned tensor
    holds its bytes from the start, also at slots where the first pass had not brought it in yet, so at an
    early peak nothing is left to evict; pinning none then read every frozen weight from the host each
    iteration (ResNet-152 inference at 99.7% of its need: 241 MB copied in, 6.2x the ideal). Returns
    (Placed or None when even the smallest tried prefix does not fit, whether only some are pinned)."""
    try:
        return decide_and_place(walk, arena_bytes, genes, kept, judge), False
    except PlanError:
        pass
    first = walk.first_pos
    order = sorted(kept, key=lambda t: first[t])
    best, lo, hi = None, 0, len(order)          # pinning order[:lo] is known to fit (0: the first pass)
    for _ in range(tuning.PIN_STEPS):
        if hi - lo <= 1:
            break
        mid = (lo + hi) // 2
        try:
            best = decide_and_place(walk, arena_bytes, genes, order[:mid], judge)
            lo = mid
        except PlanError:
            hi = mid
    return best, True


def make_judge(gi: GraphIndex, schedule: np.ndarray, op_time, device):
    """(decisions, stay offsets, stay sizes) -> simulated seconds, through the scorer's packed fast path."""
    op_time = np.asarray(op_time, dtype=np.float64)
    nbytes = gi.graph.tensor_bytes().astype(np.float64)

    seen: dict = {}     # (decisions, offsets) -> (decisions, seconds): one evaluation judges a placement up to 3x

    def judge(d: Decisions, offsets, sizes) -> float:
        k = (id(d), tuple(offsets))
        hit = seen.get(k)
        if hit is not None and hit[0] is d:
            return hit[1]
        t = float(simulate_time(pack_decisions(len(schedule), schedule, d.out_stays, d.swap_outs, d.drops,
                                               d.swap_ins, gi.op_ptr, gi.op_tensors, gi.op_nin, op_time, nbytes,
                                               ranges=(offsets, sizes), recomputes=d.recomputes), device))
        seen[k] = (d, t)        # (d kept alive with it, so its id is not reused within this evaluation)
        return t
    return judge
