"""Helpers shared by the baseline planners (noswap, odswap, vdnn) and reusable by swapadvisor-nosearch.

- `align`, `workspace_bytes`: sizes as the pool stores them.
- `use_positions`, `per_op_class_need`, `resident_peak_per_class`: facts about a schedule.
- `default_pool`: one class per distinct aligned size, each class at least what one op needs at once,
  grown in proportion to demand until the limit is reached.
- `keepable_params`, `settle_residents`, `assemble_plan`: making a plan that repeats every iteration.

Periodicity. An iteration starts with `initial_residents` [(p, obj)] and must end with the successor of
each p (its update, or p itself when nothing updates it) resident again, so the next iteration starts in
the same state. An update is written by an op that still reads p, so it can never land in p's own object.
`EXACT_OBJECT_PERIODICITY` says whether the end must use the *same object* (the letter of the Plan
docstring: "the same pairs"). Then keeping an updated param on the device would cost copying its update
out and back in at the end, the same two copies as not keeping it, so only params nothing updates are
kept (as the SwapAdvisor planner does). Without it, only the same size class is asked for (objects of one
class are interchangeable, so a runtime can rename them between iterations) and updated params stay too.
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from ...errors import InfeasibleLimitError
from ...graph import DataflowGraph
from ...plan import Plan, Pool, aligned_bytes
from ..builder import ActionBuilder
from ..context import PlanningContext

# Periodicity is per size class (tvm_swap.verify, Plan.next_object_map): updated params may stay too.
EXACT_OBJECT_PERIODICITY = False


# ---------------------------------------------------------------- sizes
def workspace_bytes(graph: DataflowGraph, alignment: int) -> int:
    """Kernel scratch the pool reserves: the largest single op's workspace (ops run one at a time)."""
    ws = max((op.workspace for op in graph.ops), default=0)
    return aligned_bytes(ws, alignment) if ws > 0 else 0


def default_order(graph: DataflowGraph) -> list[int]:
    """The schedule TVM itself uses: the graph's op order."""
    return list(range(graph.num_ops))


# ---------------------------------------------------------------- schedule facts
def use_positions(graph: DataflowGraph, order: list[int]) -> list[list[int]]:
    """use_positions(...)[t] = sorted schedule positions of the ops that read or write tensor t."""
    uses: list[list[int]] = [[] for _ in range(graph.num_tensors)]
    for pos, o in enumerate(order):
        op = graph.ops[o]
        for t in dict.fromkeys((*op.inputs, *op.outputs)):
            uses[t].append(pos)
    return uses


def next_use(uses: list[int], pos: int) -> int | None:
    """First position in `uses` after `pos`, or None."""
    i = bisect_right(uses, pos)
    return uses[i] if i < len(uses) else None


def class_of_size(graph: DataflowGraph, alignment: int) -> tuple[list[int], list[int]]:
    """Exact-size classes: (sorted distinct aligned sizes, per-tensor class id or -1 if never on the device)."""
    used = graph.used_tensors()
    sizes = sorted({aligned_bytes(graph.tensors[t].nbytes, alignment) for t in used})
    index = {s: i for i, s in enumerate(sizes)}
    tensor_class = [-1] * graph.num_tensors
    for t in used:
        tensor_class[t] = index[aligned_bytes(graph.tensors[t].nbytes, alignment)]
    return sizes, tensor_class


def per_op_class_need(graph: DataflowGraph, tensor_class: list[int], num_classes: int) -> np.ndarray:
    """Per class, the most of its tensors any single op reads or writes at once (the class's floor)."""
    need = np.zeros(num_classes, dtype=np.int64)
    for op in graph.ops:
        counts: dict[int, int] = {}
        for t in dict.fromkeys((*op.inputs, *op.outputs)):
            c = tensor_class[t]
            counts[c] = counts.get(c, 0) + 1
        for c, k in counts.items():
            if k > need[c]:
                need[c] = k
    return need


def successor_map(graph: DataflowGraph) -> dict[int, int]:
    """old persistent tensor -> the tensor that replaces it next iteration (its update)."""
    return {old: new for new, old in graph.updates.items()}


def keepable_params(graph: DataflowGraph, tensor_class: list[int],
                    exact_object: bool | None = None) -> list[int]:
    """Persistent tensors that may stay on the device across iterations: used here, and either not updated
    or (when periodicity is by class, see the module docstring) updated by a tensor of the same class."""
    exact = EXACT_OBJECT_PERIODICITY if exact_object is None else exact_object
    succ = successor_map(graph)
    out = []
    for t in graph.used_tensors():
        if not graph.is_persistent(t) or tensor_class[t] < 0:
            continue
        if t in succ and (exact or tensor_class[succ[t]] != tensor_class[t]):
            continue
        out.append(t)
    return out


def resident_peak_per_class(graph: DataflowGraph, order: list[int], tensor_class: list[int],
                            num_classes: int) -> np.ndarray:
    """Per class, the most of its tensors alive at once if nothing is ever swapped: the count at which the
    class never evicts. Kept params live for the whole iteration, their updates from production to the end;
    other tensors from their first to their last use."""
    n = len(order)
    uses = use_positions(graph, order)
    succ = successor_map(graph)
    keep = set(keepable_params(graph, tensor_class))
    end_resident = {succ.get(p, p) for p in keep}
    diff = np.zeros((num_classes, n + 1), dtype=np.int64)
    for t, u in enumerate(uses):
        if not u:
            continue
        c = tensor_class[t]
        first, last = u[0], u[-1]
        if t in keep:
            first = 0
        if t in end_resident:
            last = n - 1
        diff[c, first] += 1
        diff[c, last + 1] -= 1
    if n == 0:
        return np.zeros(num_classes, dtype=np.int64)
    return np.cumsum(diff, axis=1)[:, :n].max(axis=1)


# ---------------------------------------------------------------- the pool
@dataclass
class PoolLayout:
    """A pool plus how tensors map onto it (what default_pool returns)."""
    pool: Pool
    tensor_class: list[int]
    min_count: list[int]    # per class: the floor (one op's need)
    max_count: list[int]    # per class: the count at which it never evicts

    def min_bytes(self) -> int:
        return int(sum(b * c for b, c in zip(self.pool.class_bytes, self.min_count))) + self.pool.workspace_bytes


def default_pool(ctx: PlanningContext, graph: DataflowGraph | None = None, order: list[int] | None = None,
                 planner: str = "baseline") -> PoolLayout:
    """Exact-size classes sized to fill ctx.mem_limit.

    One class per distinct aligned tensor size. Each class starts at its floor (the most of its tensors a
    single op touches) and grows toward the count at which it would never evict, in proportion to the bytes
    it is short, then greedily with whatever the rounding left. Raises InfeasibleLimitError naming the floor
    pool's bytes when even that does not fit.
    """
    g = ctx.graph if graph is None else graph
    order = default_order(g) if order is None else list(order)
    sizes, tensor_class = class_of_size(g, ctx.alignment)
    k = len(sizes)
    ws = workspace_bytes(g, ctx.alignment)
    b = np.asarray(sizes, dtype=np.int64)
    lo = per_op_class_need(g, tensor_class, k)
    hi = np.maximum(resident_peak_per_class(g, order, tensor_class, k), lo)
    floor_bytes = int((lo * b).sum()) + ws
    if floor_bytes > ctx.mem_limit:
        raise InfeasibleLimitError(
            ctx.mem_limit, floor_bytes,
            f"{planner}'s pool needs, per size class, as many objects as one op touches at once")
    counts = lo.copy()
    spare = ctx.mem_limit - floor_bytes
    short = int(((hi - lo) * b).sum())
    if short <= spare:
        counts = hi.copy()
    elif short > 0:
        frac = spare / short
        counts = lo + np.floor((hi - lo) * frac).astype(np.int64)
        spare = ctx.mem_limit - int((counts * b).sum()) - ws
        # Rounding left less than one object per class: hand it to the least-filled classes that fit.
        while True:
            open_ = [c for c in range(k) if counts[c] < hi[c] and b[c] <= spare]
            if not open_:
                break
            c = min(open_, key=lambda c: ((counts[c] - lo[c]) / (hi[c] - lo[c]), -b[c], c))
            counts[c] += 1
            spare -= int(b[c])
    pool = Pool([int(x) for x in sizes], [int(x) for x in counts], ctx.alignment, ws)
    assert pool.total_bytes() <= ctx.mem_limit
    return PoolLayout(pool, tensor_class, [int(x) for x in lo], [int(x) for x in hi])


# ---------------------------------------------------------------- periodicity and the plan
def settle_residents(b: ActionBuilder, graph: DataflowGraph, initial: list[tuple[int, int]],
                     obj_class: np.ndarray, has_valid_host_copy, exact_object: bool | None = None) -> None:
    """End the iteration in its start state: drop everything but the successors of the initial residents,
    and bring back (into the right object, or class) any successor that was evicted or is misplaced.

    `has_valid_host_copy(t)` says whether the host holds t's current value (so dropping it loses nothing).
    """
    exact_object = EXACT_OBJECT_PERIODICITY if exact_object is None else exact_object
    succ = successor_map(graph)
    target = {succ.get(p, p): o for p, o in initial}
    for t, _ in b.residents():
        if t not in target:
            if not has_valid_host_copy(t) and (t in graph.updates or t in graph.outputs):
                b.swap_out(t)
            b.drop(t)
    if exact_object:
        for t, o in b.residents():
            if target[t] != o:
                if not has_valid_host_copy(t):
                    b.swap_out(t)
                b.drop(t)
    for t, o in sorted(target.items(), key=lambda kv: kv[1]):
        if b.is_resident(t):
            continue
        if not exact_object:
            same = [x for x in range(len(b.obj_tenant)) if b.obj_tenant[x] < 0 and obj_class[x] == obj_class[o]]
            o = same[0] if b.obj_tenant[o] >= 0 else o
        b.swap_in(t, o)


def assemble_plan(ctx: PlanningContext, planner: str, order: list[int], pool: Pool, tensor_class: list[int],
                  initial: list[tuple[int, int]], b: ActionBuilder, search: dict | None = None) -> Plan:
    g = ctx.graph
    return Plan(
        graph_name=g.name, graph_fingerprint=g.fingerprint(), planner=planner, mem_limit=int(ctx.mem_limit),
        device=ctx.device.to_dict(), schedule=[int(x) for x in order], pool=pool,
        tensor_class=[int(x) for x in tensor_class], initial_residents=sorted((int(t), int(o)) for t, o in initial),
        actions=list(b.actions), predicted={}, search=dict(search or {}),
    )
