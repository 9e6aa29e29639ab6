"""SwapAdvisor's two genomes and their genetic operators (notes/swapadvisor.md, "Three decisions").

Schedule genome: a topological order of the op ids (np.int64 array).
- crossover (Sinnen 2007): parent A up to a cut, then the remaining ops in parent B's order.
- mutation: list scheduling over the ready set; each step picks a random ready op with probability p,
  else the ready op that came earliest in the parent. Many ops move at once.

Allocation genome over TS, the sorted unique aligned tensor sizes:
- CLS[i] = class of TS[i], monotone with steps 0 or +1 (stored as is, CLS[0] = 0);
- CNT[c] = object count of class c; a class's objects are as large as its largest size.
- crossover: one cut on CLS (the suffix is shifted so the step at the cut is 0 or 1: the minimal
  raise/lower that keeps it monotone); CNT expanded per size, crossed at the same cut, averaged back
  per class.
- mutation: flip steps of CLS (a class splits or two merge: CLS[i:] +-1, still monotone); CNT drawn
  from a Gaussian around the old value.
- repair after each: counts at least each class's need (the most of its tensors one op touches), and
  within the limit: over it, counts shrink inversely to class size (each class with slack gives up
  about the same bytes, so k-times larger objects are removed k times less often), never below need;
  under it, leftover bytes are shared out in proportion to the counts, never past a class's demand
  (its peak live count with no swapping) since more objects than that cannot help.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ...errors import InfeasibleLimitError
from ..feasibility import MinimalPool, minimal_pool
from ..graphindex import ROLE_KEEP, ROLE_KEEP_NEW, ROLE_KEEP_OLD, GraphIndex


# ============================================================== schedule genome
def crossover_schedules(a: np.ndarray, b: np.ndarray, cut: int) -> np.ndarray:
    """a[:cut], then the ops not in it in b's order. Topological if a and b are."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    taken = np.zeros(len(a), dtype=bool)
    taken[a[:cut]] = True
    return np.concatenate((a[:cut], b[~taken[b]]))


def mutate_schedule(gi: GraphIndex, parent: np.ndarray, p: float, rng: np.random.Generator) -> np.ndarray:
    """List scheduling guided by `parent`: each step takes a random ready op with probability p, else the
    ready op earliest in the parent. With p = 0 it returns the parent."""
    n = gi.n_ops
    parent = np.asarray(parent, dtype=np.int64)
    if n == 0 or p <= 0:
        return parent.copy()
    rank = np.empty(n, dtype=np.int64)
    rank[parent] = np.arange(n)
    rank_l = rank.tolist()
    par = parent.tolist()
    succ_ptr = gi.succ_ptr.tolist()
    succ = gi.succ.tolist()
    deg = gi.indeg.tolist()
    ready = [rank_l[o] for o in range(n) if deg[o] == 0]   # heap of parent ranks
    heapq.heapify(ready)
    pick_random = (rng.random(n) < p).tolist()
    which = rng.random(n).tolist()
    out = []
    for step in range(n):
        if pick_random[step] and len(ready) > 1:
            j = int(which[step] * len(ready))
            r = ready[j]
            last = ready.pop()
            if j < len(ready):              # put the last leaf in the hole and restore the heap
                ready[j] = last
                heapq._siftup(ready, j)     # noqa: SLF001 (CPython's heapq sift helpers)
                heapq._siftdown(ready, 0, j)  # noqa: SLF001
        else:
            r = heapq.heappop(ready)
        o = par[r]
        out.append(o)
        for k in range(succ_ptr[o], succ_ptr[o + 1]):
            s = succ[k]
            deg[s] -= 1
            if deg[s] == 0:
                heapq.heappush(ready, rank_l[s])
    return np.asarray(out, dtype=np.int64)


MAX_PULL_READERS = 16


def locality_schedule(gi: GraphIndex, parent: np.ndarray, hot_bytes: float, net: bool = True) -> np.ndarray:
    """A seed schedule (not from the paper): memory-greedy list scheduling.

    Next comes the ready op with the highest score, ties (and every op scoring 0) by rank in `parent`.
    A tensor is hot while fewer than `hot_bytes` of tensor touches happened since its own last touch (a
    stand-in for "still on the device"). When a tensor is touched, a reader of it that waits only on
    ready ops is run at once together with them ("pulled") if that scores above 0.
    - net=True: the score is the hot bytes an op frees net of what it allocates (each hot input counts
      its size over the number of its readers still to run, minus the op's outputs);
    - net=False: the score is its hot input bytes, and every such reader is pulled.

    Graph orders often run a tensor's readers far apart (e.g. a weight gradient, and the transpose
    feeding it, long after the input gradient that brought the same tensors back); this pulls them
    together, so each tensor comes back once and dies early, without hoisting ops that only copy."""
    n = gi.n_ops
    parent = np.asarray(parent, dtype=np.int64)
    if n == 0:
        return parent.copy()
    return np.asarray(_LocalityScheduler(gi, parent, hot_bytes, net).schedule(), dtype=np.int64)


class _LocalityScheduler:
    """locality_schedule's state: per tensor, the touched-bytes clock at its last touch and its readers still
    to run; per op, done, ready and its unfinished in-degree; the heap of ready ops by score."""

    def __init__(self, gi: GraphIndex, parent: np.ndarray, hot_bytes: float, net: bool):
        n = gi.n_ops
        self.n, self.hot_bytes, self.net = n, hot_bytes, net
        rank = np.empty(n, dtype=np.int64)
        rank[parent] = np.arange(n)
        self.rank_l = rank.tolist()
        self.size = gi.size.tolist()
        self.op_ptr, self.op_t, self.op_nin = gi.op_ptr.tolist(), gi.op_tensors.tolist(), gi.op_nin.tolist()
        self.succ_ptr, self.succ = gi.succ_ptr.tolist(), gi.succ.tolist()
        self.prod = gi.graph.producer().tolist()
        self.rptr, self.readers = gi.reader_ptr.tolist(), gi.readers.tolist()
        self.remaining = np.diff(gi.reader_ptr).tolist()   # readers not yet scheduled
        self.keeps = (gi.role == ROLE_KEEP).tolist()
        self.deg = gi.indeg.tolist()
        self.stamp = [-1e300] * gi.n_tensors            # running touched-bytes counter at each tensor's last touch
        self.clock = 0.0
        self.done = [False] * n
        self.ready = [False] * n
        self.heap: list = []
        self.out: list[int] = []

    def hot(self, t: int) -> bool:
        return self.clock - self.stamp[t] <= self.hot_bytes

    def out_bytes(self, o: int):
        op_ptr, op_t, size = self.op_ptr, self.op_t, self.size
        return sum(size[op_t[k]] for k in range(op_ptr[o] + self.op_nin[o], op_ptr[o + 1]))

    def score(self, o: int) -> float:
        op_ptr, op_t, size, net = self.op_ptr, self.op_t, self.size, self.net
        freed = 0.0                        # net: a hot input with r readers left is 1/r freed by each
        for k in range(op_ptr[o], op_ptr[o] + self.op_nin[o]):
            t = op_t[k]
            if self.hot(t):
                if not net:
                    freed += size[t]
                elif not self.keeps[t]:
                    freed += size[t] / self.remaining[t]
        s = freed - self.out_bytes(o) if net else freed
        return s if s > 0 else 0.0

    def push(self, o: int) -> None:
        heapq.heappush(self.heap, (-self.score(o), self.rank_l[o], o))

    def run(self, o: int) -> None:
        op_ptr, op_t, size, stamp = self.op_ptr, self.op_t, self.size, self.stamp
        self.done[o] = True
        self.out.append(o)
        c = self.clock
        for k in range(op_ptr[o], op_ptr[o + 1]):
            t = op_t[k]
            c += size[t]
            stamp[t] = c
        self.clock = c
        for k in range(op_ptr[o], op_ptr[o] + self.op_nin[o]):
            t = op_t[k]
            self.remaining[t] -= 1
        deg = self.deg
        for k in range(self.succ_ptr[o], self.succ_ptr[o + 1]):
            q = self.succ[k]
            deg[q] -= 1
            if deg[q] == 0:
                self.ready[q] = True
                self.push(q)

    def pull_gain(self, q: int):
        """Net bytes freed by running q now with its unfinished (all ready) producers (any positive
        number when not `net`), or None when some producer is not ready."""
        op_ptr, op_t, op_nin = self.op_ptr, self.op_t, self.op_nin
        preds = set()
        for k in range(op_ptr[q], op_ptr[q] + op_nin[q]):
            p = self.prod[op_t[k]]
            if p >= 0 and not self.done[p]:
                if not self.ready[p]:
                    return None, ()
                preds.add(p)
        if not self.net:
            return 1.0, preds
        made = set()
        cost = 0
        for p in preds:
            cost += self.out_bytes(p)
            for k in range(op_ptr[p] + op_nin[p], op_ptr[p + 1]):
                made.add(op_t[k])
        freed = 0.0
        for k in range(op_ptr[q], op_ptr[q] + op_nin[q]):
            t = op_t[k]
            if not self.keeps[t] and (t in made or self.hot(t)):
                freed += self.size[t] / self.remaining[t]
        return freed - cost - self.out_bytes(q), preds

    def schedule(self) -> list[int]:
        heap, done, ready, rank_l = self.heap, self.done, self.ready, self.rank_l
        op_ptr, op_t, rptr, readers = self.op_ptr, self.op_t, self.rptr, self.readers
        for o in range(self.n):
            if self.deg[o] == 0:
                ready[o] = True
                heap.append((-self.score(o), rank_l[o], o))
        heapq.heapify(heap)
        while heap:
            neg, r, o = heapq.heappop(heap)
            if done[o]:
                continue
            s = self.score(o)
            if s < -neg:                       # inputs cooled down (or gained readers) since it was queued
                heapq.heappush(heap, (-s, r, o))
                continue
            self.run(o)
            for k in range(op_ptr[o], op_ptr[o + 1]):
                t = op_t[k]
                if rptr[t + 1] - rptr[t] > MAX_PULL_READERS:
                    continue                   # widely read (weights): every reader is close to none
                for j in range(rptr[t], rptr[t + 1]):   # readers of what was just touched
                    q = readers[j]
                    if done[q]:
                        continue
                    if ready[q]:
                        self.push(q)
                    else:
                        gain, preds = self.pull_gain(q)
                        if gain is not None and gain > 0:
                            for p in sorted(preds, key=rank_l.__getitem__):
                                if not done[p]:
                                    self.run(p)
                            self.run(q)
        return self.out


# ============================================================== allocation genome
@dataclass
class Allocation:
    cls: np.ndarray    # int64 per size index, monotone, steps 0/1, cls[0] == 0
    cnt: np.ndarray    # int64 per class

    @property
    def num_classes(self) -> int:
        return int(self.cls[-1]) + 1 if len(self.cls) else 0

    def copy(self) -> "Allocation":
        return Allocation(self.cls.copy(), self.cnt.copy())

    def key(self) -> tuple:
        return (self.cls.tobytes(), self.cnt.tobytes())


class KeptAllocation(Allocation):
    """A size-class Allocation planned with updated params kept on the device (a GraphIndex built with
    keep_updated=True: what pool="size-classes" plans where keeping pays): the arena scores and plans it so, with
    the size-class pool's renaming between iterations as the arena's renaming cycles (arena.arena_plan).
    Keyed apart from a plain Allocation of the same classes and counts, whose plan reads updated params from the
    host."""

    def copy(self) -> "KeptAllocation":
        return KeptAllocation(self.cls.copy(), self.cnt.copy())

    def key(self) -> tuple:
        return (self.cls.tobytes(), self.cnt.tobytes(), b"kept")


class WrapAllocation(KeptAllocation):
    """A KeptAllocation planned over the wrap index (planner/wrap_keep.py): only the updated params made last
    and read first are kept, and one evicted mid-iteration is copied out at the start. Keyed apart from both."""

    def copy(self) -> "WrapAllocation":
        return WrapAllocation(self.cls.copy(), self.cnt.copy())

    def key(self) -> tuple:
        return (self.cls.tobytes(), self.cnt.tobytes(), b"wrap")


def class_index(gi: GraphIndex, alloc: Allocation) -> GraphIndex:
    """The index a size-class genome plans over in an arena search whose own index is `gi` (keep_updated
    False): the keep_updated index for a KeptAllocation, the wrap index for a WrapAllocation."""
    if isinstance(alloc, WrapAllocation):
        from ..wrap_keep import wrap_index

        return wrap_index(gi.graph, gi.alignment)
    if isinstance(alloc, KeptAllocation):
        return GraphIndex.of(gi.graph, gi.alignment, keep_updated=True)
    return gi


def is_monotone_cls(cls: np.ndarray) -> bool:
    cls = np.asarray(cls)
    if len(cls) == 0:
        return True
    d = np.diff(cls)
    return bool(cls[0] == 0 and ((d == 0) | (d == 1)).all())


def cls_from_steps(steps: np.ndarray) -> np.ndarray:
    """Class ids from steps (steps[0] ignored); every step clipped to 0 or 1."""
    s = np.clip(np.asarray(steps, dtype=np.int64), 0, 1)
    if len(s):
        s[0] = 0
    return np.cumsum(s)


def cls_steps(cls: np.ndarray) -> np.ndarray:
    return np.diff(np.asarray(cls, dtype=np.int64), prepend=0)


class AllocationSpace:
    """The allocation genomes that fit one graph under one limit, with their operators.

    Every operator returns a repaired Allocation: monotone CLS, need <= CNT, pool + workspace <= limit."""

    def __init__(self, gi: GraphIndex, mem_limit: int, minimal: MinimalPool | None = None,
                 demand_schedule: np.ndarray | None = None):
        self.gi = gi
        self.mem_limit = int(mem_limit)
        self.budget = self.mem_limit - gi.workspace     # bytes for pool objects
        self.minimal = minimal if minimal is not None else minimal_pool(gi)
        if self.minimal.limit > self.mem_limit:
            raise InfeasibleLimitError(self.mem_limit, self.minimal.limit,
                                       "some op's inputs, outputs and workspace do not fit at once")
        self.m = gi.num_sizes
        self._demand_events(gi.default_schedule() if demand_schedule is None else demand_schedule)

    # ---- facts about a CLS ----
    def class_bytes(self, cls: np.ndarray) -> np.ndarray:
        """Object bytes per class: the largest size mapped to it (the last one, TS being sorted)."""
        last = np.flatnonzero(np.diff(cls, append=cls[-1] + 1) != 0)
        return self.gi.ts[last]

    def pool_bytes(self, a: Allocation) -> int:
        return int((self.class_bytes(a.cls) * a.cnt).sum())

    def need(self, cls: np.ndarray) -> np.ndarray:
        return self.gi.class_need(cls)

    def _demand_events(self, schedule: np.ndarray) -> None:
        """Live intervals of every used tensor under `schedule` with no swapping, as +1/-1 events sorted by
        position, so that a class's demand (peak live count) is one stable sort away."""
        gi = self.gi
        n = gi.n_ops
        pos = np.empty(n, dtype=np.int64)
        pos[np.asarray(schedule, dtype=np.int64)] = np.arange(n)
        touch_pos = np.repeat(pos, np.diff(gi.op_ptr))
        first = np.full(gi.n_tensors, n, dtype=np.int64)
        last = np.full(gi.n_tensors, -1, dtype=np.int64)
        np.minimum.at(first, gi.op_tensors, touch_pos)
        np.maximum.at(last, gi.op_tensors, touch_pos)
        used = np.flatnonzero(gi.used)
        role = gi.role[used]
        keep = role == ROLE_KEEP                   # kept params live the whole iteration,
        # an updated one from the start to its last use and its update from production to the end
        f = np.where(keep | (role == ROLE_KEEP_OLD), 0, first[used])
        l_ = np.where(keep | (role == ROLE_KEEP_NEW), n - 1, last[used])
        ev_pos = np.concatenate((f * 2, l_ * 2 + 1))  # a tensor ending at i frees after one starting at i
        ev_val = np.concatenate((np.ones(len(used), np.int64), -np.ones(len(used), np.int64)))
        ev_size = np.concatenate((gi.size_idx[used], gi.size_idx[used]))
        order = np.argsort(ev_pos, kind="stable")
        self._ev_val = ev_val[order]
        self._ev_size = ev_size[order]

    def demand(self, cls: np.ndarray) -> np.ndarray:
        """Per class, the peak number of its tensors alive at once with unlimited memory."""
        c = np.asarray(cls, dtype=np.int64)[self._ev_size]
        n_cls = int(cls[-1]) + 1
        order = np.argsort(c, kind="stable")
        cs, vs = c[order], self._ev_val[order]
        run = np.cumsum(vs)
        starts = np.searchsorted(cs, np.arange(n_cls))
        base = np.concatenate(([0], run))[starts]      # running total before each class's events
        peak = np.zeros(n_cls, dtype=np.int64)
        np.maximum.at(peak, cs, run - base[cs])
        return peak

    # ---- repair ----
    def fit_counts(self, cls: np.ndarray, cnt: np.ndarray) -> np.ndarray | None:
        """Counts for `cls` near `cnt` that fit the budget (see module docstring), or None if the
        class needs alone do not fit."""
        cb = self.class_bytes(cls)
        need = self.need(cls)
        if int((need * cb).sum()) > self.budget:
            return None
        cap = np.maximum(self.demand(cls), need)
        cnt = np.clip(np.asarray(cnt, dtype=np.int64), need, cap)
        total = int((cnt * cb).sum())
        if total > self.budget:
            cnt = self._shrink(cnt, need, cb)
            total = int((cnt * cb).sum())
        left = self.budget - total
        room = cap - cnt
        if left >= cb.min() and room.any():
            # share the leftover in proportion to the counts (classes not at their cap)
            w = np.where(room > 0, cnt, 0).astype(np.float64)
            if w.sum() == 0:
                w = (room > 0).astype(np.float64)
            add = np.minimum(room, np.floor(w / float((w * cb).sum()) * left).astype(np.int64))
            cnt = cnt + add
            left -= int((add * cb).sum())
            # then one object at a time, largest classes first, while bytes remain
            for c in np.argsort(-cb, kind="stable").tolist():
                if cnt[c] < cap[c] and cb[c] <= left:
                    k = int(min(cap[c] - cnt[c], left // cb[c]))
                    cnt[c] += k
                    left -= k * int(cb[c])
        return cnt

    def _shrink(self, cnt: np.ndarray, need: np.ndarray, cb: np.ndarray) -> np.ndarray:
        """Counts down to the budget, objects removed inversely to class size: every class with slack gives
        up about the same bytes per round, so a class of objects k times larger loses k times fewer."""
        total = int((cnt * cb).sum())
        while total > self.budget:
            slack = cnt - need
            elig = slack > 0
            share = (total - self.budget) / int(elig.sum())
            dec = np.where(elig, np.minimum(slack, np.ceil(share / cb).astype(np.int64)), 0)
            cnt = cnt - dec
            total = int((cnt * cb).sum())
        return cnt

    def repair(self, cls: np.ndarray, cnt: np.ndarray) -> Allocation:
        """A valid Allocation close to (cls, cnt); falls back to the minimal pool's classes when cls's
        own needs cannot fit (the minimal pool fits by construction)."""
        cls = cls_from_steps(cls_steps(cls)) if not is_monotone_cls(cls) else np.asarray(cls, dtype=np.int64)
        n_cls = int(cls[-1]) + 1
        cnt = np.asarray(cnt, dtype=np.int64)
        if len(cnt) != n_cls:
            cnt = np.resize(cnt, n_cls) if len(cnt) else np.ones(n_cls, np.int64)
        fitted = self.fit_counts(cls, cnt)
        if fitted is None:
            per_size = cnt[cls]
            cls = self.minimal.cls.copy()
            fitted = self.fit_counts(cls, self._per_class_mean(cls, per_size))
        return Allocation(cls, fitted)

    @staticmethod
    def _per_class_mean(cls: np.ndarray, per_size: np.ndarray) -> np.ndarray:
        n_cls = int(cls[-1]) + 1
        s = np.bincount(cls, weights=per_size.astype(np.float64), minlength=n_cls)
        k = np.bincount(cls, minlength=n_cls)
        return np.rint(s / np.maximum(k, 1)).astype(np.int64)

    # ---- seeds ----
    def single_class(self) -> Allocation:
        """One class of the largest size (SwapAdvisor without allocation search)."""
        cls = np.zeros(self.m, dtype=np.int64)
        return self.repair(cls, np.array([self.budget // int(self.gi.ts[-1])], dtype=np.int64))

    def minimal_pool(self) -> Allocation:
        """The cheapest feasible grouping; counts grown from its needs to fill the limit."""
        return self.repair(self.minimal.cls.copy(), self.minimal.count.copy())

    def exact_sizes(self) -> Allocation:
        """One class per distinct size, counts in proportion to demand."""
        cls = np.arange(self.m, dtype=np.int64)
        return self.repair(cls, self.demand(cls))

    def geometric(self, ratio: float = 2.0) -> Allocation:
        """Sizes grouped into classes spanning at most a factor `ratio`, counts in proportion to demand."""
        ts = self.gi.ts
        steps = np.zeros(self.m, dtype=np.int64)
        start = ts[0] if self.m else 0
        for i in range(1, self.m):
            if ts[i] > ratio * start:
                steps[i] = 1
                start = ts[i]
        cls = np.cumsum(steps)
        return self.repair(cls, self.demand(cls))

    def seeds(self) -> list[Allocation]:
        out, seen = [], set()
        for a in (self.minimal_pool(), self.exact_sizes(), self.geometric(2.0), self.geometric(8.0),
                  self.single_class()):
            if a.key() not in seen:
                seen.add(a.key())
                out.append(a)
        return out

    def random(self, rng: np.random.Generator) -> Allocation:
        """A random grouping (each step a coin flip with a random bias) with random counts."""
        bias = float(rng.uniform(0.05, 0.95))
        steps = (rng.random(self.m) < bias).astype(np.int64)
        cls = cls_from_steps(steps)
        cnt = np.maximum(1, self.demand(cls) * rng.uniform(0.2, 1.0, size=int(cls[-1]) + 1)).astype(np.int64)
        return self.repair(cls, cnt)

    # ---- operators ----
    def crossover(self, a: Allocation, b: Allocation, cut: int) -> tuple[Allocation, Allocation]:
        """Two children: a's prefix with b's suffix and the other way round (cut in 1..m-1)."""
        sa, sb = cls_steps(a.cls), cls_steps(b.cls)
        pa, pb = a.cnt[a.cls], b.cnt[b.cls]         # counts expanded per size
        kids = []
        for (s1, s2, p1, p2) in ((sa, sb, pa, pb), (sb, sa, pb, pa)):
            steps = np.concatenate((s1[:cut], s2[cut:]))
            cls = cls_from_steps(steps)             # the step at the cut comes from s2: already 0 or 1
            per_size = np.concatenate((p1[:cut], p2[cut:]))
            kids.append(self.repair(cls, self._per_class_mean(cls, per_size)))
        return kids[0], kids[1]

    def mutate(self, a: Allocation, rng: np.random.Generator, p_cls: float = 0.1, p_cnt: float = 0.2,
               sigma: float = 0.25) -> Allocation:
        """Flip CLS steps with probability p_cls each; redraw counts with probability p_cnt each from
        N(old, sigma * old + 1)."""
        steps = cls_steps(a.cls)
        per_size = a.cnt[a.cls]
        if self.m > 1:
            flip = rng.random(self.m) < p_cls
            flip[0] = False
            steps = np.where(flip, 1 - steps, steps)
        cls = cls_from_steps(steps)
        cnt = self._per_class_mean(cls, per_size)
        redraw = rng.random(len(cnt)) < p_cnt
        noisy = np.rint(rng.normal(cnt, sigma * cnt + 1.0)).astype(np.int64)
        cnt = np.where(redraw, np.maximum(noisy, 1), cnt)
        return self.repair(cls, cnt)

    def tensor_class(self, a: Allocation) -> np.ndarray:
        """Per tensor: its class (-1 for tensors no op touches)."""
        si = self.gi.size_idx
        return np.where(si >= 0, a.cls[np.maximum(si, 0)], -1)


class KeptAllocationSpace(AllocationSpace):
    """AllocationSpace over a keep_updated GraphIndex whose genomes are KeptAllocations: the size-class search
    that keeps updated params, as an island of the arena search (islands.size_class_island). Every operator
    ends in repair, so the genomes, and the random numbers drawn, are AllocationSpace's exactly."""

    def __init__(self, gi: GraphIndex, mem_limit: int):
        if not gi.keep_updated:
            raise ValueError("a KeptAllocationSpace needs a GraphIndex built with keep_updated=True")
        super().__init__(gi, mem_limit)

    def repair(self, cls: np.ndarray, cnt: np.ndarray) -> KeptAllocation:
        a = super().repair(cls, cnt)
        return KeptAllocation(a.cls, a.cnt)


class WrapAllocationSpace(KeptAllocationSpace):
    """KeptAllocationSpace over the wrap index (wrap_keep.wrap_index): its genomes are WrapAllocations."""

    def repair(self, cls: np.ndarray, cnt: np.ndarray) -> WrapAllocation:
        a = super().repair(cls, cnt)
        return WrapAllocation(a.cls, a.cnt)
