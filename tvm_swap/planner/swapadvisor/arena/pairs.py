"""Kept pairs: updated params that stay on the device between iterations (the old value from the start to its
last read, its update from its production to the end), and which of them a capacity affords."""
from __future__ import annotations

import numpy as np

from ...graphindex import GraphIndex
from . import tuning


def pair_candidates(gi: GraphIndex) -> list[tuple[int, int]]:
    """(param, its update) pairs that may stay on the device: a persistent tensor read from the host whose
    update has the same aligned size."""
    g = gi.graph
    out = []
    for new, old in g.updates.items():
        if gi.produced[new] and not gi.produced[old] and gi.used[old] and gi.used[new] \
                and gi.size[new] == gi.size[old] and g.is_persistent(old):
            out.append((int(old), int(new)))
    return sorted(out)


class PairFacts:
    """What choose_pairs reads of one schedule, whatever the capacity and keep gene: the candidates, each op's
    own bytes by slot, the slots touching each candidate's tensors, the candidates in order of first use. A walk
    keeps them (facts_of): an evaluation chooses pairs at each capacity it tries, on one schedule."""

    def __init__(self, gi: GraphIndex, schedule: np.ndarray):
        self.cands = cands = pair_candidates(gi)
        n = self.n = gi.n_ops
        if not cands or n == 0:
            return
        pos = np.empty(n, dtype=np.int64)
        pos[schedule] = np.arange(n)
        per_op = np.add.reduceat(gi.size[gi.op_tensors], gi.op_ptr[:-1]) if len(gi.op_tensors) else np.zeros(n)
        per_op = np.where(np.diff(gi.op_ptr) > 0, per_op, 0)
        self.load = np.zeros(n, dtype=np.int64)
        self.load[pos] = per_op               # per slot: the op's own bytes
        self.floor = int(per_op.max(initial=0))
        touch_pos = np.repeat(pos, np.diff(gi.op_ptr))
        self.slots_of = slots_of = {}         # tensor -> slots of the ops touching it
        cand_t = {t for pr in cands for t in pr}
        for k in np.flatnonzero(np.isin(gi.op_tensors, list(cand_t))).tolist():
            slots_of.setdefault(int(gi.op_tensors[k]), []).append(int(touch_pos[k]))
        self.by_first = sorted(cands, key=lambda pr: (min(slots_of.get(pr[0], [n])), pr[0]))


def facts_of(walk) -> PairFacts:
    """The walk's schedule's PairFacts, computed on first use."""
    f = walk.__dict__.get("_pair_facts")
    if f is None:
        f = walk._pair_facts = PairFacts(walk.gi, np.asarray(walk.sched, dtype=np.int64))
    return f


def choose_pairs(gi: GraphIndex, schedule: np.ndarray, capacity: int, keep: float,
                 facts: PairFacts | None = None) -> list[tuple[int, int]]:
    """The pairs kept under `keep`, those first used earliest first (their copies would sit at the start of
    the iteration, where nothing overlaps them), each taken while every op still fits beside the kept bytes:
    a kept pair holds its old value from the start to its last read and its update from its production to
    the end, so at each slot the op's own bytes plus the kept bytes it does not touch stay within
    floor + keep x (capacity - floor) (floor: the largest op's own bytes). keep = 1 keeps as many as the
    walk can keep without evicting any of them. keep in (1, 2]: after those, more pairs while the first
    and the last op still fit beside them (within floor + (keep - 1) x (capacity - floor)): the walk evicts
    a kept pair's old value or update when room is short (its update is then copied out, and brought back
    by the end). `facts`: the schedule's PairFacts (facts_of(walk)), computed here when not given."""
    f = PairFacts(gi, schedule) if facts is None else facts
    cands, n = f.cands, f.n
    if not cands or keep <= 0 or n == 0:
        return []
    load = f.load.copy()                      # per slot: the op's own bytes, then the kept bytes beside it
    floor, slots_of = f.floor, f.slots_of
    budget = floor + keep * max(0, int(capacity) - floor)
    out = []
    # zone bytes: with rotation (tuning.ROTATE_KEPT) each group of equal size holds as many slots as its old values
    # and updates alive at once need (layout.rotation_layout); ping-pong pairs hold two zones each
    zone_room = int(capacity) if tuning.ROTATE_KEPT else int(capacity) // 2
    groups: dict = {}                          # size -> [pairs kept, slots, alive count per slot]

    def slot_cost(sz: int, lr: int, pr: int) -> int:
        """The zone bytes that keeping one more pair of `sz` with these spans adds (as the load, a slot's free
        spans are room for other stays: see layout.place_with_pairs)."""
        if not tuning.ROTATE_KEPT:
            return sz
        k, slots, cnt = groups.get(sz) or (0, 0, None)
        if cnt is None:
            need = 2 if pr <= lr else 1
        else:
            both = (pr, lr + 1) if pr <= lr else (lr + 1, lr + 1)
            need = max(k + 1, _range_max(cnt, 0, min(lr + 1, pr)) + 1, _range_max(cnt, *both) + 2,
                       _range_max(cnt, max(lr + 1, pr), n) + 1, _range_max(cnt, lr + 1, pr))
        return (need - slots) * sz

    def add_slots(sz: int, lr: int, pr: int, extra: int) -> None:
        if not tuning.ROTATE_KEPT:
            return
        k, slots, cnt = groups.get(sz) or (0, 0, np.zeros(n, dtype=np.int64))
        cnt[:lr + 1] += 1
        cnt[pr:] += 1
        groups[sz] = [k + 1, slots + extra // sz, cnt]

    for old, new in f.by_first:
        so, sn = slots_of.get(old, []), slots_of.get(new, [])
        if not so or not sn:
            continue
        sz = int(gi.size[old])
        lr, pr = max(so), min(sn)             # the old value is held on [0, lr], the update on [pr, n)
        extra = slot_cost(sz, lr, pr)
        if extra > zone_room:
            continue
        for i in so + sn:                     # an op's own tensors are in its bytes already
            load[i] -= sz
        both = (pr, lr + 1) if pr <= lr else (lr + 1, lr + 1)
        peak = max(_range_max(load, 0, min(lr + 1, pr)) + sz, _range_max(load, *both) + 2 * sz,
                   _range_max(load, max(lr + 1, pr), n) + sz, _range_max(load, lr + 1, pr))
        if peak > budget:
            for i in so + sn:
                load[i] += sz
            continue
        load[:lr + 1] += sz
        load[pr:] += sz
        zone_room -= extra
        add_slots(sz, lr, pr, extra)
        out.append((old, new))
    if keep > 1:                              # then pairs that fit only where the iteration starts and ends
        budget = floor + min(1.0, keep - 1) * max(0, int(capacity) - floor)
        taken = set(out)
        ends = (int(load[0]), int(load[n - 1]))
        s0 = {t for t in gi.op_tensors[gi.op_ptr[schedule[0]]:gi.op_ptr[schedule[0] + 1]].tolist()}
        s1 = {t for t in gi.op_tensors[gi.op_ptr[schedule[-1]]:gi.op_ptr[schedule[-1] + 1]].tolist()}
        for old, new in f.by_first:
            if (old, new) in taken or not slots_of.get(old) or not slots_of.get(new):
                continue
            sz = int(gi.size[old])
            lr, pr = max(slots_of[old]), min(slots_of[new])
            extra = slot_cost(sz, lr, pr)
            if extra > zone_room:
                continue
            a = ends[0] + (0 if old in s0 else sz) + (sz if min(slots_of[new]) == 0 and new not in s0 else 0)
            b = ends[1] + (0 if new in s1 else sz) + (sz if max(slots_of[old]) == n - 1 and old not in s1 else 0)
            if max(a, b) > budget:
                continue
            ends = (a, b)
            zone_room -= extra
            add_slots(sz, lr, pr, extra)
            out.append((old, new))
    return out


def _range_max(a: np.ndarray, lo: int, hi: int) -> int:
    return int(a[lo:hi].max()) if hi > lo else -(1 << 62)


def pairs_last(bias: list, pairs) -> list:
    """The eviction biases with a kept pair's old value half a slot later than its next use: among tensors
    next used at the same slot it leaves last. Evicting it costs what evicting another costs (it is read
    back) plus its update's copy to the host every iteration, made late (the update is among the last
    values an iteration makes, so that copy often ends the iteration)."""
    if not pairs or not tuning.PAIRS_LAST:
        return bias
    out = list(bias)
    for p, _ in pairs:
        out[p] = out[p] - 0.5
    return out
