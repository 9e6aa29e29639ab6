"""The on-demand swapping engine behind odswap and vdnn.

It walks the schedule once, the way a runtime swapper would: before an op runs, every input is made
resident (swapped in if it is not: the op waits for it) and every output gets a free object; when a class
has no free object, the least-recently-used resident of that class that the op does not touch is evicted
(copied out first if it is needed later and the host has no current copy). Dead tensors are dropped right
after their last use; results the caller gets back are copied out as soon as they are produced.

Planners steer it through hooks (see `OnDemandWalker.before_inputs`, `before_compute` and `drop_early`), so
each baseline only states its own policy. All actions go through ActionBuilder, which derives the deps.
"""
from __future__ import annotations

import heapq
from collections import OrderedDict

from ...graph import DataflowGraph
from ...plan import Pool
from .common import keepable_params, next_use, settle_residents, successor_map, use_positions
from ..builder import ActionBuilder


class OnDemandWalker:
    builder_class = ActionBuilder      # a policy may derive extra deps (baseline_offload.SyncActionBuilder)

    def __init__(self, graph: DataflowGraph, order: list[int], pool: Pool, tensor_class: list[int],
                 resident_params: list[int] = (), keep: list[int] | None = None):
        """`resident_params` start on the device; the successors of `keep` (default: of the residents) stay
        on it at the end unless pressure evicts them."""
        self.g = graph
        self.order = list(order)
        self.pool = pool
        self.cls = tensor_class
        self.obj_class = pool.object_class()
        self.uses = use_positions(graph, self.order)
        self.b = self.builder_class(graph, pool.num_objects)
        self.producer = graph.producer()
        succ = successor_map(graph)

        # Which params start on the device, and which tensors must be on it when the iteration ends.
        self.initial: list[tuple[int, int]] = []
        self._free: list[list[int]] = [[] for _ in pool.class_count]
        taken = set()
        first = pool.first_object()
        next_free = {c: int(first[c]) for c in range(len(pool.class_count))}
        for p in sorted(resident_params):
            c = self.cls[p]
            o = next_free[c]
            if o >= first[c] + pool.class_count[c]:
                raise RuntimeError(f"planner bug: class {c} cannot hold all initial residents")
            next_free[c] += 1
            self.b.place_initial(p, o)
            self.initial.append((p, o))
            taken.add(o)
        for o in range(pool.num_objects):
            if o not in taken:
                self._free[self.obj_class[o]].append(o)
        for h in self._free:
            heapq.heapify(h)
        keep = [p for p, _ in self.initial] if keep is None else keep
        self.keep_resident = {succ.get(p, p) for p in keep}
        # An updated param kept on the device has a stale host copy: evicting it needs a copy out.
        self.stale_host = {p for p, _ in self.initial if p in succ}
        outs = set(graph.outputs) | set(graph.updates)
        self.must_host = {t for t in outs if self.producer[t] >= 0 and t not in self.keep_resident}

        self.lru: list[OrderedDict] = [OrderedDict() for _ in pool.class_count]
        for p, _ in self.initial:
            self.lru[self.cls[p]][p] = None
        self.reserved: set[int] = set()
        self.pos = -1
        self.evictions = 0
        self.evicted_kept = 0      # evictions of tensors that should stay resident (the policy did not fit)

    # ---------------------------------------------------------------- queries
    def valid_host_copy(self, t: int) -> bool:
        return t in self.b.host_copy or (self.producer[t] < 0 and t not in self.stale_host)

    def needed_later(self, t: int, pos: int) -> bool:
        return next_use(self.uses[t], pos) is not None or t in self.keep_resident or t in self.must_host

    def next_use(self, t: int, pos: int | None = None) -> int | None:
        return next_use(self.uses[t], self.pos if pos is None else pos)

    def has_free(self, c: int) -> bool:
        return self._peek_free(c) is not None

    # ---------------------------------------------------------------- object bookkeeping
    def _peek_free(self, c: int) -> int | None:
        h = self._free[c]
        while h and (self.b.obj_tenant[h[0]] >= 0 or h[0] in self.reserved):
            heapq.heappop(h)  # stale entry: taken since it was freed
        return h[0] if h else None

    def _pop_free(self, c: int) -> int | None:
        o = self._peek_free(c)
        if o is not None:
            heapq.heappop(self._free[c])
        return o

    def touch(self, t: int) -> None:
        self.lru[self.cls[t]][t] = None
        self.lru[self.cls[t]].move_to_end(t)

    def drop(self, t: int) -> None:
        o = self.b.where[t]
        self.b.drop(t)
        del self.lru[self.cls[t]][t]
        heapq.heappush(self._free[self.obj_class[o]], o)

    def evict(self, t: int) -> None:
        """Make t leave the device without losing it."""
        if self.needed_later(t, self.pos) and not self.valid_host_copy(t):
            self.b.swap_out(t)
        self.evictions += 1
        if t in self.keep_resident:
            self.evicted_kept += 1
        self.drop(t)

    def acquire(self, c: int, pinned: set[int], may_evict=None) -> int | None:
        """A free object of class c, evicting the least recently used tensor the current op does not touch.
        `may_evict(t)` can veto victims; returns None when nothing may be evicted."""
        o = self._pop_free(c)
        if o is not None:
            return o
        for v in self.lru[c]:
            if v not in pinned and (may_evict is None or may_evict(v)):
                self.evict(v)
                return self._pop_free(c)
        return None

    def bring_in(self, t: int, pinned: set[int], may_evict=None) -> bool:
        """Swap t in now (prefetch or demand). False if no object could be had."""
        o = self.acquire(self.cls[t], pinned, may_evict)
        if o is None:
            return False
        self.b.swap_in(t, o)
        self.touch(t)
        return True

    # ---------------------------------------------------------------- hooks
    def before_inputs(self, pos: int, pinned: set[int]) -> None:
        """Called before the op's inputs are made resident (checkpoint-sqrt rebuilds dropped inputs here)."""

    def before_compute(self, pos: int, pinned: set[int]) -> None:
        """Called after the op's inputs are resident and its outputs have objects, before it runs."""

    def drop_early(self, t: int, pos: int, nxt: int) -> bool:
        """Drop t after its use at `pos` although it is used again at `nxt` (a policy's offload)."""
        return False

    # ---------------------------------------------------------------- the walk
    def run_ops(self) -> "OnDemandWalker":
        """Walk the schedule; leaves the device as the last op left it (see `finish`)."""
        g, b = self.g, self.b
        for pos, opid in enumerate(self.order):
            self.pos = pos
            op = g.ops[opid]
            ins = list(dict.fromkeys(op.inputs))
            pinned = set(ins) | set(op.outputs)
            self.before_inputs(pos, pinned)
            for t in ins:
                if not b.is_resident(t):
                    if not self.bring_in(t, pinned):
                        raise RuntimeError(f"planner bug: no object of class {self.cls[t]} for op {opid}")
                self.touch(t)
            out_objs = []
            for t in op.outputs:
                o = self.acquire(self.cls[t], pinned)
                if o is None:
                    raise RuntimeError(f"planner bug: no object of class {self.cls[t]} for op {opid}")
                self.reserved.add(o)
                out_objs.append(o)
            self.before_compute(pos, pinned)
            self.reserved.clear()
            b.compute(opid, out_objs)
            for t in op.outputs:
                self.touch(t)
                if t in self.must_host:
                    b.swap_out(t)
            for t in dict.fromkeys((*ins, *op.outputs)):
                if not b.is_resident(t):
                    continue
                nxt = self.next_use(t, pos)
                if nxt is None:
                    if t not in self.keep_resident:
                        self.drop(t)
                elif self.drop_early(t, pos, nxt):
                    self.evict(t)
        self.pos = len(self.order)
        return self

    def params_still_resident(self) -> list[int]:
        """Keepable params whose successor is on the device now: after `run_ops`, the params a next
        iteration can start with (SwapAdvisor's first pass decides residency the same way)."""
        succ = successor_map(self.g)
        return [p for p in keepable_params(self.g, self.cls) if self.b.is_resident(succ.get(p, p))]

    def finish(self) -> "OnDemandWalker":
        """Return the device to the iteration's start state, so the plan repeats."""
        settle_residents(self.b, self.g, self.initial, self.obj_class, self.valid_host_copy)
        return self


def two_pass(make_walker, graph: DataflowGraph, tensor_class: list[int]) -> OnDemandWalker:
    """Periodic plan in two passes. The first starts with no params on the device and keeps every param
    (and update) it meets while memory lasts; those still resident at its end are the second pass's
    initial residents, and the second pass is settled. `make_walker(resident_params, keep)` builds a walker."""
    first = make_walker([], keepable_params(graph, tensor_class)).run_ops()
    return make_walker(first.params_still_resident(), None).run_ops().finish()
