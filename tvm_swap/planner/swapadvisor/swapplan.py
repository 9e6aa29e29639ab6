"""SwapAdvisor's swap planner: a deterministic swap plan from a schedule and an allocation.

Two phases.

Phase A (decide) walks the schedule over symbolic objects, one class at a time being what a tensor may use:
- an op's tensors must all be resident; a missing input is a *miss* (it will be swapped in), a new output
  takes an object at the op;
- a free object goes first (for an output the most recently freed one, so the long-free ones are left to
  prefetches); if the class is full the resident with the furthest next use is evicted (Belady; the op's
  own tensors are never candidates);
- the evicted tensor leaves right after its last use so far: its drop is placed there and, when it will be
  needed again and the host has no copy of it, a swap-out right after it was produced;
- the incoming tensor's swap-in is placed as soon as its object is free (and its host copy exists): the
  eviction/swap-in pair happens as early as is safe, which is the prefetch;
- dead tensors are dropped right after their last use; graph outputs and updates are swapped out right after
  they are produced (the host must receive them), so dropping them later is free;
- persistent tensors nothing updates ("kept": e.g. frozen weights) have a cyclic next use (their first use
  next iteration) and stay resident unless pressure evicts them;
- an updated persistent tensor p whose update p_new has its size (ROLE_KEEP_OLD / ROLE_KEEP_NEW) may start
  resident and is dropped after its last use (free: the host has it); p_new is written into another object
  of p's class and stays resident, its next use being p's first use next iteration (periodicity is per size
  class: the runtime renames objects between iterations, Plan.next_object_map). An evicted p_new is swapped
  out right after it was made. With graphindex.KEEP_UPDATED off, the old rule: p is host-only, p_new goes out.
  On an `early_out` index (planner/wrap_keep.py) an initial resident p has no current host copy: evicted
  while still needed, it is copied out at the start of the iteration (where the link to the host is idle),
  and its update then needs no copy out.

Periodicity (passes): pass 1 starts empty; the kept tensors (and kept updates, as the tensors they replace)
resident at its end become pass 2's initial residents; those pass 2 cannot keep to its end are left out of
a third pass. At the last pass's end each initial resident's successor must be resident in an object of its
class: other tenants are dropped after their last use (a kept update without a host copy is swapped out
first) and evicted successors are swapped back in (for the next iteration) as soon as an object of their
class is free for good. An initial resident swapped in during the iteration reads its host copy, so its
update is swapped out too.

Phase B (emit) issues everything through ActionBuilder (which derives the deps) in one list:
after compute i come the swap-outs, drops and swap-ins placed "after i". Swap-outs are in production order;
swap-ins in need order (each issued no earlier than the one needed before it, so the FIFO host-to-device
stream serves them in the order they are needed).
"""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np

from ...cost.devices import DeviceSpec
from ...errors import PlanError
from ...plan import Action, Plan, Pool
from ..builder import ActionBuilder, copies_after_steps
from ..gc_pause import gc_paused
from .packed_builder import pack_decisions
from ..simulator import simulate_time
from .encoding import Allocation, AllocationSpace
from ..graphindex import ROLE_TO_HOST, GraphIndex

from ..graphindex import NEVER as _NEVER  # next use of a dead tensor


@dataclass
class SwapPlan:
    """A planned iteration: everything a Plan needs except names, limit and predictions."""
    schedule: np.ndarray
    pool: Pool
    tensor_class: np.ndarray
    initial_residents: list[tuple[int, int]]
    actions: list[Action]

    def to_plan(self, graph, planner: str, mem_limit: int, device: DeviceSpec) -> Plan:
        return Plan(
            graph_name=graph.name, graph_fingerprint=graph.fingerprint(), planner=planner,
            mem_limit=int(mem_limit), device=device.to_dict(), schedule=[int(o) for o in self.schedule],
            pool=self.pool, tensor_class=[int(c) for c in self.tensor_class],
            initial_residents=[(int(t), int(o)) for t, o in self.initial_residents], actions=list(self.actions),
        )


class _Walk:
    """Phase A state for one pass over the schedule."""

    def __init__(self, gi: GraphIndex, schedule: np.ndarray, tclass: np.ndarray, counts: np.ndarray):
        n = gi.n_ops
        self.n = n
        self.sched = schedule.tolist()
        first_pos, nxt = gi.next_uses(schedule)
        touch_t = gi.op_tensors
        self.first_pos = first_pos.tolist()
        self.touch_next = nxt.tolist()
        self.touch_t = touch_t.tolist()
        self.op_ptr = gi.op_ptr.tolist()
        self.op_nin = gi.op_nin.tolist()
        self.role = gi.role.tolist()
        self.old_of = gi.old_of.tolist()
        self.new_of = {o: t for t, o in enumerate(self.old_of) if o >= 0}
        self.early_out = gi.early_out
        self.produced = gi.produced.tolist()
        self.tclass = tclass.tolist()
        self.tclass_array = tclass
        counts = np.asarray(counts, dtype=np.int64)
        first_obj = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64) if len(counts) else counts
        self.first_obj = first_obj.tolist()
        self.counts = counts.tolist()
        self.num_objects = int(counts.sum())

    def _start(self, initial: list[tuple[int, int]]):
        """The walk's state at slot -1: the `initial` (tensor, object) pairs resident, every other object free.
        Returns (loc, nxt, last, host_ready, tenant, obj_free_slot, evict_heap, free, dirty)."""
        n_cls = len(self.counts)
        n_t = len(self.tclass)
        tclass = self.tclass
        loc = [-1] * n_t                   # object holding each tensor
        nxt = [_NEVER] * n_t               # current next use of each resident tensor
        last = [-1] * n_t                  # position of its last touch in this tenancy (-1: none yet)
        host_ready = [-1] * n_t            # slot after which the tensor can be swapped in (-2: no host copy)
        for t in range(n_t):
            if self.produced[t]:
                host_ready[t] = -2
        tenant = [-1] * self.num_objects
        obj_free_slot = [-1] * self.num_objects
        evict_heap: list[list] = [[] for _ in range(n_cls)]
        # free objects per class, in the order they were freed; "dirty" ones were left by a tensor with a
        # swap-out in flight (its drop waits on the d2h copy), so a new output should not wait on them
        free: list[deque] = [deque() for _ in range(n_cls)]
        dirty: list[deque] = [deque() for _ in range(n_cls)]
        early_out = self.early_out
        for t, o in initial:
            loc[t] = o
            tenant[o] = t
            if early_out and t in self.new_of:
                host_ready[t] = -2         # its host copy is stale: evicted, it is copied out at the start
            nxt[t] = self.first_pos[t]
            heapq.heappush(evict_heap[tclass[t]], (-nxt[t], t))
        for c in range(n_cls):
            f0 = self.first_obj[c]
            for o in range(f0, f0 + self.counts[c]):
                if tenant[o] < 0:
                    free[c].append(o)      # all free since the start (slot -1)
        return loc, nxt, last, host_ready, tenant, obj_free_slot, evict_heap, free, dirty

    def run(self, initial: list[tuple[int, int]]):
        """One pass. Returns the records Phase B needs and the kept residents at the end."""
        n = self.n
        n_t = len(self.tclass)
        tclass, role = self.tclass, self.role
        touch_t, touch_next, op_ptr, op_nin = self.touch_t, self.touch_next, self.op_ptr, self.op_nin
        loc, nxt, last, host_ready, tenant, obj_free_slot, evict_heap, free, dirty = self._start(initial)

        out_objs: list[list[int]] = [None] * n   # per position
        swap_outs: list[tuple[int, int]] = []    # (slot, tensor)
        drops: list[tuple[int, int, int]] = []   # (slot, tensor, object)
        swap_ins: list[tuple[int, int, int]] = []  # (earliest slot, tensor, obj), in need order

        prod_slot = [-1] * n_t             # position that produced each tensor

        def take_object(t, i, is_output):
            c = tclass[t]
            fq, dq = free[c], dirty[c]
            if fq or dq:
                if is_output:               # the most recently freed clean one; else the oldest dirty one
                    o = fq.pop() if fq else dq.popleft()
                elif fq and (not dq or obj_free_slot[fq[0]] <= obj_free_slot[dq[0]]):
                    o = fq.popleft()        # a prefetch takes the longest-free object
                else:
                    o = dq.popleft()
                return o, obj_free_slot[o]
            h = evict_heap[c]
            while True:
                if not h:
                    raise PlanError(f"class {c} has {self.counts[c]} objects, fewer than op at position {i} "
                                    f"needs at once; repair the allocation (counts >= need)")
                negnu, v = heapq.heappop(h)
                nu = -negnu
                if loc[v] >= 0 and nxt[v] == nu and nu > i:
                    break
            o = loc[v]
            d = last[v]
            if nu < _NEVER and host_ready[v] == -2:
                # it will be needed again and the host has no copy: copy it out right after it was made
                swap_outs.append((prod_slot[v], v))
            if host_ready[v] < d:
                host_ready[v] = d
            drops.append((d, v, o))
            loc[v] = -1
            tenant[o] = -1
            obj_free_slot[o] = d
            return o, d

        sched = self.sched
        heappush = heapq.heappush
        for i in range(n):
            op = sched[i]
            a, b = op_ptr[op], op_ptr[op + 1]
            k_out = a + op_nin[op]
            outs = []
            for k in range(a, b):
                t = touch_t[k]
                if loc[t] < 0:
                    is_out = k >= k_out
                    o, fslot = take_object(t, i, is_out)
                    loc[t] = o
                    tenant[o] = t
                    if is_out:
                        prod_slot[t] = i
                    else:
                        hr = host_ready[t]
                        if hr == -2:
                            raise PlanError(f"planner bug: tensor {t} is read at position {i} but is neither "
                                            f"resident nor on the host")
                        swap_ins.append((fslot if fslot > hr else hr, t, o))
                nxt[t] = i
                if k >= k_out:
                    outs.append(loc[t])
            out_objs[i] = outs
            for k in range(a, b):
                t = touch_t[k]
                nu = touch_next[k]
                last[t] = i
                nxt[t] = nu
                if k >= k_out and role[t] == ROLE_TO_HOST:
                    swap_outs.append((i, t))
                    host_ready[t] = i
                if nu == _NEVER:
                    o = loc[t]
                    drops.append((i, t, o))
                    if host_ready[t] < i and host_ready[t] != -2:
                        host_ready[t] = i
                    loc[t] = -1
                    tenant[o] = -1
                    obj_free_slot[o] = i
                    (dirty if role[t] == ROLE_TO_HOST else free)[tclass[t]].append(o)
                else:
                    heappush(evict_heap[tclass[t]], (-nu, t))
        end_residents = [(t, o) for o, t in enumerate(tenant) if t >= 0]
        self.state = (loc, last, host_ready, tenant, obj_free_slot, prod_slot)
        return out_objs, swap_outs, drops, swap_ins, end_residents

    def close_period(self, initial, drops, swap_ins, swap_outs, exact: bool = False):
        """Make the end state repeat `initial` (pass 2), per size class: a tenant stays if it is an initial
        resident or the update of one (any object of its class will do: the runtime renames objects between
        iterations); other tenants are dropped after their last use (a kept update without a host copy is
        swapped out first); an initial resident with no such tenant is swapped back in (itself, or its
        update, swapped out when evicted) once an object of its class is free for good. With `exact` the
        old rule: each initial resident back in its own object."""
        loc, last, host_ready, tenant, obj_free_slot, prod_slot = self.state
        old_of, tclass = self.old_of, self.tclass
        want = {o: t for t, o in initial}
        init_t = set(want.values())
        stays = set()
        for o, t in enumerate(tenant):
            if t < 0:
                continue
            plays = old_of[t] if old_of[t] >= 0 else t
            if (want.get(o) == t) if exact else (plays in init_t and plays not in stays):
                stays.add(plays)
                continue
            if host_ready[t] == -2:               # a kept update never copied out: its value must survive
                swap_outs.append((prod_slot[t], t))
            drops.append((last[t], t, o))         # kept tensors have host copies: dropping is free
            if host_ready[t] < last[t]:
                host_ready[t] = last[t]
            obj_free_slot[o] = last[t]
            loc[t] = -1
            tenant[o] = -1
        free_by_class: dict[int, list] = {}
        for o, t in enumerate(tenant):
            if t < 0:
                free_by_class.setdefault(self.obj_class(o), []).append((obj_free_slot[o], o))
        for fl in free_by_class.values():
            fl.sort(reverse=True)                 # pop() gives the longest-free object
        back = []
        for t, o in initial:
            if t in stays:
                continue
            src = self.new_of.get(t, t)           # an updated one comes back as its update
            if not exact:
                _, o = free_by_class[tclass[t]].pop()
            q = max(obj_free_slot[o], host_ready[src])
            back.append((q, src, o))
        back.sort()
        swap_ins.extend(back)

    def obj_class(self, o: int) -> int:
        return int(np.searchsorted(self.first_obj, o, side="right")) - 1

    def host_copies_for_next(self, initial, swap_outs, swap_ins) -> None:
        """An initial resident swapped in this iteration reads its host copy, which must then hold last
        iteration's update: give every such kept update a swap-out (right after it is made)."""
        loc, last, host_ready, tenant, obj_free_slot, prod_slot = self.state
        init_t = {t for t, _ in initial}
        out = {t for _, t in swap_outs}
        # (one copied out at the start of this iteration (gi.early_out) reads that copy)
        read_from_host = {t for _, t, _ in swap_ins if t in init_t and t in self.new_of and t not in out}
        for p in sorted(read_from_host):
            new = self.new_of[p]
            if new not in out:
                swap_outs.append((prod_slot[new], new))


@dataclass
class _Decisions:
    """Phase A's output: what happens after each position (slot -1 is before the first op)."""
    walk: "_Walk"
    initial: list
    out_objs: list
    swap_outs: list
    drops: list
    swap_ins: list


def _emit(d: _Decisions, sink) -> None:
    """Issue every decision through `sink` (an ActionBuilder) in plan order; pack_decisions mirrors this."""
    walk = d.walk
    n = walk.n
    post_out, post_drop, post_in = copies_after_steps(n, d.swap_outs, d.drops, d.swap_ins)   # index slot + 1
    for t, o in d.initial:
        sink.place_initial(t, o)
    sched, out_objs = walk.sched, d.out_objs
    compute, swap_out, drop, swap_in = sink.compute, sink.swap_out, sink.drop, sink.swap_in
    for s in range(-1, n):
        if s >= 0:
            compute(sched[s], out_objs[s])
        j = s + 1
        for t in post_out[j]:
            swap_out(t)
        for t in post_drop[j]:
            drop(t)
        for t, o in post_in[j]:
            swap_in(t, o)


def _decide(gi: GraphIndex, space: AllocationSpace, schedule, alloc: Allocation, two_pass: bool) -> _Decisions:
    tclass = space.tensor_class(alloc)
    walk = _Walk(gi, schedule, tclass, alloc.cnt)
    out_objs, swap_outs, drops, swap_ins, end = walk.run([])
    initial: list[tuple[int, int]] = []
    exact = not gi.keep_updated
    if two_pass and end:
        # kept updates at pass 1's end start pass 2 as the tensors they replace
        initial = sorted((walk.old_of[t] if walk.old_of[t] >= 0 else t, o) for t, o in end)
        out_objs, swap_outs, drops, swap_ins, end2 = walk.run(initial)
        if not exact:
            # initial residents pass 2 could not keep to its end would be swapped back in for nothing
            # (and, updated, their update copied out too): start a last pass without them
            kept = {walk.old_of[t] if walk.old_of[t] >= 0 else t for t, _ in end2}
            if len(kept) < len(initial):
                initial = [(t, o) for t, o in initial if t in kept]
                out_objs, swap_outs, drops, swap_ins, _ = walk.run(initial)
        walk.close_period(initial, drops, swap_ins, swap_outs, exact)
        walk.host_copies_for_next(initial, swap_outs, swap_ins)
    elif end:
        # a single pass must also end empty: kept tensors still resident leave after their last use
        walk.close_period([], drops, swap_ins, swap_outs, exact)
    return _Decisions(walk, initial, out_objs, swap_outs, drops, swap_ins)


def plan_swaps(gi: GraphIndex, space: AllocationSpace, schedule, alloc: Allocation,
               two_pass: bool = True) -> SwapPlan:
    """The swap plan for `schedule` under `alloc` (see the module docstring), built with ActionBuilder."""
    schedule = np.asarray(schedule, dtype=np.int64)
    with gc_paused():
        d = _decide(gi, space, schedule, alloc, two_pass)
        b = ActionBuilder(gi.graph, d.walk.num_objects)
        _emit(d, b)
    pool = Pool([int(x) for x in space.class_bytes(alloc.cls)], [int(x) for x in alloc.cnt], gi.alignment,
                gi.workspace)
    return SwapPlan(schedule, pool, d.walk.tclass_array, d.initial, b.actions)


class SwapPlanScorer:
    """Simulated time of the swap plan of (schedule, alloc), without building Action objects: the GA's
    fitness. Same decisions and the same deps as plan_swaps (pack_decisions mirrors ActionBuilder)."""

    def __init__(self, gi: GraphIndex, space: AllocationSpace, op_time, device: DeviceSpec):
        self.gi, self.space, self.device = gi, space, device
        self.op_time = np.asarray(op_time, dtype=np.float64)
        self.nbytes = gi.graph.tensor_bytes().astype(np.float64)

    def packed(self, schedule, alloc: Allocation, two_pass: bool = True):
        schedule = np.asarray(schedule, dtype=np.int64)
        gi = self.gi
        with gc_paused():
            d = _decide(gi, self.space, schedule, alloc, two_pass)
            return pack_decisions(d.walk.n, schedule, d.out_objs, d.swap_outs, d.drops, d.swap_ins,
                                  gi.op_ptr, gi.op_tensors, gi.op_nin, self.op_time, self.nbytes)

    def time_of(self, schedule, alloc: Allocation) -> float:
        return float(simulate_time(self.packed(schedule, alloc), self.device))
