"""odswap: on-demand swapping with LRU eviction, in the style of SuperNeurons / ODSwap.

Default schedule; exact-size pool from `default_pool`. A tensor that is not resident when an op needs it is
swapped in right then (the op waits); a full class evicts its least-recently-used tensor. The only look-ahead
is the first iteration's access order: while an op runs, the next op's missing inputs are swapped in if
their class has a free object (never by evicting). Params resident across iterations are those a first
pass leaves on the device.
"""
from __future__ import annotations

from ...plan import Plan
from .common import assemble_plan, default_order, default_pool
from .walker import OnDemandWalker, two_pass
from ..context import PlanningContext


class LruPrefetchWalker(OnDemandWalker):
    """On-demand LRU plus a one-op-ahead prefetch into free objects."""

    prefetch = True

    def before_compute(self, pos: int, pinned: set[int]) -> None:
        if not self.prefetch or pos + 1 >= len(self.order):
            return
        for t in dict.fromkeys(self.g.ops[self.order[pos + 1]].inputs):
            if not self.b.is_resident(t) and self.valid_host_copy(t) and self.has_free(self.cls[t]):
                self.bring_in(t, pinned, may_evict=lambda v: False)


def plan_odswap(ctx: PlanningContext) -> Plan:
    g = ctx.graph
    order = default_order(g)
    layout = default_pool(ctx, g, order, planner="odswap")
    prefetch = bool(ctx.options.get("odswap_prefetch", True))

    def make(resident, keep):
        w = LruPrefetchWalker(g, order, layout.pool, layout.tensor_class, resident, keep)
        w.prefetch = prefetch
        return w

    w = two_pass(make, g, layout.tensor_class)
    return assemble_plan(ctx, "odswap", order, layout.pool, layout.tensor_class, w.initial, w.b,
                         search={"evictions": w.evictions, "prefetch": prefetch})
