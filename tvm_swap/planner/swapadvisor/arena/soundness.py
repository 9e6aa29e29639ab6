"""Whether the walk may drop an evicted tensor and recompute it at its next use (swap or recompute).

A drop for recompute is sound when the producer of the tensor can run again right before the op that next
reads it: no param it reads is updated before then; every produced input is still live then (resident, on
the host, or pending a rebuild itself), or dead by then and rebuildable from available inputs (rebuilt for
that slot only, unless a host copy exists: attention scores, dead when the backward pass reads the softmax
made from them); every chain of rebuilds through it stays within `depth` recomputes; and the op's working
set plus every rebuild chain planned for that slot (inputs and outputs) fits what pinned tensors leave of
the capacity, so a rebuild always finds room. RebuildCheck answers that, and keeps the books of the drops it
allowed (pending rebuilds, the bytes planned per slot)."""
from __future__ import annotations

from typing import NamedTuple

from ...recompute import update_positions
from .recomputable import recompute_candidates, secondaries


class RebuildFacts(NamedTuple):
    """What drop + recompute decisions need about one graph and schedule (built once per ArenaWalk)."""
    producer: list      # per tensor: its producing op (-1: none)
    op_inputs: list     # per op: its distinct inputs
    persistent: list    # per tensor: a param or optimizer state
    upd_slot: dict      # param -> the slot of its update
    last_touch: list    # per tensor: the last slot touching it
    op_ws: list         # per slot: the op's working set (bytes)
    rebuildable: list   # per tensor: may be recomputed (recomputable.recompute_candidates)
    op_sec: list        # per op: its secondaries (recomputable.secondaries)


def rebuild_facts(gi, sched: list, size: list) -> RebuildFacts:
    g = gi.graph
    last_touch = [-1] * gi.n_tensors
    for i, op in enumerate(sched):
        for t in (*g.ops[op].inputs, *g.ops[op].outputs):
            last_touch[t] = i
    ws = [sum(size[t] for t in dict.fromkeys((*g.ops[op].inputs, *g.ops[op].outputs))) for op in sched]
    return RebuildFacts(g.producer().tolist(), [list(dict.fromkeys(op.inputs)) for op in g.ops],
                        [g.is_persistent(t) for t in range(g.num_tensors)], update_positions(g, sched), last_touch,
                        ws, recompute_candidates(gi).tolist(), secondaries(gi))


class RebuildCheck:
    """The soundness of drops for recompute within one walk, and the rebuilds it has planned.

    pending: tensors dropped for recompute, not rebuilt yet; dependents: tensor -> pending tensors whose
    rebuild chain reads it; rb_load: slot -> bytes of the rebuild chains planned for it (never lowered);
    chain_rec: pending tensor -> its chain's bytes as counted in rb_load; reads_of: pending tensor -> what
    its rebuild chain reads (the keys it holds in dependents)."""

    def __init__(self, facts: RebuildFacts, rc: list, sched: list, size: list, produced: list, nxt: list,
                 depth: int, room: int):
        self.f = facts
        # the facts the recursions read, one attribute lookup away (they run per eviction)
        self.producer, self.op_inputs, self.op_sec = facts.producer, facts.op_inputs, facts.op_sec
        self.persistent, self.last_touch = facts.persistent, facts.last_touch
        self.rc, self.sched, self.n = rc, sched, len(sched)
        self.size, self.produced = size, produced
        self.nxt = nxt                  # the walk's next use per tensor (shared, read only here)
        self.depth = depth
        self.room = room                # the capacity less what pinned tensors and kept pairs hold
        self.rb_load: dict = {}
        self.chain_rec: dict = {}
        self.pending: dict = {}
        self.dependents: dict = {}
        self.reads_of: dict = {}

    def rebuilt(self, x: int, extra: int, at: int) -> bool:
        """Whether a rebuild at slot `at` rebuilds input x too: x is pending (or `extra`, about to be),
        or dead by then (produced, no touch left at `at`: dropped after its last use)."""
        return x == extra or x in self.pending or (self.produced[x] and not self.persistent[x]
                                                   and self.last_touch[x] < at)

    def within(self, t: int, extra: int, at: int) -> bool:
        """Whether rebuilding t at slot `at` takes at most `depth` recomputes deep (`extra` counts as
        pending). Memoised per (tensor, level) and cut at `depth`: linear in the tensors that close."""
        reads_at = self.op_inputs[self.sched[at]] if at < self.n else ()
        return self._within(t, 1, extra, at, reads_at, {})

    def _within(self, u: int, lvl: int, extra: int, at: int, reads_at, memo: dict) -> bool:
        if lvl > self.depth:
            return False
        r = memo.get((u, lvl))
        if r is None:
            p = self.producer[u]
            # a secondary the op at `at` reads is in use there: the rebuild could not place it anew
            r = not any(o in reads_at for o in self.op_sec[p]) \
                and all(self._within(x, lvl + 1, extra, at, reads_at, memo)
                        for x in self.op_inputs[p] if self.rebuilt(x, extra, at))
            memo[(u, lvl)] = r
        return r

    def chain_bytes(self, t: int, extra: int, at: int, memo: dict) -> int:
        """Bytes a rebuild of t at slot `at` holds at once: its output and its producer's inputs, chains
        included (a shared input counted once per reader: an upper bound). Call after `within`."""
        hit = memo.get(t)
        if hit is None:
            size, p = self.size, self.producer[t]
            hit = size[t] + sum(size[o] for o in self.op_sec[p])
            for x in self.op_inputs[p]:
                hit += self.chain_bytes(x, extra, at, memo) if self.rebuilt(x, extra, at) else size[x]
            memo[t] = hit
        return hit

    def sound(self, t: int, at: int, reads: set, lvl: int, ok: set) -> bool:
        """Whether t's producer can run again at slot `at` (t at level `lvl` of a rebuild chain): no
        param it reads is updated before, and every produced input is still live then, or dead but
        rebuildable itself within `depth` levels (a temporary whose producer may be recomputed, whose
        own inputs are sound at `at`: rebuilt for that slot only). A pending input dead by `at` counts as
        dead: it is rebuilt at its own next use, before `at`, and again at `at` (fuzz seed 1920: such an
        input's producer read a param updated in between). Collects every tensor the rebuild reads,
        through dead inputs, in `reads`."""
        f = self.f
        for x in self.op_inputs[self.producer[t]]:
            reads.add(x)
            if self.persistent[x]:
                u = f.upd_slot.get(x)
                if u is not None and u < at:
                    return False
            elif self.produced[x] and self.last_touch[x] < at:
                if (x, lvl) in ok:
                    continue
                if lvl >= self.depth or not f.rebuildable[x] or not self.sound(x, at, reads, lvl + 1, ok):
                    return False
                ok.add((x, lvl))
        return True

    def may_drop(self, v: int) -> bool:
        """Whether evicted v may be dropped and rebuilt at its next use; if so, its chain's bytes (and those
        of the pending chains that read it, which grow) are booked in rb_load."""
        if not self.rc[v]:
            return False
        nxt = self.nxt
        nu = nxt[v]
        reads: set = set()
        if not self.sound(v, nu, reads, 1, set()) or not self.within(v, -1, nu):
            return False
        cb = self.chain_bytes(v, -1, nu, {})
        grow = {nu: cb}                    # slot -> bytes its rebuild load would grow by
        ancestors = {}
        stack, seen = [v], {v}
        while stack:
            for z in self.dependents.get(stack.pop(), ()):
                if z not in seen:
                    if not self.within(z, v, nxt[z]):
                        return False
                    seen.add(z)
                    stack.append(z)
                    ancestors[z] = self.chain_bytes(z, v, nxt[z], {})
                    grow[nxt[z]] = grow.get(nxt[z], 0) + ancestors[z] - self.chain_rec[z]
        rb_load, op_ws, room = self.rb_load, self.f.op_ws, self.room
        if any(op_ws[s] + rb_load.get(s, 0) + b > room for s, b in grow.items()):
            return False
        for s, b in grow.items():
            rb_load[s] = rb_load.get(s, 0) + b
        self.chain_rec[v] = cb
        self.chain_rec.update(ancestors)
        self.reads_of[v] = reads
        return True

    def hold(self, v: int) -> None:
        """v was dropped for recompute (after may_drop said yes): pending until rebuilt."""
        self.pending[v] = True
        dependents = self.dependents
        for x in self.reads_of[v]:
            dependents.setdefault(x, set()).add(v)

    def done(self, t: int) -> None:
        """t was rebuilt: no longer pending."""
        if t in self.pending:
            del self.pending[t]
            for x in self.reads_of.pop(t):
                self.dependents[x].discard(t)
