"""Fixed activation-offload policies (tflms, save-on-cpu, save-on-cpu-async): the shared machinery; checkpoint-sqrt
(checkpoint.py) walks its drop-and-recompute policy with it too.

The tools these stand for never evict on demand: they decide up front which activations go to the host
and when they come back, keep every parameter and optimizer state on the GPU, and run out of memory if
that is not enough. So a policy here is a set of *gaps*: (tensor, use position) pairs where the tensor is
copied to the host right after it is produced, released after the use before that gap, and brought back
at a fixed position (`prefetch at`) before the use; nothing else ever leaves the device.

`plan_policy` turns gaps into a plan in the shared exact-size pool and simulator:
1. walk the default schedule with a roomy pool (never full) and count, per size class, the most objects
   in use at once: the policy's exact memory need in this pool model;
2. refuse the limit if that need (plus the kernel workspace) exceeds it, naming the need;
3. walk again with exactly those counts (the walk is the same, so nothing is ever evicted on demand).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...errors import InfeasibleLimitError
from ...graph import DataflowGraph
from ...plan import Action, Plan, Pool
from .common import (assemble_plan, class_of_size, default_order, keepable_params, per_op_class_need,
                              resident_peak_per_class, workspace_bytes)
from .vdnn import forward_ops
from .walker import OnDemandWalker
from ..builder import ActionBuilder
from ..context import PlanningContext


def saved_activations(graph: DataflowGraph, fwd: set[int]) -> list[int]:
    """Tensors autograd saves for backward: non-persistent tensors produced in forward (or fed as
    inputs) that a backward op reads."""
    consumers = graph.consumers()
    producer = graph.producer()
    out = []
    for t in graph.used_tensors():
        if graph.is_persistent(t):
            continue
        p = int(producer[t])
        if (p < 0 or p in fwd) and any(c not in fwd for c in consumers[t]):
            out.append(t)
    return out


class SyncActionBuilder(ActionBuilder):
    """Copies that block the compute stream, as a synchronous `.to("cpu")` / `.to("cuda")` does: the op after
    a swap-out waits for it, and a swap-in cannot start before the op issued before it has finished."""

    def __init__(self, graph: DataflowGraph, num_objects: int):
        super().__init__(graph, num_objects)
        self._pending_out: list[int] = []
        self._last_compute = -1

    def _emit(self, a: Action) -> int:
        if a.kind == "compute" and self._pending_out:
            a = replace(a, deps=(*a.deps, *self._pending_out))
            self._pending_out = []
        elif a.kind == "swap_in" and self._last_compute >= 0:
            a = replace(a, deps=(*a.deps, self._last_compute))
        idx = super()._emit(a)
        if a.kind == "compute":
            self._last_compute = idx
        elif a.kind == "swap_out":
            self._pending_out.append(idx)
        return idx


class GatedActionBuilder(ActionBuilder):
    """Swap-ins gated on compute, as a graph rewrite's control edge gates them (TFLMS): a swap-in issued before
    op i starts only once op i - 1 has finished, not as soon as the copy stream and its memory are free."""

    def __init__(self, graph: DataflowGraph, num_objects: int):
        super().__init__(graph, num_objects)
        self._last_compute = -1

    def _emit(self, a: Action) -> int:
        if a.kind == "swap_in" and self._last_compute >= 0:
            a = replace(a, deps=(*a.deps, self._last_compute))
        idx = super()._emit(a)
        if a.kind == "compute":
            self._last_compute = idx
        return idx


@dataclass
class Policy:
    """What a tool offloads. gaps[(t, use)] = the position at which t is brought back for that use (the use
    itself: on demand); t leaves the device after its previous use. sync: copies block compute. gated: a
    swap-in waits for the op before its position (a control edge) instead of starting when memory allows."""
    gaps: dict[tuple[int, int], int]
    sync: bool = False
    gated: bool = False

    def tensors(self) -> set[int]:
        return {t for t, _ in self.gaps}


class PolicyWalker(OnDemandWalker):
    """Walks a Policy: offloaded tensors are copied out right after production (with the results the
    caller gets back), dropped where a gap starts and swapped in where it says."""

    def __init__(self, graph, order, pool, tensor_class, resident_params, policy: Policy):
        self.builder_class = (SyncActionBuilder if policy.sync else
                              GatedActionBuilder if policy.gated else ActionBuilder)
        super().__init__(graph, order, pool, tensor_class, resident_params, None)
        self.policy = policy
        self.must_host |= policy.tensors()          # copy out as soon as produced
        self.prefetch_at: dict[int, list[int]] = {}
        for (t, _use), at in sorted(policy.gaps.items()):
            self.prefetch_at.setdefault(at, []).append(t)
        self.policy_drops = 0
        self.failed_prefetches = 0

    def before_compute(self, pos: int, pinned: set[int]) -> None:
        for t in self.prefetch_at.get(pos, ()):
            if not self.b.is_resident(t) and not self.bring_in(t, pinned, may_evict=lambda v: False):
                self.failed_prefetches += 1

    def drop_early(self, t: int, pos: int, nxt: int) -> bool:
        if (t, nxt) in self.policy.gaps:
            self.policy_drops += 1
            return True
        return False

    def forced_evictions(self) -> int:
        return self.evictions - self.policy_drops


def gap_policy(uses: list[list[int]], tensors, wants_gap, prefetch_at, sync: bool = False,
               gated: bool = False) -> Policy:
    """A Policy from a per-use rule: for tensor t, the gap before its use at `nxt` (previous use `prev`) is
    taken when wants_gap(t, prev, nxt) and the swap-in position prefetch_at(t, prev, nxt) is after prev."""
    gaps = {}
    for t in tensors:
        u = uses[t]
        for prev, nxt in zip(u, u[1:]):
            if wants_gap(t, prev, nxt):
                at = min(nxt, prefetch_at(t, prev, nxt))
                if at > prev:
                    gaps[(t, nxt)] = at
    return Policy(gaps, sync, gated)


def class_peaks(actions: list[Action], pool: Pool, initial: list[tuple[int, int]]) -> np.ndarray:
    """Per size class, the most objects occupied at once over a walk's actions."""
    obj_class = pool.object_class()
    k = len(pool.class_count)
    now = np.zeros(k, dtype=np.int64)
    for _, o in initial:
        now[obj_class[o]] += 1
    peak = now.copy()
    for a in actions:
        if a.kind in ("compute", "recompute"):
            for o in a.out_objs:
                now[obj_class[o]] += 1
        elif a.kind == "swap_in":
            now[obj_class[a.obj]] += 1
        elif a.kind == "drop":
            now[obj_class[a.obj]] -= 1
        else:
            continue
        np.maximum(peak, now, out=peak)
    return peak


@dataclass
class PolicyLayout:
    """The default schedule, exact-size classes and the params kept on the device (all that can be)."""
    order: list[int]
    sizes: list[int]
    tensor_class: list[int]
    floor: np.ndarray           # per class: one op's need
    roomy: np.ndarray           # per class: a count that never fills
    resident: list[int]
    workspace: int

    @classmethod
    def build(cls, ctx: PlanningContext, order: list[int] | None = None) -> "PolicyLayout":
        """The layout for `order` (default: the graph's own order, TVM's)."""
        g = ctx.graph
        order = default_order(g) if order is None else list(order)
        sizes, tensor_class = class_of_size(g, ctx.alignment)
        k = len(sizes)
        lo = per_op_class_need(g, tensor_class, k)
        hi = np.maximum(resident_peak_per_class(g, order, tensor_class, k), lo)
        return cls(order, sizes, tensor_class, lo, hi + lo + 1, keepable_params(g, tensor_class),
                   workspace_bytes(g, ctx.alignment))

    def pool(self, counts, alignment: int) -> Pool:
        return Pool([int(s) for s in self.sizes], [int(c) for c in counts], alignment, self.workspace)

    def need_bytes(self, counts) -> int:
        return int((np.asarray(counts, dtype=np.int64) * np.asarray(self.sizes, dtype=np.int64)).sum()) + self.workspace


def _walker(ctx: PlanningContext, layout: PolicyLayout, policy: Policy, pool: Pool, make_walker=None) -> PolicyWalker:
    """A walk of the policy in `pool`; `make_walker(pool)` builds another PolicyWalker (checkpoint-sqrt's)."""
    if make_walker is not None:
        return make_walker(pool)
    return PolicyWalker(ctx.graph, layout.order, pool, layout.tensor_class, layout.resident, policy)


def policy_need(ctx: PlanningContext, layout: PolicyLayout, policy: Policy,
                make_walker=None) -> tuple[int, np.ndarray]:
    """(bytes, per-class counts) the policy needs: its walk in a pool that never fills. The need depends on
    the graph, the layout and the policy only (no limit, no op times), so a PolicyWalker's answer is kept
    with the graph: a planner asked again at another limit (a refusal's min, a retry) does not walk again."""
    key = None
    if make_walker is None:
        key = ("policy_need", ctx.alignment, tuple(layout.order), tuple(layout.resident),
               tuple(np.asarray(layout.roomy).tolist()), tuple(np.asarray(layout.floor).tolist()), policy.sync,
               policy.gated, tuple(sorted(policy.gaps.items())))
        hit = ctx.graph._cache.get(key)
        if hit is not None:
            return hit[0], hit[1].copy()
    pool = layout.pool(layout.roomy, ctx.alignment)
    w = _walker(ctx, layout, policy, pool, make_walker)
    w.run_ops().finish()
    if w.forced_evictions() or w.failed_prefetches:
        raise RuntimeError("planner bug: the roomy pool filled up")
    counts = np.maximum(class_peaks(w.b.actions, pool, w.initial), layout.floor)
    if key is not None:
        ctx.graph._cache[key] = (layout.need_bytes(counts), counts.copy())
    return layout.need_bytes(counts), counts


def plan_policy(ctx: PlanningContext, layout: PolicyLayout, policy: Policy, planner: str, what: str,
                search: dict | None = None, need: tuple[int, np.ndarray] | None = None, make_walker=None) -> Plan:
    """The plan of `policy`, or InfeasibleLimitError naming the bytes it needs (`what` says why).
    `make_walker(pool)`: a PolicyWalker subclass's walk of it (default PolicyWalker's)."""
    need_bytes, counts = need or policy_need(ctx, layout, policy, make_walker)
    if need_bytes > ctx.mem_limit:
        raise InfeasibleLimitError(ctx.mem_limit, need_bytes, what)
    pool = layout.pool(counts, ctx.alignment)
    w = _walker(ctx, layout, policy, pool, make_walker)
    w.run_ops().finish()
    if w.forced_evictions() or w.failed_prefetches:
        raise RuntimeError(f"planner bug: {planner}'s second walk differs from its first")
    info = {"offloaded": len(policy.tensors()), "gaps": len(policy.gaps), "need_bytes": int(need_bytes),
            **(search or {})}
    return assemble_plan(ctx, planner, layout.order, pool, layout.tensor_class, w.initial, w.b, search=info)


def forward_of(graph: DataflowGraph) -> set[int]:
    """Forward ops (the loss's ancestors); all ops when the graph has no backward (inference)."""
    fwd = forward_ops(graph)
    return fwd or set(range(graph.num_ops))
