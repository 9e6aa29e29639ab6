"""noswap: TVM's own static memory plan (like Relax's StaticPlanBlockMemory), in the pool format.

Nothing is swapped to make room. Walking the default schedule, an op's outputs take the smallest free
storage that is large enough (best fit), or a new storage of their own size; an intermediate's storage is
freed after its last use. As when TVM runs the function: its arguments (params, optimizer state, inputs)
are on the device for the whole call, and its results (outputs, updates) from when they are produced to
the end. Each storage becomes one pool object; storages of equal size form a class.

Across iterations: params stay on the device (the initial residents), updated ones too when their update
has their size (periodicity is per size class, see baseline_common); the rest of the arguments are copied
in once at the start and results are copied out when produced. Kept successors take only storages of
exactly their size, so they stay in their param's size class.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from ...errors import InfeasibleLimitError
from ...graph import DataflowGraph
from ...plan import Plan, Pool, aligned_bytes
from .common import (assemble_plan, default_order, keepable_params, settle_residents,
                              successor_map, use_positions, workspace_bytes)
from ..builder import ActionBuilder
from ..context import PlanningContext


@dataclass
class StaticMemoryPlan:
    storage_bytes: list[int]      # per storage, in creation order
    storage_of: dict[int, int]    # tensor -> storage
    kept: list[int]               # params resident across iterations
    inputs_at_start: list[int]    # tensors copied in before the first op
    workspace: int
    to_end: set[int]              # tensors that keep their storage until the iteration ends

    def need(self) -> int:
        return int(sum(self.storage_bytes)) + self.workspace


def static_memory_plan(graph: DataflowGraph, order: list[int], alignment: int) -> StaticMemoryPlan:
    """Best-fit storage reuse over the schedule (see the module docstring)."""
    g = graph
    uses = use_positions(g, order)
    size = {t: aligned_bytes(g.tensors[t].nbytes, alignment) for t in g.used_tensors()}
    succ = successor_map(g)
    # Class ids only matter for "same size" here, so the aligned size stands in for the class.
    kept = keepable_params(g, [size.get(t, -1) for t in range(g.num_tensors)])
    end_resident = {succ.get(p, p) for p in kept}
    producer = g.producer()
    # Arguments and results live until the call returns, as in TVM (their storage is the caller's).
    to_end = end_resident | {t for t in size if producer[t] < 0} | set(g.outputs) | set(g.updates)

    storage_bytes: list[int] = []
    storage_of: dict[int, int] = {}
    free: list[tuple[int, int]] = []   # sorted (bytes, storage)

    def allocate(t: int, exact: bool) -> None:
        s = size[t]
        i = bisect.bisect_left(free, (s, -1))
        if i < len(free) and (not exact or free[i][0] == s):
            storage_of[t] = free.pop(i)[1]
        else:
            storage_of[t] = len(storage_bytes)
            storage_bytes.append(s)

    def release(t: int) -> None:
        sid = storage_of[t]
        bisect.insort(free, (storage_bytes[sid], sid))

    for p in kept:
        allocate(p, exact=True)
    kept_set = set(kept)
    inputs = [t for t in g.used_tensors() if producer[t] < 0 and t not in kept_set]
    inputs.sort(key=lambda t: (uses[t][0], t))
    for t in inputs:
        allocate(t, exact=False)
    for pos, o in enumerate(order):
        op = g.ops[o]
        for t in op.outputs:
            allocate(t, exact=t in end_resident)
        for t in dict.fromkeys((*op.inputs, *op.outputs)):
            if uses[t][-1] == pos and t not in to_end:
                release(t)
    return StaticMemoryPlan(storage_bytes, storage_of, kept, inputs, workspace_bytes(g, alignment), to_end)


def noswap_need(graph: DataflowGraph, alignment: int) -> int:
    """Device bytes TVM's static plan needs for one iteration on the default schedule (pool + workspace).
    Kept with the graph's other derived facts: a percentage limit and plan_graph's no-swap check both ask
    (a second static plan cost 5 s at 43k ops)."""
    key = ("noswap_need", int(alignment))
    if key not in graph._cache:
        graph._cache[key] = int(static_memory_plan(graph, default_order(graph), alignment).need())
    return graph._cache[key]


def plan_noswap(ctx: PlanningContext) -> Plan:
    g = ctx.graph
    order = default_order(g)
    smp = static_memory_plan(g, order, ctx.alignment)
    need = smp.need()
    if need > ctx.mem_limit:
        raise InfeasibleLimitError(ctx.mem_limit, need, "noswap keeps everything resident")

    # Pool: classes by storage size, objects numbered class-major.
    sizes = sorted(set(smp.storage_bytes))
    cls_index = {s: i for i, s in enumerate(sizes)}
    counts = [0] * len(sizes)
    for s in smp.storage_bytes:
        counts[cls_index[s]] += 1
    pool = Pool(sizes, counts, ctx.alignment, smp.workspace)
    first = pool.first_object()
    seen = [0] * len(sizes)
    obj_of_storage = []
    for s in smp.storage_bytes:
        c = cls_index[s]
        obj_of_storage.append(int(first[c]) + seen[c])
        seen[c] += 1
    obj = {t: obj_of_storage[sid] for t, sid in smp.storage_of.items()}
    tensor_class = [-1] * g.num_tensors
    for t, sid in smp.storage_of.items():
        tensor_class[t] = cls_index[smp.storage_bytes[sid]]

    b = ActionBuilder(g, pool.num_objects)
    initial = [(p, obj[p]) for p in smp.kept]
    for p, o in initial:
        b.place_initial(p, o)
    for t in smp.inputs_at_start:
        b.swap_in(t, obj[t])
    succ = successor_map(g)
    end_resident = {succ.get(p, p) for p in smp.kept}
    producer = g.producer()
    to_host = {t for t in (*g.outputs, *g.updates) if producer[t] >= 0 and t not in end_resident}
    uses = use_positions(g, order)
    for pos, o in enumerate(order):
        op = g.ops[o]
        b.compute(o, [obj[t] for t in op.outputs])
        for t in op.outputs:
            if t in to_host:
                b.swap_out(t)
        for t in dict.fromkeys((*op.inputs, *op.outputs)):
            if uses[t][-1] == pos and t not in smp.to_end:
                b.drop(t)

    stale = {p for p in smp.kept if p in succ}  # kept and updated: the host holds an old value

    def valid_host_copy(t: int) -> bool:
        return t in b.host_copy or (producer[t] < 0 and t not in stale)

    settle_residents(b, g, initial, pool.object_class(), valid_host_copy)
    return assemble_plan(ctx, "noswap", order, pool, tensor_class, initial, b, search={"need_bytes": need})
