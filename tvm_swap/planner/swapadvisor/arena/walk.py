"""The walk: SwapAdvisor's swap planner (swapplan.py) with a byte budget instead of size classes.

It follows the schedule; an op's tensors must all be resident; while the resident bytes plus what the op
brings in exceed the capacity, the resident with the furthest next use (Belady, shifted by the genome's
per-tensor eviction bias) is evicted right after its last use so far (a swap-out right after it was produced
when it will be needed again and the host has no copy, or a drop when soundness.py lets it be recomputed). A
swap-in starts as early as the per-slot usage allows (the slots between its start and its use all keep room
for it) and no earlier than its host copy exists: that is the prefetch. Each arrival opens a stay
(decisions.py). An op may write its output into an input that dies there (in place: the output continues the
input's stay). The state of one walk and its operations are in walk_state.py.

Cost: O((ops + tensor touches) log tensors) plus, per swap-in and per eviction, one range update of the
per-slot usage between the copy and the use (slot_usage.py: by blocks)."""
from __future__ import annotations

from heapq import heappush

import numpy as np

from ...graphindex import NEVER, ROLE_KEEP, ROLE_TEMP, ROLE_TO_HOST, GraphIndex
from ...recompute import MAX_CHAIN_DEPTH
from . import tuning
from .capacity import op_bytes
from .decisions import Decisions
from .soundness import rebuild_facts
from .walk_state import WalkState


class ArenaWalk:
    """The facts of one schedule that every walk over it reads (next uses per touch, sizes, roles, groups,
    in-place candidates), and `run`, one walk at a capacity."""

    def __init__(self, gi: GraphIndex, schedule: np.ndarray):
        n = gi.n_ops
        self.gi, self.n = gi, n
        self.cum = None
        self.sched = schedule.tolist()
        first_pos, nxt = gi.next_uses(schedule)     # no ROLE_KEEP_NEW here: the exact periodicity rule
        self.first_pos = first_pos.tolist()
        self.touch_next = nxt.tolist()
        self.touch_t = gi.op_tensors.tolist()
        self.op_ptr = gi.op_ptr.tolist()
        self.op_nin = gi.op_nin.tolist()
        self.role = gi.role.tolist()
        self.produced = gi.produced.tolist()
        self.size = gi.size.tolist()
        kinds = gi.graph.tensors
        self.group = [0 if kinds[t].kind in ("param", "optimizer_state") else 1 for t in range(gi.n_tensors)]
        self._rc_facts = None
        self._floor = None
        self.inplace = gi.graph.inplace_pairs()     # op -> ((out, in), ...) the kernel may run in place

    def rc_facts(self):
        """What drop + recompute decisions need (soundness.RebuildFacts), built on first use."""
        if self._rc_facts is None:
            self._rc_facts = rebuild_facts(self.gi, self.sched, self.size)
        return self._rc_facts

    def floor(self) -> int:
        """The largest working set of an op in this schedule, counting in-place outputs only where the walk
        takes them (their input dies there): every capacity at or above it gets a walk (working_set_floor,
        schedule-free, may be lower)."""
        if self._floor is None:
            size, ptr, nin = self.size, self.op_ptr, self.op_nin
            need = op_bytes(self.gi)           # (the schedule only decides which in-place pairs are taken)
            if self.inplace:
                need = need.copy()
                for op in self.inplace:
                    need[op] -= sum(size[y] for y in self.in_place(op, ptr[op], ptr[op] + nin[op], (), ()))
            self._floor = int(need.max(initial=0))
        return self._floor

    def in_place(self, op: int, a: int, k_out: int, pin, reserved) -> dict:
        """{out: in} of the op's in-place pairs to take at its slot: the input is an intermediate that dies
        here (no later touch: not swapped out to come back, not read again) and is not pinned or kept; each
        input and output once. Its output then needs no bytes of its own."""
        dying = {self.touch_t[k] for k in range(a, k_out) if self.touch_next[k] == NEVER}
        over: dict = {}
        for y, x in self.inplace[op]:
            if y not in over and x in dying and x not in over.values() and self.role[x] == ROLE_TEMP \
                    and x not in pin and x not in reserved and self.size[x] == self.size[y]:
                over[y] = x
        return over

    def set_timing(self, op_time, d2h_bandwidth: float) -> None:
        """Op seconds and the device-to-host rate, so placement can keep a tensor's bytes until its copy to
        the host is likely done (cooling.cooled_lasts); without them placement reuses bytes at the drop."""
        t = np.asarray(op_time, dtype=np.float64)[np.asarray(self.sched, dtype=np.int64)]
        self.cum = np.cumsum(t)
        self.d2h = float(d2h_bandwidth)

    def run(self, capacity: int, bias: list, pinned_tensors=(), pairs=(), split: float = -1.0,
            recompute=None, depth: int = MAX_CHAIN_DEPTH, window: int | None = None) -> Decisions:
        """One walk at `capacity` bytes (see the module docstring).

        window: how many slots before its use a swap-in may start (default tuning.PREFETCH_WINDOW; 1: just in
        time, at the op before: the last resort of rounds.rounds at the floor, where an early prefetch that fits
        the capacity can still find no address range: small_cnn at batch 128 prefetched a 512 KiB weight across
        the 8 MiB stays of two ops, 0.52 MiB over the floor).

        recompute (bool per tensor, or None): an evicted tensor marked True is dropped without a copy and
        rebuilt by a recompute right before the op that next reads it, when soundness.RebuildCheck finds that
        sound (its chains within `depth` recomputes) and with room; otherwise it is copied out."""
        window = tuning.PREFETCH_WINDOW if window is None else window
        st = WalkState(self, capacity, bias, pinned_tensors, pairs, split, recompute, depth, window)
        _walk_slots(self, st)
        return _finish(self, st)


def _walk_slots(walk: ArenaWalk, st: WalkState) -> None:
    """Every slot of the schedule in order: bring the op's inputs in (or rebuild them), make room for its
    outputs (or run it in place), then release or requeue what it touched. The planner's innermost loop:
    everything it reads is bound to a local."""
    from ..slot_usage import usage_set      # (numba: see WalkState.__init__)

    sched, touch_t, touch_next, op_ptr, op_nin = walk.sched, walk.touch_t, walk.touch_next, walk.op_ptr, walk.op_nin
    role, size, group, inplace_ops, in_place = walk.role, walk.size, walk.group, walk.inplace, walk.in_place
    loc, nxt, last, prod_slot, host_ready = st.loc, st.nxt, st.last, st.prod_slot, st.host_ready
    pending, pin, reserved, pair_new = st.pending, st.pin, st.reserved, st.pair_new
    out_stays, swap_outs, dirty, inplace, rb_extra = st.out_stays, st.swap_outs, st.dirty, st.inplace, st.rb_extra
    ub, ul, um = st.ub, st.ul, st.um
    rebuild, bring, make_room, new_stay, release = st.rebuild, st.bring, st.make_room, st.new_stay, \
        st.release_or_requeue
    heaps, bias, capacity = st.heaps, st.bias, st.capacity
    for i in range(walk.n):
        op = sched[i]
        a, b = op_ptr[op], op_ptr[op + 1]
        k_out = a + op_nin[op]
        for k in range(a, b):          # mark the op's tensors as in use now: never victims for this op
            t = touch_t[k]
            if loc[t] >= 0:
                nxt[t] = i
        outs = []
        for k in range(a, k_out):
            t = touch_t[k]
            if loc[t] >= 0:
                continue
            if t in pending:
                rebuild(t, i)
            else:
                bring(t, i)
        over = in_place(op, a, k_out, pin, reserved) if op in inplace_ops else None
        for k in range(k_out, b):
            t = touch_t[k]
            if over and t in over:     # run in place: t continues the stay of the input that dies here
                x = over[t]
                sid = loc[x]
                loc[x] = -1
                if -2 < host_ready[x] < i:     # x's host copy may still feed a rebuild: not swapped in
                    host_ready[x] = i          # before its stay, now t's, ends here
                loc[t] = sid
                nxt[t] = i
                prod_slot[t] = i
                outs.append(sid)
                inplace.append((op, t, x))
                continue
            if st.resident + size[t] > capacity:
                make_room(size[t], i, group[t])
            outs.append(new_stay(t, i))
        out_stays[i] = outs
        usage_set(ub, ul, um, i, st.resident)
        for k in range(a, b):
            t = touch_t[k]
            nu = touch_next[k]
            last[t] = i
            nxt[t] = nu
            if k < k_out and loc[t] < 0:      # overwritten in place: gone with no drop
                continue
            if k >= k_out and role[t] == ROLE_TO_HOST and t not in pair_new:
                swap_outs.append((i, t))
                dirty.append((i, loc[t]))
                host_ready[t] = i
            if t in pin:
                continue
            if nu == NEVER:
                release(t, nu, i)
            else:                              # (release_or_requeue's common case, inline: per touch)
                heappush(heaps[group[t]], (-(nu + bias[t]), nu, t))
        for t, nu in rb_extra:             # brought back for a rebuild only: the same bookkeeping
            if loc[t] < 0:
                continue
            last[t] = i
            nxt[t] = nu
            if t in pin:
                continue
            st.release_extra(t, nu, i)
        rb_extra.clear()
        if st.kept_due:
            st.expire_kept(i)


def _finish(walk: ArenaWalk, st: WalkState) -> Decisions:
    """The end of the iteration. Kept pairs: an update evicted mid-iteration comes back by the end (it plays
    its param next iteration); a param whose old value or update left mid-iteration is read from the host some
    iteration, so its update is copied out every iteration (the host copy must stay current). What is still
    resident and not pinned leaves after its last use (kept tensors have host copies; anything else still
    here has a next use only in the next iteration)."""
    n = walk.n
    loc, nxt, host_ready, prod_slot, last, stay_last = st.loc, st.nxt, st.host_ready, st.prod_slot, st.last, \
        st.stay_last
    pairs = st.pairs
    for _, q in pairs:
        if loc[q] >= 0:
            nxt[q] = n                    # held to the end: no victim for the updates coming back
    for p, q in pairs:
        if loc[q] < 0:
            st.bring(q, n)
    for p, q in pairs:
        if p in st.evicted_pairs and host_ready[q] == -2:
            st.swap_outs.append((prod_slot[q], q))
            host_ready[q] = prod_slot[q]
    pair_stays = [(st.pair_first[k], loc[q]) for k, (_, q) in enumerate(pairs)]
    for t in st.pair_new:
        stay_last[loc[t]] = n
    pin, reserved = st.pin, st.reserved
    for t in range(walk.gi.n_tensors):
        sid = loc[t]
        if sid < 0 or t in pin or t in reserved:
            continue
        if host_ready[t] == -2:
            st.swap_outs.append((prod_slot[t], t))
            st.dirty.append((prod_slot[t], sid))
        st.drops.append((last[t], t, sid))
        stay_last[sid] = last[t]
    walk.end_kept = [t for t in range(walk.gi.n_tensors) if loc[t] >= 0 and walk.role[t] == ROLE_KEEP]
    return Decisions(st.out_stays, st.swap_outs, st.drops, st.swap_ins, st.stay_t, st.stay_first, stay_last,
                     st.pinned, st.evicted, list(pairs), st.dirty, st.recomputes, pair_stays, st.inplace)
