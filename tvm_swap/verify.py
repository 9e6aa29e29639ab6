"""The independent verifier: replays a plan's actions and checks every invariant, trusting no planner code.

It imports nothing from `tvm_swap.planner` (not the action builder, not the simulator): it derives
happens-before itself from the deps and the per-stream FIFO order, with vector clocks over the three
streams. Action x (on stream s, at 1-based position p in it) happens-before y iff clock[y][s] >= p;
an action's clock is the elementwise max of its deps' clocks and its stream predecessor's, with its own
component set to its position. A drop has no stream: its clock is the max over its deps, and it has
happened before y iff all its deps have, i.e. iff clock[y] >= clock[drop] elementwise.

Invariants checked (DESIGN.md):
- the plan names this graph (fingerprint); the schedule is a topological permutation of all ops and
  the compute actions run each op exactly once, in schedule order; deps name earlier actions;
- every object index is valid; a tensor only sits in objects of its size class, and its aligned
  bytes fit the object; the pool (classes x counts + workspace) fits mem_limit and its workspace
  covers the largest op workspace (what a kernel keeps inside: a lifted workspace is a tensor of its op,
  graph/workspace.py, checked as any tensor below);
- when a compute reads or writes a tensor it is resident in an object: its arrival happened before
  the compute and the tenancy's drop happens after it; no object holds two live tensors (a tenant's
  arrival happens after the previous tenant's drop, which happens after that tenant's arrival,
  readers and swap-outs);
- a swap_out copies a resident tensor after it arrived; a swap_in brings a tensor that has a host copy
  made before it (a param, optimizer state or input, or a completed swap_out of it) and that copy is current:
  an updated param kept on the device between iterations (an initial resident) has a stale host copy at the
  start unless the plan copies its update out (the runtime renames that copy to the param's between
  iterations), so it is swapped in only after a completed swap_out of it in this iteration;
- graph outputs reach the host; updates end resident or swapped out;
- arena pools: every object is an aligned byte range inside the arena; a tenant arriving in a range
  finds no live tenant in any overlapping range, and waits for the drops that last freed each of its
  bytes (so stays that overlap in time never overlap in address); an initial resident ends in its own
  object, or, when that object is renamed between iterations (the cycles of `Arena.swaps`: a permutation),
  in the object whose buffer plays it next; the renaming maps the layout onto itself: two objects overlap
  exactly when the objects backing them do (so what this iteration proves of overlapping objects holds in
  the next one too);
- what the plan reports of itself, if anything: its predicted peak fits its pool (and so its limit);
- a recompute runs an op that an earlier compute action ran, names one object per output, and:
  reads only resident tensors that have arrived (so their values are the original run's: a tensor is
  written once, and tenancy is checked like any compute's), never a param that graph.updates replaces
  once that update has been computed (it may be stale on the host or renamed); writes its outputs into
  free memory like a compute (size class and bytes, the previous tenant's drop waited on, no live bytes
  overlapped in an arena); a recomputed tensor is the same value, so later readers and swap-outs may use it;
- in place (Plan.inplace): a pair (op, out, in) is one the graph allows (DataflowGraph.inplace_pairs); the
  op's compute writes out into the object that holds in, which ends in's tenancy there: every swap-out of in
  in that tenancy has completed before the compute, and nothing reads in afterwards unless it arrives again
  (a read, swap-out or drop of it is refused as of a tensor that is not resident);
- periodicity: the end residents mapped through graph.updates are exactly the initial residents,
  each in an object of the same size class (the runtime renames objects within a class between
  iterations, see Plan.next_object_map), and the initial residents are persistent tensors; an
  updated tensor's stale old value does not stay; every other tensor is dropped by the end.
"""
from __future__ import annotations

from .errors import VerificationError
from .graph import DataflowGraph
from .plan import Plan, aligned_bytes
from .verify_host import check_host_structure, host_compute

_STREAM = {"compute": 0, "swap_out": 1, "swap_in": 2, "drop": -1, "recompute": 0}
HOST_STREAM = 3       # the compute actions of the ops in plan.host_ops
MAX_VIOLATIONS = 500


class _Report:
    def __init__(self):
        self.items: list[str] = []

    def add(self, msg: str) -> None:
        if len(self.items) < MAX_VIOLATIONS:
            self.items.append(msg)
        elif len(self.items) == MAX_VIOLATIONS:
            self.items.append(f"(more violations not listed; fix the first {MAX_VIOLATIONS})")


def _check_schedule(graph: DataflowGraph, schedule, r: _Report) -> bool:
    """The schedule is a permutation of the ops (False if not) in a topological order (reported)."""
    n_ops, sched = graph.num_ops, list(schedule)
    if sorted(sched) != list(range(n_ops)):
        r.add(f"schedule is not a permutation of the graph's {n_ops} ops "
              f"(it has {len(sched)} entries, {len(set(sched))} distinct)")
        return False
    pos = [0] * n_ops
    for i, o in enumerate(sched):
        pos[o] = i
    for o, preds in enumerate(graph.op_preds()):
        for p in preds:
            if pos[p] > pos[o]:
                r.add(f"schedule is not topological: op {graph.ops[o].name!r} (position {pos[o]}) "
                      f"reads an output of op {graph.ops[p].name!r} scheduled later (position {pos[p]})")
    return True


def _check_inplace_pairs(graph: DataflowGraph, plan: Plan, r: _Report) -> bool:
    """Every (op, out, in) the plan runs in place is a pair the graph allows (DataflowGraph.inplace_pairs)."""
    ok, allowed = True, graph.inplace_pairs()
    for o, y, x in plan.inplace:
        if not 0 <= o < graph.num_ops or (y, x) not in allowed.get(o, ()):
            r.add(f"the plan runs op {o} in place (output {y} over input {x}), which the graph does not allow: "
                  f"only an elementwise kernel may overwrite an intermediate it reads (DataflowGraph.inplace_pairs)")
            ok = False
    return ok


def _check_structure(graph: DataflowGraph, plan: Plan, mem_limit, r: _Report) -> bool:
    """Checks that need no replay. Returns False if indices are too broken to replay safely."""
    if plan.graph_fingerprint != graph.fingerprint():
        r.add(f"plan was made for graph {plan.graph_name!r} (fingerprint {plan.graph_fingerprint}), "
              f"not this graph {graph.name!r} (fingerprint {graph.fingerprint()}): re-plan for this graph")
    n_ops, n_t, sched = graph.num_ops, graph.num_tensors, list(plan.schedule)
    ok = _check_schedule(graph, sched, r)
    pool = plan.pool
    if getattr(pool, "kind", "size-classes") == "arena":
        if not _check_arena(pool, r):
            return False
    elif len(pool.class_bytes) != len(pool.class_count) or any(c < 0 for c in pool.class_count) \
            or any(b < 0 for b in pool.class_bytes) or pool.alignment <= 0:
        r.add("pool is malformed: classes need one byte size and one non-negative count each, alignment > 0")
        return False
    total = pool.total_bytes()
    limits = [("the plan's mem_limit", plan.mem_limit)] + ([("the requested limit", int(mem_limit))]
                                                           if mem_limit is not None else [])
    for what, lim in limits:
        if total > lim:
            r.add(f"pool needs {total} bytes (objects + workspace) but {what} is {lim} bytes")
    ok = _check_inplace_pairs(graph, plan, r) and ok
    max_ws = max((op.workspace for op in graph.ops), default=0)
    if pool.workspace_bytes < max_ws:
        r.add(f"pool workspace is {pool.workspace_bytes} bytes but an op needs {max_ws} bytes of workspace")
    if len(plan.tensor_class) != n_t:
        r.add(f"tensor_class has {len(plan.tensor_class)} entries but the graph has {n_t} tensors")
        return False
    n_cls = len(pool.class_count)
    for t, c in enumerate(plan.tensor_class):
        if not -1 <= c < n_cls:
            r.add(f"tensor {graph.tensors[t].name!r} has class {c}, but the pool has {n_cls} classes")
            ok = False
    n_obj = pool.num_objects
    if not check_host_structure(graph, plan, r):
        return False
    host = set(plan.host_ops or ())
    seen_ops: dict[int, int] = {}
    compute_order = []
    for i, a in enumerate(plan.actions):
        if a.kind not in _STREAM:
            r.add(f"action {i} has unknown kind {a.kind!r}")
            ok = False
            continue
        for d in a.deps:
            if not 0 <= d < i:
                r.add(f"action {i} ({a.kind}) depends on action {d}: deps must name earlier actions")
                ok = False
        if a.kind == "compute":
            if not 0 <= a.op < n_ops:
                r.add(f"action {i} computes op {a.op}, which is not in the graph")
                ok = False
                continue
            if a.op in seen_ops:
                r.add(f"op {graph.ops[a.op].name!r} is computed twice (actions {seen_ops[a.op]} and {i})")
            seen_ops.setdefault(a.op, i)
            compute_order.append(a.op)
            if a.op in host:      # writes host memory: verify_host checks it names no objects
                continue
            outs = graph.ops[a.op].outputs
            if len(a.out_objs) != len(outs):
                r.add(f"action {i} (compute {graph.ops[a.op].name!r}) names {len(a.out_objs)} output objects "
                      f"for {len(outs)} outputs")
                ok = False
            for o in a.out_objs:
                if not 0 <= o < n_obj:
                    r.add(f"action {i} (compute {graph.ops[a.op].name!r}) writes object {o}, "
                          f"but the pool has {n_obj} objects")
                    ok = False
            if len(set(a.out_objs)) != len(a.out_objs):
                r.add(f"action {i} (compute {graph.ops[a.op].name!r}) writes two outputs into one object")
        elif a.kind == "recompute":
            if not 0 <= a.op < n_ops:
                r.add(f"action {i} recomputes op {a.op}, which is not in the graph")
                ok = False
                continue
            name = graph.ops[a.op].name
            if a.op not in seen_ops:
                r.add(f"action {i} recomputes op {name!r} before any compute of it: only an op that already ran "
                      f"this iteration can be recomputed")
            if len(a.out_objs) != len(graph.ops[a.op].outputs):
                r.add(f"action {i} (recompute {name!r}) names {len(a.out_objs)} output objects "
                      f"for {len(graph.ops[a.op].outputs)} outputs")
                ok = False
            for o in a.out_objs:
                if not 0 <= o < n_obj:
                    r.add(f"action {i} (recompute {name!r}) writes object {o}, but the pool has {n_obj} objects")
                    ok = False
            if len(set(a.out_objs)) != len(a.out_objs):
                r.add(f"action {i} (recompute {name!r}) writes two outputs into one object")
        else:
            if not 0 <= a.tensor < n_t:
                r.add(f"action {i} ({a.kind}) names tensor {a.tensor}, which is not in the graph")
                ok = False
            if not 0 <= a.obj < n_obj:
                r.add(f"action {i} ({a.kind}) names object {a.obj}, but the pool has {n_obj} objects")
                ok = False
    missing = [o for o in range(n_ops) if o not in seen_ops]
    if missing:
        r.add(f"{len(missing)} ops are never computed (first: {graph.ops[missing[0]].name!r})")
    if ok and not missing and compute_order != sched:
        k = next(i for i, (x, y) in enumerate(zip(compute_order, sched)) if x != y)
        r.add(f"compute actions do not follow the schedule: compute #{k} runs op "
              f"{graph.ops[compute_order[k]].name!r}, the schedule has {graph.ops[sched[k]].name!r}")
    init_t, init_o = set(), set()
    for t, o in plan.initial_residents:
        if not 0 <= t < n_t or not 0 <= o < n_obj:
            r.add(f"initial resident ({t}, {o}) names a tensor or object that does not exist")
            ok = False
            continue
        if not graph.is_persistent(t):
            r.add(f"initial resident {graph.tensors[t].name!r} is a {graph.tensors[t].kind}; only params and "
                  f"optimizer state (persistent, not produced) may stay on the device between iterations")
        if t in init_t or o in init_o:
            r.add(f"initial residents repeat tensor {graph.tensors[t].name!r} or object {o}")
        init_t.add(t)
        init_o.add(o)
    return ok


def _check_arena(arena, r: _Report) -> bool:
    """Every object a non-empty, aligned range inside the arena (TVM views it with zero copy only at
    offsets that are multiples of 64 bytes)."""
    a = arena.alignment
    if a <= 0 or a % 64 or len(arena.offsets) != len(arena.sizes) or arena.arena_bytes < 0:
        r.add("arena is malformed: alignment must be a positive multiple of 64 and every object needs an "
              "offset and a size")
        return False
    ok = True
    for k, (off, size) in enumerate(zip(arena.offsets, arena.sizes)):
        if off % a or size % a or size <= 0 or off < 0:
            r.add(f"arena object {k} at offset {off} of {size} bytes is not aligned to {a} bytes")
            ok = False
        if off + size > arena.arena_bytes:
            r.add(f"arena object {k} ends at byte {off + size}, past the arena's {arena.arena_bytes} bytes")
            ok = False
    n = len(arena.offsets)
    renamed = set()
    for c in arena.swaps:
        c = tuple(c)
        if len(c) < 2 or any(not 0 <= x < n for x in c) or len(set(c)) < len(c) or renamed & set(c):
            r.add(f"arena renaming cycle {c} names missing or repeated objects (each object in at most one "
                  f"cycle of at least two)")
            ok = False
            continue
        renamed |= set(c)
        if len({arena.sizes[x] for x in c}) > 1:
            r.add(f"arena renaming cycle {c} has objects of {sorted({arena.sizes[x] for x in c})} bytes: "
                  f"buffers that trade places must be the same size")
            ok = False
    if ok and renamed:
        ok = _check_renaming(arena, r)
    return ok


def _check_renaming(arena, r: _Report) -> bool:
    """Trading buffers between iterations must map the layout onto itself: with perm(k) the object whose buffer
    plays k next iteration (the cycles of `swaps`, a permutation), for every renamed object k and every object
    j, k and j overlap exactly when perm(k) and perm(j) do. Then any two objects overlap in the next
    iteration's buffers exactly when they overlap in this one's, and this iteration's checks (no two
    overlapping objects held at once, each arrival after the drops that freed its bytes) carry over to every
    iteration. Objects sorted by offset: the ones overlapping k start in (lo_k - largest, hi_k)."""
    import numpy as np

    lo = np.asarray(arena.offsets, dtype=np.int64)
    hi = lo + np.asarray(arena.sizes, dtype=np.int64)
    order = np.argsort(lo, kind="stable")
    lo_s, hi_s = lo[order], hi[order]
    widest = int((hi - lo).max(initial=0))
    perm = np.arange(len(lo))
    for k, j in arena.renaming().items():
        perm[k] = j

    def overlapping(k: int) -> np.ndarray:
        i0 = int(np.searchsorted(lo_s, lo[k] - widest, side="right"))
        i1 = int(np.searchsorted(lo_s, hi[k], side="left"))
        return np.sort(order[i0:i1][hi_s[i0:i1] > lo[k]])

    for k in sorted(arena.renaming()):
        j = int(perm[k])
        here, there = np.sort(perm[overlapping(k)]), overlapping(j)
        if not np.array_equal(here, there):
            odd = sorted(set(here.tolist()) ^ set(there.tolist()))[0]
            r.add(f"arena renaming does not map the layout onto itself: object {j}'s buffer plays object {k} next "
                  f"iteration, but object {odd} (or the object it is renamed to) overlaps only one of them")
            return False
    return True


class _ByteMap:
    """For each byte of the arena, a value (its live tenant, or the drop that last freed it), kept per
    elementary segment: the arena cut at every object's start and end, so an object's bytes are a run of
    whole segments and get/set are slices (no list inserts: a coalesced map of sorted starts cost a list
    insert per cut, 10 s of list memmoves at 43k ops)."""

    def __init__(self, bounds, value):
        self.pos = {x: k for k, x in enumerate(bounds)}      # bounds: sorted, every object's start and end
        self.vs = [value] * max(len(bounds) - 1, 0)

    def get(self, lo: int, hi: int) -> set:
        return set(self.vs[self.pos[lo]:self.pos[hi]])

    def set(self, lo: int, hi: int, value) -> None:
        i, j = self.pos[lo], self.pos[hi]
        self.vs[i:j] = [value] * (j - i)


def _vector_clocks(actions, host_ops=frozenset()):
    """Per action: stream, 1-based position in it (0 for drops) and the four clock components (the fourth:
    the host-compute stream of the ops a plan places on the host, HOST_STREAM)."""
    n = len(actions)
    c0, c1, c2, c3 = [0] * n, [0] * n, [0] * n, [0] * n
    stream = [0] * n
    position = [0] * n
    last = [-1, -1, -1, -1]
    count = [0, 0, 0, 0]
    for i, a in enumerate(actions):
        s = _STREAM[a.kind]
        if s == 0 and host_ops and a.op in host_ops and a.kind == "compute":
            s = HOST_STREAM
        m0 = m1 = m2 = m3 = 0
        if s >= 0 and last[s] >= 0:
            j = last[s]
            m0, m1, m2, m3 = c0[j], c1[j], c2[j], c3[j]
        for d in a.deps:
            if c0[d] > m0:
                m0 = c0[d]
            if c1[d] > m1:
                m1 = c1[d]
            if c2[d] > m2:
                m2 = c2[d]
            if c3[d] > m3:
                m3 = c3[d]
        stream[i] = s
        if s >= 0:
            count[s] += 1
            position[i] = count[s]
            last[s] = i
            if s == 0:
                m0 = count[0]
            elif s == 1:
                m1 = count[1]
            elif s == 2:
                m2 = count[2]
            else:
                m3 = count[3]
        c0[i], c1[i], c2[i], c3[i] = m0, m1, m2, m3
    return stream, position, c0, c1, c2, c3


class _Replay:
    def __init__(self, graph: DataflowGraph, plan: Plan, r: _Report):
        self.g, self.plan, self.r = graph, plan, r
        self.host_ops = frozenset(plan.host_ops or ())
        self.stream, self.position, self.c0, self.c1, self.c2, self.c3 = _vector_clocks(plan.actions, self.host_ops)
        self.host_made: dict[int, int] = {}      # tensor -> the host op action that wrote it (host memory)
        self.cls = plan.tensor_class
        self.obj_class = plan.pool.object_class().tolist()
        self.obj_bytes = plan.pool.object_bytes().tolist()
        a = plan.pool.alignment
        self.aligned_bytes = [aligned_bytes(t.nbytes, a) for t in graph.tensors]
        self.tenant = [-1] * plan.pool.num_objects
        self.last_drop = [-1] * plan.pool.num_objects
        self.arena = getattr(plan.pool, "kind", "") == "arena"
        if self.arena:
            self.obj_lo = plan.pool.object_offset().tolist()
            self.obj_hi = [lo + b for lo, b in zip(self.obj_lo, self.obj_bytes)]
            bounds = sorted(set(self.obj_lo) | set(self.obj_hi))
            self.byte_tenant = _ByteMap(bounds, -1)      # live tenant of each byte
            self.byte_freed = _ByteMap(bounds, -1)       # the drop that last freed each byte
        self.where: dict[int, int] = {}
        self.arrival: dict[int, int] = {}
        self.readers: dict[int, list[int]] = {}
        self.outs_in_tenancy: dict[int, list[int]] = {}
        self.swap_outs: dict[int, list[int]] = {}
        self.inplace = plan.inplace_by_op()              # op -> {out: in}
        self.overwritten: dict[int, int] = {}            # tensor -> the compute that wrote over it in place

    # ---- happens-before ----
    def hb(self, x: int, y: int) -> bool:
        """Action x (earlier in the list than y) has completed before y starts (x < 0: the start)."""
        if x < 0:
            return True
        s = self.stream[x]
        if s == 0:
            return self.c0[y] >= self.position[x]
        if s == 1:
            return self.c1[y] >= self.position[x]
        if s == 2:
            return self.c2[y] >= self.position[x]
        if s == HOST_STREAM:
            return self.c3[y] >= self.position[x]
        return (self.c0[y] >= self.c0[x] and self.c1[y] >= self.c1[x] and self.c2[y] >= self.c2[x]
                and self.c3[y] >= self.c3[x])

    def name(self, t: int) -> str:
        return repr(self.g.tensors[t].name)

    def what(self, i: int) -> str:
        if i < 0:
            return "the initial state"
        a = self.plan.actions[i]
        if a.kind in ("compute", "recompute"):
            return f"action {i} ({a.kind} {self.g.ops[a.op].name!r})"
        return f"action {i} ({a.kind} {self.name(a.tensor)})"

    def read(self, i: int, t: int, advice: str) -> None:
        """Action i (a compute or a recompute) reads tensor t: it must be resident and waited for."""
        if t not in self.where:
            if t in self.overwritten:
                advice = f" (it was overwritten in place by {self.what(self.overwritten[t])}){advice}"
            self.r.add(f"{self.what(i)} reads tensor {self.name(t)}, which is not resident{advice}")
            return
        if not self.hb(self.arrival[t], i):
            self.r.add(f"{self.what(i)} reads tensor {self.name(t)} without waiting for its arrival "
                       f"({self.what(self.arrival[t])})")
        self.readers[t].append(i)

    # ---- tenancy ----
    def place(self, i: int, t: int, obj: int, how: str) -> None:
        r = self.r
        c = self.cls[t]
        if c < 0:
            r.add(f"{self.what(i)} places tensor {self.name(t)} in object {obj}, but its tensor_class is -1 "
                  f"(never on the device)")
        elif self.obj_class[obj] != c:
            r.add(f"{self.what(i)} places tensor {self.name(t)} (class {c}) in object {obj} of class "
                  f"{self.obj_class[obj]}")
        need = self.aligned_bytes[t]
        if need > self.obj_bytes[obj]:
            r.add(f"{self.what(i)} places tensor {self.name(t)} ({need} bytes aligned) in object {obj} "
                  f"of {self.obj_bytes[obj]} bytes")
        prev = self.tenant[obj]
        if prev >= 0:
            r.add(f"{self.what(i)} {how} tensor {self.name(t)} into object {obj}, which still holds "
                  f"{self.name(prev)}: an object may hold one live tensor")
            self.where.pop(prev, None)
        if t in self.where:
            r.add(f"{self.what(i)} {how} tensor {self.name(t)} into object {obj}, but it is already "
                  f"resident in object {self.where[t]}")
            self.tenant[self.where[t]] = -1
        if i >= 0 and not self.hb(self.last_drop[obj], i):
            r.add(f"{self.what(i)} {how} tensor {self.name(t)} into object {obj} without waiting for the "
                  f"drop of its previous tenant (action {self.last_drop[obj]})")
        if self.arena:
            self._place_bytes(i, t, obj, how)
        self.tenant[obj] = t
        self.where[t] = obj
        self.arrival[t] = i
        self.readers[t] = []
        self.outs_in_tenancy[t] = []

    def _place_bytes(self, i: int, t: int, obj: int, how: str) -> None:
        lo, hi = self.obj_lo[obj], self.obj_hi[obj]
        live = sorted(x for x in self.byte_tenant.get(lo, hi) if x >= 0 and x != t)
        if live:
            self.r.add(f"{self.what(i)} {how} tensor {self.name(t)} into arena bytes [{lo}, {hi}), which overlap "
                       f"live tensor {self.name(live[0])}: stays that overlap in time must not overlap in address")
        if i >= 0:
            for d in sorted(self.byte_freed.get(lo, hi)):
                if not self.hb(d, i):
                    self.r.add(f"{self.what(i)} {how} tensor {self.name(t)} into arena bytes [{lo}, {hi}) without "
                               f"waiting for {self.what(d)}, which freed some of them")
        self.byte_tenant.set(lo, hi, t)

    def _free_bytes(self, i: int, obj: int) -> None:
        lo, hi = self.obj_lo[obj], self.obj_hi[obj]
        self.byte_tenant.set(lo, hi, -1)
        self.byte_freed.set(lo, hi, i)

    def hand_over(self, i: int, x: int, obj: int) -> None:
        """Compute i writes its output in place into object `obj`: input x must be there and its tenancy ends
        here (its swap-outs done); the output is then placed as into free memory."""
        if not self.resident_in(i, x, obj, "writes its output in place over"):
            return
        for s in self.outs_in_tenancy[x]:
            if not self.hb(s, i):
                self.r.add(f"{self.what(i)} overwrites tensor {self.name(x)} in place before its swap-out "
                           f"({self.what(s)}) has completed")
        del self.where[x]
        self.tenant[obj] = -1
        self.overwritten[x] = i
        if self.arena:
            self.byte_tenant.set(self.obj_lo[obj], self.obj_hi[obj], -1)

    def resident_in(self, i: int, t: int, obj: int, doing: str) -> bool:
        if self.where.get(t) != obj:
            at = f"object {self.where[t]}" if t in self.where else "no object"
            if t in self.overwritten:
                at += f" (it was overwritten in place by {self.what(self.overwritten[t])})"
            self.r.add(f"{self.what(i)} {doing} tensor {self.name(t)} in object {obj}, but it is resident in {at}")
            return False
        return True

    # ---- the walk ----
    def run(self) -> None:
        g, r = self.g, self.r
        producer = g.producer().tolist()   # list: scalar access to numpy arrays is slow
        update_of = {old: new for new, old in g.updates.items()}   # param -> the tensor that replaces it
        computed: set[int] = set()          # ops whose compute action came before (list order)
        # An updated param (or optimizer state) kept on the device between iterations has a host copy that is
        # current when the iteration starts only if the previous iteration copied its update out (the runtime
        # renames that copy to the param's); otherwise the host holds an older value (from before the first
        # iteration), and only a swap-out of the param this iteration, completed before the read, makes it current.
        copied_out = {a.tensor for a in self.plan.actions if a.kind == "swap_out"}
        copied_out |= {t for o in self.host_ops for t in g.ops[o].outputs}     # written in host memory
        stale_at_start = {t for t, _ in self.plan.initial_residents
                          if t in update_of and update_of[t] not in copied_out}
        for t, o in self.plan.initial_residents:
            self.place(-1, t, o, "starts with")
        for i, a in enumerate(self.plan.actions):
            k = a.kind
            if k == "compute" and a.op in self.host_ops:
                host_compute(self, i, a.op, stale_at_start, producer)
            elif k == "compute":
                op = g.ops[a.op]
                for t in dict.fromkeys(op.inputs):
                    self.read(i, t, "")
                over = self.inplace.get(a.op, {})
                for t, o in zip(op.outputs, a.out_objs):
                    if t in over:
                        self.hand_over(i, over[t], o)
                    self.place(i, t, o, "writes")
                computed.add(a.op)
            elif k == "recompute":
                op = g.ops[a.op]
                for t in dict.fromkeys(op.inputs):
                    new = update_of.get(t)
                    if new is not None and producer[new] >= 0 and producer[new] in computed:
                        r.add(f"{self.what(i)} reads param {self.name(t)} after its update {self.name(new)} was "
                              f"computed (by {g.ops[producer[new]].name!r}): the recompute may not see the value "
                              f"the original run read; swap the output instead")
                    self.read(i, t, ": bring it in (or recompute it) first")
                for t, o in zip(op.outputs, a.out_objs):
                    self.place(i, t, o, "recomputes")
            elif k == "swap_out":
                t = a.tensor
                if self.resident_in(i, t, a.obj, "copies out"):
                    if not self.hb(self.arrival[t], i):
                        r.add(f"{self.what(i)} copies tensor {self.name(t)} out without waiting for its "
                              f"arrival ({self.what(self.arrival[t])})")
                    self.outs_in_tenancy[t].append(i)
                self.swap_outs.setdefault(t, []).append(i)
            elif k == "swap_in":
                t = a.tensor
                if producer[t] >= 0:
                    outs = self.swap_outs.get(t, []) + ([self.host_made[t]] if t in self.host_made else [])
                    if not any(self.hb(s, i) for s in outs):
                        why = ("none of its swap-outs (actions " + ", ".join(map(str, outs)) + ") completes before it"
                               if outs else "it was never swapped out")
                        if producer[t] in self.host_ops:
                            why = (f"it is written on the host by op {g.ops[producer[t]].name!r}, and "
                                   + (f"that op ({self.what(self.host_made[t])}) does not complete before it: "
                                      f"make the swap_in wait for it" if t in self.host_made
                                      else "that op has not run yet"))
                        r.add(f"{self.what(i)} brings in tensor {self.name(t)} that has no host copy: {why}")
                elif t in stale_at_start:
                    outs = self.swap_outs.get(t, [])
                    if not any(self.hb(s, i) for s in outs):
                        new = update_of[t]
                        why = (f"its swap-outs this iteration (actions {', '.join(map(str, outs))}) do not complete "
                               f"before it" if outs else "it is not swapped out before it")
                        r.add(f"{self.what(i)} reads a stale host copy of {self.name(t)}: {self.name(t)} stays on the "
                              f"device between iterations and its update {self.name(new)} is never copied out, so "
                              f"the host holds an older value, and {why}; swap out {self.name(new)} (or "
                              f"{self.name(t)} before this swap-in), or keep {self.name(t)} resident")
                self.place(i, t, a.obj, "swaps")
            else:  # drop
                t = a.tensor
                if not self.resident_in(i, t, a.obj, "drops"):
                    continue
                for x, role in ([(self.arrival[t], "arrival")] + [(x, "reader") for x in self.readers[t]]
                                + [(x, "swap-out") for x in self.outs_in_tenancy[t]]):
                    if x >= 0 and not self.hb(x, i):
                        r.add(f"{self.what(i)} frees object {a.obj} before tensor {self.name(t)}'s "
                              f"{role} ({self.what(x)}) has completed")
                del self.where[t]
                self.tenant[a.obj] = -1
                self.last_drop[a.obj] = i
                if self.arena:
                    self._free_bytes(i, a.obj)

    def check_end(self) -> None:
        g, r = self.g, self.r
        producer = g.producer().tolist()
        updates = g.updates
        for t in dict.fromkeys(g.outputs):
            if producer[t] >= 0 and t not in updates and t not in self.swap_outs and t not in self.host_made:
                r.add(f"graph output {self.name(t)} never reaches the host: add a swap_out after it is produced")
        for new in updates:
            if new not in self.where and new not in self.swap_outs and new not in self.host_made:
                r.add(f"update {self.name(new)} is lost: it neither stays resident nor is swapped out")
        stale = set(updates.values())
        # objects of one class are interchangeable across iterations: compare (tensor, class)
        obj_class = self.plan.pool.object_class().tolist()
        end = set()
        for t, o in self.where.items():
            if t in stale:
                r.add(f"tensor {self.name(t)} stays resident at the end, but this iteration replaces it by its "
                      f"update: keep the update instead")
            elif not (g.is_persistent(t) or t in updates):
                r.add(f"tensor {self.name(t)} ({g.tensors[t].kind}) is still resident at the end: "
                      f"only params and optimizer state may stay between iterations; drop it")
            else:
                end.add((int(updates.get(t, t)), int(obj_class[o])))
        start = {(int(t), int(obj_class[o])) for t, o in self.plan.initial_residents}
        if self.arena:
            # an arena does not rename: each initial resident (or its update) must end in its own object
            init = dict(self.plan.initial_residents)
            backing = self.plan.pool.renaming()
            for t, o in sorted(self.where.items()):
                plays = int(updates.get(t, t))
                if plays in init and backing.get(init[plays], init[plays]) != o:
                    r.add(f"{self.name(t)} ends in arena object {o}, but {self.name(plays)} starts the iteration "
                          f"in object {init[plays]}: in an arena a kept tensor must end where it started (or, when "
                          f"that object is renamed between iterations, in the object whose buffer plays it next)")
        if end != start:
            extra, lack = sorted(end - start), sorted(start - end)
            parts = []
            if lack:
                parts.append("initial residents not restored: " + ", ".join(
                    f"{self.name(t)} in class {c}" for t, c in lack[:5]))
            if extra:
                parts.append("end residents not in the initial ones: " + ", ".join(
                    f"{self.name(t)} in class {c}" for t, c in extra[:5]))
            r.add("plan does not repeat (end state != start state): " + "; ".join(parts))


def verify_prediction(plan: Plan) -> list[str]:
    """What `plan.predicted` claims that its pool and limit contradict (empty: nothing; cheap, no replay)."""
    r = _Report()
    _check_prediction(plan, r)
    return r.items


def _check_prediction(plan: Plan, r: _Report) -> None:
    """A plan's own report must not contradict the pool: a peak over it is an overshoot or a false report."""
    pred = plan.predicted or {}
    peak = pred.get("peak_bytes")
    if peak is None:
        return
    pool = plan.pool.total_bytes()
    if int(peak) > pool:
        r.add(f"the plan reports a peak of {int(peak)} bytes in use, more than its pool of {pool} bytes: "
              f"its prediction is wrong; re-plan (and report this as a bug)")
    if int(peak) > int(plan.mem_limit):
        r.add(f"the plan reports a peak of {int(peak)} bytes in use, over its mem_limit of {int(plan.mem_limit)} "
              f"bytes: re-plan")


def verify_plan(graph: DataflowGraph, plan: Plan, mem_limit: int | None = None) -> list[str]:
    """Every invariant `plan` breaks on `graph`, as readable sentences (empty: the plan is valid).

    `mem_limit`, if given, is checked too (besides the plan's own mem_limit)."""
    r = _Report()
    _check_prediction(plan, r)
    if not _check_structure(graph, plan, mem_limit, r):
        return r.items
    rep = _Replay(graph, plan, r)
    rep.run()
    rep.check_end()
    return r.items


def check_plan(graph: DataflowGraph, plan: Plan, mem_limit: int | None = None) -> Plan:
    """Raise VerificationError listing the violations, or mark the plan verified and return it."""
    v = verify_plan(graph, plan, mem_limit)
    if v:
        plan.verified = False
        raise VerificationError(v)
    plan.verified = True
    return plan


def refuse_invalid(graph: DataflowGraph, plan: Plan, doing: str) -> Plan:
    """Verify `plan` before `doing` anything with it (drawing, summarising, running): a plan read from a file
    or a library is trusted for nothing, its own "verified" flag included. Raises VerificationError naming
    the first violation; otherwise marks the plan verified and returns it."""
    v = verify_plan(graph, plan)
    if v:
        plan.verified = False
        raise VerificationError(v, f"will not {doing} a plan that fails verification ({len(v)} violation"
                                   f"{'s' if len(v) > 1 else ''}; the first: {v[0]}); re-plan it with "
                                   f"`tvm-swap plan` (or rebuild the library)")
    plan.verified = True
    return plan
