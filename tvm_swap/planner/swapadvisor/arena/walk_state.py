"""The state of one walk (walk.ArenaWalk.run) and what changes it: eviction (Belady shifted by the genome's
biases, per group when the genome splits the capacity), swap-ins issued as early as the per-slot usage
allows (the prefetch), new stays, releases after a use, and rebuilds of tensors dropped for recompute (a dead
input rebuilt for one rebuild stays for the next pending rebuild that reads it: release_extra).

Every stay the walk opens is counted in `resident` while it lasts and in the per-slot usage (slot_usage.py)
over the slots it covers, so at every slot the bytes of the stays covering it stay within the capacity.
Nothing here refers back to the state, so a walk leaves no reference cycle (plan_graph and the search pause
the cyclic GC: gc_pause.py)."""
from __future__ import annotations

import heapq
from heapq import heappop, heappush

import numpy as np

from ....errors import PlanError
from ...graphindex import NEVER
from . import tuning
from .soundness import RebuildCheck


class WalkState:
    """Per tensor: its current stay (loc), next use (nxt), last use so far (last), the slot after which a
    host copy exists (host_ready: -2 none, -1 from the start), the slot it was produced at (prod_slot). Per
    stay: its tensor, first and last slot. The decisions so far: swap_outs, drops, swap_ins, recomputes,
    dirty (swapped-out stays), inplace. `check`: the recompute soundness (None: a swap-only walk)."""

    def __init__(self, walk, capacity: int, bias: list, pinned_tensors, pairs, split: float, recompute,
                 depth: int, window: int):
        # (numba: imported when a walk runs, so what imports the planner without walking, such as the
        # command line's early refusals, does not load it)
        from ..slot_usage import new_usage, prefetch_slot, usage_add

        self._prefetch_slot, self._usage_add = prefetch_slot, usage_add
        n, n_t = walk.n, walk.gi.n_tensors
        self.n, self.capacity, self.bias, self.window, self.split = n, capacity, bias, window, split
        self.size, self.group, self.produced = walk.size, walk.group, walk.produced
        self.first_pos = walk.first_pos
        self.stay_t: list[int] = []
        self.stay_first: list[int] = []
        self.stay_last: list[int] = []
        self.loc = [-1] * n_t
        self.nxt = [NEVER] * n_t
        self.last = [-1] * n_t
        self.host_ready = [-2 if p else -1 for p in self.produced]
        self.prod_slot = [-1] * n_t
        self.ub, self.ul, self.um = new_usage(n)   # bytes of stays covering each slot (decided so far)
        self.heaps: list = [[], []]                 # eviction candidates per group (0: params and state)
        self.group_res = [0, 0]
        share = int(split * capacity) if split >= 0 else capacity
        self.group_cap = [share, capacity - share] if split >= 0 else [capacity, capacity]
        self.resident = 0
        self.evicted = 0
        self.out_stays: list = [None] * n
        self.dirty: list = []              # (slot of the swap-out, stay): its bytes free once the copy is done
        self.swap_outs: list = []
        self.drops: list = []
        self.swap_ins: list = []
        self.recomputes: list = []         # (slot, op, stays)
        self.inplace: list = []            # (op, out, in) run in place
        self.rb_extra: list = []           # (tensor, next use): resident for a rebuild at this slot only
        # dead tensors rebuilt (or brought) for one rebuild and kept for a later one: tensor -> that slot
        self.kept_dead: dict = {}
        self.kept_due: dict = {}           # slot -> tensors kept_dead until then
        self._hold_pairs_and_pins(walk, pinned_tensors, pairs)
        pin_bytes = self.resident + 2 * sum(self.size[p] for p, _ in pairs)
        rc = None if recompute is None or not np.any(recompute) else np.asarray(recompute, dtype=bool).tolist()
        self.check = None if rc is None else RebuildCheck(walk.rc_facts(), rc, walk.sched, self.size,
                                                          self.produced, self.nxt, depth, capacity - pin_bytes)
        self.pending = {} if rc is None else self.check.pending   # dropped for recompute, not rebuilt yet

    def _hold_pairs_and_pins(self, walk, pinned_tensors, pairs) -> None:
        """Kept pairs count against the capacity while they hold bytes: the old value is resident from the
        start and dropped after its last read (a victim like any other), the update stays from its production
        to the end (layout.py gives them zones that are renamed between iterations). Pinned tensors hold a
        stay over the whole iteration."""
        size, group, loc, nxt, heaps, bias = self.size, self.group, self.loc, self.nxt, self.heaps, self.bias
        self.pin = pin = set(pinned_tensors)
        self.pinned = []
        self.pairs = pairs
        self.pair_old = {p for p, _ in pairs}
        self.pair_new = {q for _, q in pairs}
        self.reserved = self.pair_old | self.pair_new
        first_pos = self.first_pos
        for p, _ in pairs:
            loc[p] = len(self.stay_t)
            self.pinned.append((p, loc[p]))
            self._open(p, -1, -2)
            nxt[p] = first_pos[p]
            heaps[group[p]].append((-(nxt[p] + bias[p]), nxt[p], p))   # a victim like any other
        for h in heaps:
            heapq.heapify(h)
        self.pair_first = [loc[p] for p, _ in pairs]
        self.old_of_new = {q: p for p, q in pairs}
        self.evicted_pairs: set = set()    # kept params whose old value or update left mid-iteration
        for t in sorted(pin):
            loc[t] = len(self.stay_t)
            self.pinned.append((t, loc[t]))
            self._open(t, -1, self.n)
        if self.resident > self.capacity:
            raise PlanError("pinned tensors alone exceed the capacity")

    def _open(self, t: int, first: int, last: int) -> int:
        """A new stay of t, counted resident."""
        sid = len(self.stay_t)
        self.stay_t.append(t)
        self.stay_first.append(first)
        self.stay_last.append(last)
        self.resident += self.size[t]
        self.group_res[self.group[t]] += self.size[t]
        return sid

    def _top(self, h, i: int):
        """The best valid candidate's heap entry (stale entries dropped), or None."""
        loc, nxt = self.loc, self.nxt
        while h:
            _, nu, v = h[0]
            if loc[v] >= 0 and nxt[v] == nu and nu > i:
                return h[0]
            heappop(h)
        return None

    def victim(self, i: int, g: int) -> int:
        """Belady over both groups; with a split, the group over its share gives first."""
        heaps = self.heaps
        if self.split >= 0:
            res, cap = self.group_res, self.group_cap
            first = g if res[g] > cap[g] or res[1 - g] <= cap[1 - g] else 1 - g
            for h in (heaps[first], heaps[1 - first]):
                if self._top(h, i) is not None:
                    return heappop(h)[2]
            return -1
        a, b = self._top(heaps[0], i), self._top(heaps[1], i)
        if a is None and b is None:
            return -1
        h = heaps[0] if b is None or (a is not None and a[0] <= b[0]) else heaps[1]
        return heappop(h)[2]

    def evict(self, v: int, i: int) -> None:
        """v leaves after its last use so far: copied out first when it is needed again and the host has no
        copy, unless the recompute check lets it be dropped and rebuilt at its next use."""
        d = self.last[v]
        host_ready, loc, size = self.host_ready, self.loc, self.size
        if v in self.kept_dead:           # dead, held for a later rebuild only: it rebuilds itself there
            del self.kept_dead[v]
            self._gone(v, self.last[v], i)
            self.nxt[v] = NEVER           # dead again: a rebuild that reads it later rebuilds it for its slot
            return
        if v in self.reserved:
            self.evicted_pairs.add(self.old_of_new.get(v, v))
        if self.nxt[v] < NEVER and host_ready[v] == -2:
            if self.check is not None and self.check.may_drop(v):
                self.check.hold(v)
            else:
                self.swap_outs.append((self.prod_slot[v], v))
                self.dirty.append((self.prod_slot[v], loc[v]))
        if host_ready[v] < d and v not in self.pending:
            host_ready[v] = d
        sid = loc[v]
        self.drops.append((d, v, sid))
        self.stay_last[sid] = d
        loc[v] = -1
        self.resident -= size[v]
        self.group_res[self.group[v]] -= size[v]
        if d + 1 < i:
            self._usage_add(self.ub, self.ul, self.um, d + 1, i, -size[v])
        self.evicted += 1

    def make_room(self, need: int, i: int, g: int) -> None:
        capacity = self.capacity
        while self.resident + need > capacity:
            v = self.victim(i, g)
            if v < 0 and self.kept_dead:
                # kept for a rebuild at this very slot, not read yet: rebuilt there as it would have been
                # without the keeping, whose room soundness.py guarantees
                v = max(self.kept_dead, key=self.nxt.__getitem__)
            if v < 0:
                raise PlanError(f"the op at position {i} needs {need} more bytes than fit beside what it "
                                f"uses ({self.resident} of {capacity} bytes)")
            self.evict(v, i)

    def bring(self, t: int, i: int) -> None:
        """Swap t in for slot i, issued as early as the slots before allow (the prefetch)."""
        hr = self.host_ready[t]
        if hr == -2:
            raise PlanError(f"planner bug: tensor {t} is read at position {i} but is neither resident "
                            f"nor on the host")
        if t in self.pair_old:
            # a kept pair's old value read from the host (evicted, or dead and read again by a rebuild:
            # llama's embedding lookup, recomputed in the backward pass after 'embed' was dropped): the
            # host copy is current only if the update is copied out, so count the pair as having left
            self.evicted_pairs.add(t)
        need = self.size[t]
        self.make_room(need, i, self.group[t])
        lo = max(hr, i - self.window)           # the copy may be issued after slot lo at the earliest
        # after the last slot before i without room for it; the slots it then spans hold it
        q = self._prefetch_slot(self.ub, self.ul, self.um, lo, i, self.capacity - need, need) if lo + 1 < i else lo
        sid = self._open(t, q + 1, -2)
        self.loc[t] = sid
        self.nxt[t] = i
        self.swap_ins.append((q, t, sid))

    def new_stay(self, t: int, i: int) -> int:
        """A stay of t written at slot i (by the op, or by a recompute: held for the slot, nxt is i)."""
        stay_t = self.stay_t
        sid = len(stay_t)                      # (_open, inline: per output)
        stay_t.append(t)
        self.stay_first.append(i)
        self.stay_last.append(-2)
        sz = self.size[t]
        self.resident += sz
        self.group_res[self.group[t]] += sz
        self.loc[t] = sid
        self.nxt[t] = i
        self.prod_slot[t] = i
        return sid

    def release_or_requeue(self, t: int, nu: int, i: int) -> None:
        """After the op at slot i touched t (next use nu): dropped when never used again, else a victim
        candidate again. An update of a kept pair plays its param next iteration: a victim, the furthest."""
        if nu == NEVER and t in self.pair_new:
            nu = self.n + self.first_pos[self.old_of_new[t]]
            self.nxt[t] = nu
        if nu == NEVER:
            sid = self.loc[t]
            self.drops.append((i, t, sid))
            self.stay_last[sid] = i
            hr = self.host_ready[t]
            if hr != -2 and hr < i:
                self.host_ready[t] = i
            self.loc[t] = -1
            self.resident -= self.size[t]
            self.group_res[self.group[t]] -= self.size[t]
        else:
            heappush(self.heaps[self.group[t]], (-(nu + self.bias[t]), nu, t))

    def rebuild(self, t: int, i: int) -> None:
        """Recompute t right before the op at slot i, its producer's inputs made resident first (held for
        this slot: a rebuild's inputs are never victims while it runs). t is pending, or an input of a
        rebuild that is dead by now without a host copy (rebuilt for this slot only, see soundness.py)."""
        f = self.check.f
        loc, nxt, rb_extra = self.loc, self.nxt, self.rb_extra
        p = f.producer[t]
        for x in f.op_inputs[p]:
            saved = nxt[x]
            if loc[x] >= 0:
                if x in self.kept_dead:        # held for this rebuild: read here, then dead again
                    del self.kept_dead[x]
                    saved = NEVER
                elif saved == i:
                    continue
                nxt[x] = i
            elif x in self.pending or (self.host_ready[x] == -2 and self.produced[x]):
                self.rebuild(x, i)             # (dead: saved is NEVER, so it is dropped after slot i)
            else:
                self.bring(x, i)
            if saved != i:                     # not read by the op itself: release after this slot
                rb_extra.append((x, saved))
        self.make_room(self.size[t], i, self.group[t])
        sids = [self.new_stay(t, i)]
        for o in f.op_sec[p]:                  # written again beside t: placed anew, the old copy dropped
            if loc[o] >= 0:                    # (not in use at i: `within` keeps the op at i from reading it)
                self._drop_secondary(o, i)
            saved = nxt[o]
            self.make_room(self.size[o], i, self.group[o])
            sids.append(self.new_stay(o, i))
            rb_extra.append((o, saved))        # released after this slot like a rebuild's input
        self.recomputes.append((i, p, tuple(sids)))
        self.check.done(t)

    def _drop_secondary(self, o: int, i: int) -> None:
        self._gone(o, self.last[o], i)

    def _gone(self, t: int, d: int, i: int) -> None:
        """t's stay ends after slot d (found at slot i): dropped, with no copy and no rebuild planned."""
        sid = self.loc[t]
        self.drops.append((d, t, sid))
        self.stay_last[sid] = d
        self.loc[t] = -1
        self.resident -= self.size[t]
        self.group_res[self.group[t]] -= self.size[t]
        if d + 1 < i:
            self._usage_add(self.ub, self.ul, self.um, d + 1, i, -self.size[t])

    def release_extra(self, t: int, nu: int, i: int) -> None:
        """After slot i, t was resident for a rebuild only. Dead (nu NEVER) but read by the chain of a pending
        rebuild later: kept for it as a victim like any other (its next use that rebuild's slot) instead of
        dropped and rebuilt again there. Issue 28: BERT-large@32 rebuilt each attention's softmax, scores and
        query/key projections for the context 10 slots before rebuilding them again for the softmax's transpose
        (129 kernels twice). Else released as before."""
        if nu == NEVER and self.check is not None and tuning.KEEP_REBUILT_INPUTS:
            later = [z for z in self.check.dependents.get(t, ()) if self.nxt[z] > i]
            if later:
                nu = min(self.nxt[z] for z in later)
                self.kept_dead[t] = nu
                self.kept_due.setdefault(nu, []).append(t)
                self.nxt[t] = nu
                heappush(self.heaps[self.group[t]], (-(nu + self.bias[t]), nu, t))
                return
        self.release_or_requeue(t, nu, i)

    def expire_kept(self, i: int) -> None:
        """After slot i: what was kept for a rebuild at i that did not read it (the pending tensor was rebuilt
        earlier by another chain) is dropped now."""
        for t in self.kept_due.pop(i, ()):
            if self.kept_dead.get(t) == i:
                del self.kept_dead[t]
                self.nxt[t] = NEVER
                self.last[t] = i
                self.release_extra(t, NEVER, i)
