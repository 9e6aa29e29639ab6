"""recompute-only: evicted activations are dropped and recomputed, never copied; only params, optimizer state,
inputs and results cross the link.

It stands for activation checkpointing / rematerialisation without offload (Chen et al. 2016, Checkmate's
recompute-only mode, the `recompute` tag of Megatron's and PyTorch's selective checkpointing) under the
same on-demand engine as odswap: default schedule, exact-size pool, LRU eviction, params resident across
iterations as a first pass leaves them. When a class is full, the least-recently-used tensor is evicted:
a produced tensor (activation or gradient) whose producer may be recomputed (`planner.recompute`) is dropped
without a copy; when an op needs it again, the producer is run again on the compute stream, its inputs made
resident first (swapped in if they have a host copy, recomputed if they were dropped too).

Chain depth. A dropped tensor's rebuild is a chain of at most `MAX_CHAIN_DEPTH` recomputes. A tensor that a
dropped one still needs to be rebuilt is itself needed later: evicting it either drops it too (if every chain
through it stays within the bound and reads no param after that param's update) or copies it out. Those
copies of activations are the fallback the bound costs; the plan's `search` records how many.

Room. A rebuild needs objects for its chain besides the op's own tensors, which the exact-size pool's floor
does not count. When a rebuild finds no object, the walk starts again with that tensor barred from being
dropped (it is copied out instead); each restart bars one more tensor, so the walk ends, at worst as odswap.
"""
from __future__ import annotations

from ...plan import Plan
from ..context import PlanningContext
from ..recompute import MAX_CHAIN_DEPTH, recomputable_ops, update_positions
from .common import assemble_plan, default_order, default_pool
from .odswap import LruPrefetchWalker
from .walker import OnDemandWalker, two_pass


class _NoRoomToRebuild(Exception):
    def __init__(self, t: int):
        self.tensor = t


class RecomputeWalker(LruPrefetchWalker):
    """On-demand LRU walk whose evictions of produced tensors drop them for recompute (module docstring)."""

    max_depth = MAX_CHAIN_DEPTH

    def __init__(self, *a, barred=frozenset(), **kw):
        super().__init__(*a, **kw)
        self.barred = barred                   # tensors whose rebuild found no room in an earlier walk
        g = self.g
        self.recomputable = recomputable_ops(g)
        self.upd_pos = update_positions(g, self.order)
        self.persistent = [g.is_persistent(t) for t in range(g.num_tensors)]
        self.dropped: dict[int, int] = {}      # dropped for recompute, not rebuilt since -> latest rebuild position
        self.dependents: dict[int, set] = {}   # tensor -> dropped tensors whose producer reads it
        self.recomputes = 0
        self.fallback_swaps = 0                # activations copied out because a chain would break the bound

    # ---------------------------------------------------------------- what may be dropped
    def _inputs(self, t: int) -> list[int]:
        return list(dict.fromkeys(self.g.ops[int(self.producer[t])].inputs))

    def _is_dropped(self, t: int, extra: int) -> bool:
        return t == extra or (t in self.dropped and not self.b.is_resident(t))

    def _depth(self, t: int, until: int, extra: int = -1) -> int | None:
        """Recomputes needed to rebuild t before schedule position `until` (None: impossible within the bound,
        or a param in the chain is updated before then). `extra` counts as dropped (the tensor being evicted)."""
        d = 1
        for i in self._inputs(t):
            u = self.upd_pos.get(i)
            if u is not None and u < until:
                return None
            if self._is_dropped(i, extra):
                s = self._depth(i, until, extra)
                if s is None:
                    return None
                d = max(d, s + 1)
            elif not self.b.is_resident(i) and not self.valid_host_copy(i):
                return None          # gone for good (dropped after its last use): nothing to rebuild from
        return d if d <= self.max_depth else None

    def _ancestors(self, t: int) -> list[int]:
        out, stack, seen = [], [t], {t}
        while stack:
            for z in self.dependents.get(stack.pop(), ()):
                if z not in seen:
                    seen.add(z)
                    out.append(z)
                    stack.append(z)
        return out

    def _try_drop_for_recompute(self, t: int) -> bool:
        p = int(self.producer[t])
        if p < 0 or self.persistent[t] or t in self.keep_resident or t in self.must_host \
                or not self.recomputable[p] or t in self.barred:
            return False
        nxt = self.next_use(t)
        until = max([nxt if nxt is not None else -1] + [self.dropped[z] for z in self.dependents.get(t, ())])
        if until < 0 or self._depth(t, until) is None:
            return False
        if any(self._depth(z, self.dropped[z], extra=t) is None for z in self._ancestors(t)):
            return False
        self.dropped[t] = until
        for i in self._inputs(t):
            self.dependents.setdefault(i, set()).add(t)
        # every dropped tensor t's rebuild needs is now needed as late as t
        stack = [i for i in self._inputs(t) if i in self.dropped and not self.b.is_resident(i)]
        while stack:
            i = stack.pop()
            if self.dropped[i] < until:
                self.dropped[i] = until
                stack.extend(j for j in self._inputs(i) if j in self.dropped and not self.b.is_resident(j))
        return True

    # ---------------------------------------------------------------- walker hooks
    def needed_later(self, t: int, pos: int) -> bool:
        return super().needed_later(t, pos) or bool(self.dependents.get(t))

    def evict(self, t: int) -> None:
        self.evictions += 1
        if t in self.keep_resident:
            self.evicted_kept += 1
        if self.needed_later(t, self.pos) and not self.valid_host_copy(t):
            if not self._try_drop_for_recompute(t):
                self.b.swap_out(t)
                if not self.persistent[t]:
                    self.fallback_swaps += 1
        OnDemandWalker.drop(self, t)

    def drop(self, t: int) -> None:
        """A tensor past its last use: still needed if a dropped tensor's rebuild reads it."""
        if self.dependents.get(t) and not self.valid_host_copy(t):
            self.evict(t)
        else:
            OnDemandWalker.drop(self, t)

    def bring_in(self, t: int, pinned: set[int], may_evict=None) -> bool:
        if t in self.dropped and not self.valid_host_copy(t):
            return self._rebuild(t, pinned, may_evict)
        return super().bring_in(t, pinned, may_evict)

    def _rebuild(self, t: int, pinned: set[int], may_evict) -> bool:
        op = int(self.producer[t])
        ins = self._inputs(t)
        chain = set(pinned) | set(ins) | {t}
        for i in ins:
            if not self.b.is_resident(i) and not self.bring_in(i, chain, may_evict):
                raise _NoRoomToRebuild(t)
            self.touch(i)
        o = self.acquire(self.cls[t], chain, may_evict)
        if o is None:
            raise _NoRoomToRebuild(t)
        self.b.recompute(op, [o])
        self.recomputes += 1
        del self.dropped[t]
        for i in ins:
            self.dependents[i].discard(t)
        self.touch(t)
        for i in ins:   # brought back only for this rebuild: let it go again
            if i not in pinned and self.b.is_resident(i) \
                    and self.next_use(i) is None and i not in self.keep_resident:
                self.drop(i)
        return True


def plan_recompute_only(ctx: PlanningContext) -> Plan:
    g = ctx.graph
    order = default_order(g)
    layout = default_pool(ctx, g, order, planner="recompute-only")

    barred: set[int] = set()

    def make(resident, keep):
        return RecomputeWalker(g, order, layout.pool, layout.tensor_class, resident, keep, barred=frozenset(barred))

    while True:
        try:
            w = two_pass(make, g, layout.tensor_class)
            break
        except _NoRoomToRebuild as e:
            if e.tensor in barred:
                raise RuntimeError(f"planner bug: tensor {e.tensor} was barred from recompute but rebuilt") from None
            barred.add(e.tensor)
    return assemble_plan(ctx, "recompute-only", order, layout.pool, layout.tensor_class, w.initial, w.b,
                         search={"evictions": w.evictions, "recomputes": w.recomputes,
                                 "fallback_swaps": w.fallback_swaps, "max_chain_depth": w.max_depth,
                                 "barred": len(barred)})
