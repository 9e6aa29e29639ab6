"""ActionBuilder: the one place that turns planning decisions into a Plan's actions with correct deps.

Planners (SwapAdvisor's swap planner and every baseline) decide *what* happens and in which order
they are issued; the builder derives the events each action must wait for, so that all planners obey
the same memory-safety rules the verifier checks:

- compute(op, out_objs): waits for each input's arrival (its swap-in) and for the previous tenant of
  every output object to be dropped.
- compute(op, out_objs, over={out: in}): an output written in place takes the object of an input that dies
  there (its tenancy ends with no drop), after that input's swap-out in this tenancy, if any.
- recompute(op, out_objs): the same waits as compute (the caller decides that the inputs still hold the
  original run's values and that rebuilding is allowed; the verifier checks both).
- swap_out(t): waits for t's arrival in its current object.
- drop(t): waits for the last reader of t in this tenancy and for t's swap-out in this tenancy, if any.
- swap_in(t, obj): waits for the drop of obj's previous tenant and, for a tensor produced this
  iteration, for the swap-out that put its copy on the host.

Same-stream order is implied by FIFO streams, so deps on the same stream are left out.
"""
from __future__ import annotations

from ..graph import DataflowGraph
from ..plan import STREAM_OF, Action, ActionKind


class ActionBuilder:
    def __init__(self, graph: DataflowGraph, num_objects: int):
        self.g = graph
        self.actions: list[Action] = []
        self.obj_tenant = [-1] * num_objects        # tensor currently in each object
        self.obj_free_event = [-1] * num_objects    # action after which the object became free
        self.where: dict[int, int] = {}             # tensor -> object it is resident in
        self.arrival: dict[int, int] = {}           # tensor -> action that brought it (this tenancy)
        self.last_reader: dict[int, int] = {}       # tensor -> last compute reading it (this tenancy)
        self.tenancy_swap_out: dict[int, int] = {}  # tensor -> swap_out in this tenancy
        self.host_copy: dict[int, int] = {}         # tensor -> swap_out action that made its host copy
        self.op_action: dict[int, int] = {}

    # ---- queries ----
    def is_resident(self, t: int) -> bool:
        return t in self.where

    def has_host_copy(self, t: int) -> bool:
        g = self.g
        return t in self.host_copy or (g.producer()[t] < 0)

    # ---- setup ----
    def place_initial(self, t: int, obj: int) -> None:
        """A persistent tensor resident when the iteration starts."""
        self._occupy(t, obj, arrival=-1)

    # ---- actions ----
    def _emit(self, a: Action) -> int:
        stream = STREAM_OF[a.kind]
        deps = []
        for d in dict.fromkeys(a.deps):
            if d < 0:
                continue
            if stream is not None and STREAM_OF[self.actions[d].kind] == stream:
                continue  # FIFO on the same stream already orders these
            deps.append(d)
        a = Action(a.kind, a.op, a.tensor, a.obj, tuple(sorted(deps)), a.out_objs)
        self.actions.append(a)
        return len(self.actions) - 1

    def _occupy(self, t: int, obj: int, arrival: int) -> None:
        if self.obj_tenant[obj] >= 0:
            raise RuntimeError(f"planner bug: object {obj} holds tensor {self.obj_tenant[obj]}, cannot take {t}")
        if t in self.where:
            raise RuntimeError(f"planner bug: tensor {t} is already resident in object {self.where[t]}")
        self.obj_tenant[obj] = t
        self.where[t] = obj
        self.arrival[t] = arrival
        self.last_reader.pop(t, None)
        self.tenancy_swap_out.pop(t, None)

    def compute(self, op_id: int, out_objs: list[int], over: dict | None = None) -> int:
        idx = self._run_kernel(ActionKind.COMPUTE, op_id, out_objs, over)
        self.op_action[op_id] = idx
        return idx

    def recompute(self, op_id: int, out_objs: list[int]) -> int:
        """Run op `op_id` again (computed earlier), writing its outputs into `out_objs` (all must be free)."""
        if op_id not in self.op_action:
            raise RuntimeError(f"planner bug: op {op_id} is recomputed before it is computed")
        return self._run_kernel(ActionKind.RECOMPUTE, op_id, out_objs)

    def _run_kernel(self, kind, op_id: int, out_objs: list[int], over: dict | None = None) -> int:
        op = self.g.ops[op_id]
        deps = []
        for t in op.inputs:
            if t not in self.where:
                raise RuntimeError(f"planner bug: op {op_id} reads tensor {t} that is not resident")
            deps.append(self.arrival[t])
        for t, o in zip(op.outputs, out_objs):
            x = (over or {}).get(t)
            if x is not None:                  # in place: x's object passes to t, x leaves without a drop
                if self.where.get(x) != o:
                    raise RuntimeError(f"planner bug: op {op_id} writes tensor {t} in place of {x}, not in its object")
                deps.append(self.tenancy_swap_out.get(x, -1))
                del self.where[x]
                self.obj_tenant[o] = -1
        for o in out_objs:
            deps.extend(self._free_deps(o))
        idx = self._emit(Action(kind, op=op_id, deps=tuple(deps), out_objs=tuple(out_objs)))
        for t in op.inputs:
            self.last_reader[t] = idx
        for t, o in zip(op.outputs, out_objs):
            self._occupy(t, o, arrival=idx)
        return idx

    def swap_out(self, t: int) -> int:
        idx = self._emit(Action(ActionKind.SWAP_OUT, tensor=t, obj=self.where[t], deps=(self.arrival[t],)))
        self.tenancy_swap_out[t] = idx
        self.host_copy[t] = idx
        return idx

    def drop(self, t: int) -> int:
        obj = self.where.pop(t)
        deps = (self.last_reader.get(t, self.arrival[t]), self.tenancy_swap_out.get(t, -1))
        idx = self._emit(Action(ActionKind.DROP, tensor=t, obj=obj, deps=deps))
        self.obj_tenant[obj] = -1
        self._mark_free(obj, idx)
        return idx

    def swap_in(self, t: int, obj: int) -> int:
        if not self.has_host_copy(t):
            raise RuntimeError(f"planner bug: tensor {t} has no host copy to swap in")
        deps = (*self._free_deps(obj), self.host_copy.get(t, -1))
        idx = self._emit(Action(ActionKind.SWAP_IN, tensor=t, obj=obj, deps=deps))
        self._occupy(t, obj, arrival=idx)
        return idx

    # ---- where memory becomes free (an arena overrides these: objects there are overlapping byte ranges)
    def _free_deps(self, obj: int) -> list[int]:
        """The drops a new tenant of `obj` must wait for."""
        return [self.obj_free_event[obj]]

    def _mark_free(self, obj: int, drop_action: int) -> None:
        self.obj_free_event[obj] = drop_action

    def residents(self) -> list[tuple[int, int]]:
        return sorted(self.where.items())


def copies_after_steps(n: int, swap_outs, drops, swap_ins):
    """Per step 0..n, what is issued after the op before it (both SwapAdvisor pools emit plans this way):
    swap-outs and drops (tensors) after their step, swap-ins ((tensor, object), given as (need step, tensor,
    object) in need order) never before one needed earlier, as they queue on one stream in that order."""
    post_out: list[list[int]] = [[] for _ in range(n + 1)]
    post_drop: list[list[int]] = [[] for _ in range(n + 1)]
    post_in: list[list[tuple[int, int]]] = [[] for _ in range(n + 1)]
    for s, t in swap_outs:
        post_out[s + 1].append(t)
    for s, t, _ in drops:
        post_drop[s + 1].append(t)
    floor = -1
    for q, t, o in swap_ins:
        if q > floor:
            floor = q
        post_in[floor + 1].append((t, o))
    return post_out, post_drop, post_in
