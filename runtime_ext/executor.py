"""PlanExecutor: runs one plan's actions on a Backend as the compiled program reaches each call site.

The program (see relay_passes.apply) calls, in the plan's action order, `begin`, `object`, `wait`, `record`,
`swap_out`, `swap_in`, `drop` and `end` (through runtime_ext.builtins), each with its action index. The
executor turns the plan's deps into backend events once, at load:

- an action waits on the events of its deps on OTHER streams (same-stream order is FIFO already);
- a drop has no stream: a dep on a drop means a dep on the drop's own deps (expanded), except in poison mode,
  where drops are real work on the aux stream (they overwrite the object) and are waited on themselves;
- only actions some other stream waits on record an event.

It also checks, once at load, what the plan must do for the program to repeat: every tensor swapped in has a
host copy by then (for a param kept on the device, a current one: its update copied out in the last call, or
the param copied out in this one), the iteration ends with the initial residents (updated params in their old
objects), and every update and result is on the device or the host at the end. The only copies it makes are
the plan's (no host copy is refreshed behind the plan's back). Breaking any of these is a PlanError with the
tensor's name, never a wrong number.
"""
from __future__ import annotations

import time

import numpy as np

from tvm_swap.errors import PlanError
from tvm_swap.events import event_graph
from tvm_swap.manifest import Manifest
from tvm_swap.plan import Plan

from .backend import Backend
from .host_memory import check_host_memory, host_bytes_needed
from .host_ops import host_op_inputs, replay_host_op
from .host_store import HostStore
from .pool import DevicePool, PoolError


class PlanExecutor:
    def __init__(self, plan: Plan, manifest: Manifest, backend: Backend, poison: bool = False):
        self.plan = plan
        self.man = manifest
        self.be = backend
        self.poison = bool(poison)
        self.error: BaseException | None = None     # the first failure of a call, kept by runtime_ext.builtins
        self.actions = plan.actions
        self.host_inputs = host_op_inputs(plan, manifest)    # op -> what it reads (runtime_ext.host_ops)
        for i, a in enumerate(self.actions):
            if any(not 0 <= d < i for d in a.deps):
                raise PlanError(f"action {i} waits on {list(a.deps)}; deps must name earlier actions")
        self._build_events()
        self.initial = [(int(t), int(o)) for t, o in plan.initial_residents]
        self.input_tensors = {p.tensor for p in manifest.inputs if p.tensor >= 0}
        self.persistent = {p.tensor for p in manifest.persistent if p.tensor >= 0}
        self.handover = self._handovers()
        self._check_program()
        check_host_memory(host_bytes_needed(self.swapped_out, self.persistent, self.initial, self.needs_host,
                                            self.end_updates, lambda t: manifest.tensor(t).nbytes))
        self.stream_actions = [i for i, a in enumerate(self.actions)
                               if a.kind in ("swap_out", "swap_in") or (a.kind == "drop" and self.poison)]
        self._early = False
        self.pool = DevicePool(plan.pool, backend.alloc_device, plan.mem_limit, names=self._name,
                               alloc_all=backend.alloc_pool)
        if self.poison:
            for obj in self.pool.objects:
                backend.fill("compute", obj)
        self.host = HostStore(backend.alloc_host)
        for t in self.swapped_out:
            s = manifest.tensor(t)
            self.host.ensure(t, s.shape, s.dtype, s.nbytes)
        self.in_call = False
        self.calls = 0
        self.last: dict = {}
        self.totals = {"swap_out_count": 0, "swap_in_count": 0, "swap_out_bytes": 0, "swap_in_bytes": 0}
        self._inputs_seen: dict = {}
        self.trace = False          # stamp every call site and copy (runtime_ext.trace reads the stamps)
        self.traces: list = []      # per call: [(action, phase, seconds since begin)], the last few calls
        self.keep_traces = 50

    def _stamp(self, i: int, phase: str) -> None:
        self._trace.append((i, phase, time.perf_counter() - self._t0))

    # ---------------------------------------------------------------- load-time tables and checks
    def _name(self, t: int) -> str:
        s = self.man.tensors.get(t)
        return f"tensor {s.name!r}" if s is not None else f"tensor {t}"

    def _spec(self, t: int):
        return self.man.tensor(t)

    def _build_events(self) -> None:
        self.stream, waits_idx = event_graph(self.plan, self.poison)
        recorded = sorted({e for w in waits_idx for e in w})
        self.events = {e: self.be.new_event() for e in recorded}
        self.waits = [[self.events[e] for e in w] for w in waits_idx]

    def _handovers(self) -> dict:
        """(compute action, output) -> the input whose object it takes over (Plan.inplace: an elementwise kernel
        run in place; the input's tenancy ends there without a drop)."""
        over = self.plan.inplace_by_op()
        out = {}
        for i, a in enumerate(self.actions):
            if a.kind == "compute" and a.op in over:
                for t in self._op_outputs(a):
                    if t in over[a.op]:
                        out[(i, t)] = over[a.op][t]
        return out

    def _check_program(self) -> None:
        """Replay tenancy and host copies once (issue order) and derive the end-of-call work."""
        man = self.man
        tenant: dict[int, int] = {}      # obj -> tensor
        where: dict[int, int] = {}       # tensor -> obj
        for t, o in self.initial:
            man.tensor(t)
            tenant[o] = t
            where[t] = o
        swapped_out: list[int] = []
        first_host_use: dict[int, str] = {}
        def take(i, o, t):
            x = self.handover.get((i, t))
            if x is not None:
                if tenant.get(o) != x:
                    raise PlanError(f"action {i} writes {self._name(t)} in place over {self._name(x)} in object "
                                    f"{o}, which does not hold it; the plan is corrupt")
                del tenant[o]
                where.pop(x, None)
            if o in tenant:
                raise PoolError(f"action {i} puts {self._name(t)} into object {o}, which still holds "
                                f"{self._name(tenant[o])} (two live tensors in one object); the plan is corrupt")
            tenant[o] = t
            where[t] = o

        def has_host_copy(t):
            return t in self.input_tensors or t in self.persistent or t in swapped_out

        for i, a in enumerate(self.actions):
            if a.kind == "compute" and a.op in self.host_inputs:    # its outputs: host buffers, like copies out
                replay_host_op(i, a.op, self.host_inputs[a.op], self._op_outputs(a), has_host_copy=has_host_copy,
                               first_host_use=first_host_use, written=swapped_out, name=self._name)
                continue
            if a.kind in ("compute", "recompute"):
                for t, o in zip(self._op_outputs(a), a.out_objs):
                    take(i, o, t)
                continue
            man.tensor(a.tensor)
            if a.kind == "swap_out":
                if where.get(a.tensor) != a.obj:
                    raise PlanError(f"action {i} swaps out {self._name(a.tensor)} from object {a.obj}, "
                                    f"where it is not")
                swapped_out.append(a.tensor)
                first_host_use.setdefault(a.tensor, "out")
            elif a.kind == "swap_in":
                t = a.tensor
                first_host_use.setdefault(t, "in")
                if not has_host_copy(t):
                    raise PlanError(f"action {i} swaps in {self._name(t)}, which has no host copy yet (it is not an "
                                    f"input or param and was not swapped out or written on the host before); the "
                                    f"plan is corrupt")
                take(i, a.obj, t)
            elif a.kind == "drop":
                if tenant.get(a.obj) != a.tensor:
                    raise PoolError(f"action {i} drops {self._name(a.tensor)} from object {a.obj}, which does not "
                                    f"hold it; the plan is corrupt")
                del tenant[a.obj]
                where.pop(a.tensor, None)
        self.swapped_out = list(dict.fromkeys(swapped_out))     # (and host ops' outputs: host buffers too)
        updates = dict(man.updates)                  # new -> old
        succ = {old: new for new, old in updates.items()}
        # Periodicity per size class (tvm_swap.plan): each initial resident's successor (its update, or
        # itself) ends in an object of the same class; nothing else stays. Between calls the pool renames
        # objects (Plan.next_object_map), so the successor's buffer plays the initial object next call.
        cls = [int(c) for c in self.plan.pool.object_class()]
        ends = {t: o for o, t in tenant.items()}
        problems = []
        wanted = set()
        for p, o in self.initial:
            s = succ.get(p, p)
            wanted.add(s)
            if s not in ends:
                problems.append(f"{self._name(s)} should stay on the device (it plays {self._name(p)} next call)")
            elif self.plan.pool.kind == "arena" and self.plan.pool.renaming().get(o, o) != ends[s]:
                problems.append(f"{self._name(s)} ends in arena object {ends[s]}, but {self._name(p)} starts in "
                                f"object {o} (an arena plan keeps tensors where they are, or in the object its "
                                f"renaming cycles give)")
            elif cls[ends[s]] != cls[o]:
                problems.append(f"{self._name(s)} ends in object {ends[s]} of class {cls[ends[s]]}, but "
                                f"{self._name(p)} starts in class {cls[o]}")
        problems += [f"object {o} ends with {self._name(t)}" for o, t in tenant.items() if t not in wanted]
        if problems:
            raise PlanError("the plan does not end in its start state, so it cannot repeat: "
                            + "; ".join(problems[:5]))
        self.next_backing = [int(k) for k in self.plan.next_object_map(updates, self.man.meta["op_outputs"])]
        # Host copies of persistent tensors: needed when the plan reads one from the host before writing it.
        self.needs_host = {p for p in self.persistent if first_host_use.get(p) == "in"}
        resident_at_start = {t for t, _ in self.initial}
        out_set = set(self.swapped_out)
        # An update copied out is renamed on the host into its param's copy at the end of the call. One kept on
        # the device and never copied out leaves the param's host copy as it was: reading it from the host
        # later (a swap-in before any swap-out of it) would read an old value. The verifier refuses such plans
        # (tvm_swap.verify: a stale host copy), so no copy nobody planned is needed here.
        self.end_updates = []                        # (new, old): the host copy of `new` becomes `old`'s
        for new, old in updates.items():
            if new in out_set:
                self.end_updates.append((new, old))
            elif old not in resident_at_start:
                raise PlanError(f"the update {self._name(new)} of {self._name(old)} is lost: the plan neither "
                                f"keeps it on the device nor copies it to the host")
            elif old in self.needs_host:
                raise PlanError(f"the plan reads {self._name(old)} from a stale host copy: it stays on the device "
                                f"between calls, its update {self._name(new)} is never copied out, and it is "
                                f"swapped in before any swap-out of it; re-plan (the verifier refuses this plan)")
        self.end_where = {t: o for o, t in tenant.items()}
        self.output_source = []
        for k, o in enumerate(man.outputs):
            t = o.tensor
            if t in out_set:
                src = "host"
            elif t in self.end_where:
                src = "device"
            elif t in self.input_tensors:
                src = "input"
            elif t in self.persistent:
                src = "param"
            else:
                raise PlanError(f"result {k} ({self._name(t)}) is neither on the device nor on the host when "
                                f"the iteration ends; the plan must swap it out before dropping it")
            self.output_source.append(src)

    def _op_outputs(self, a):
        ops = self.man.meta.get("op_outputs")
        if ops is None:
            raise PlanError("the manifest lacks op_outputs; rebuild the module")
        return ops[a.op]

    # ---------------------------------------------------------------- params
    def load_params(self, values: dict[int, np.ndarray]) -> None:
        """Put every persistent tensor where the plan wants it when a call starts (device object and/or host)."""
        resident = dict(self.initial)
        for t in self.persistent:
            if t not in values:
                raise PlanError(f"no value for {self._name(t)}")
            s = self._spec(t)
            v = np.asarray(values[t], order="C")
            if tuple(v.shape) != tuple(s.shape) or str(v.dtype) != s.dtype:
                raise PlanError(f"{self._name(t)} must be {tuple(s.shape)} {s.dtype}, got {v.shape} {v.dtype}")
            if t in resident:
                self.be.copy_sync(self.pool.view(resident[t], t, s.shape, s.dtype), v)
            if t not in resident or t in self.needs_host:
                self.host.put(t, v, s.shape, s.dtype, s.nbytes)

    def param_value(self, t: int) -> np.ndarray:
        """The current value of a persistent tensor (between calls)."""
        s = self._spec(t)
        resident = dict(self.initial)
        if t in resident:
            return self.pool.view(resident[t], t, s.shape, s.dtype).numpy()
        return self.host.get(t).numpy()

    # ---------------------------------------------------------------- the program's call sites
    def begin(self, inputs=()) -> None:
        """Start of a call; `inputs` are the program's per-call input tensors (manifest.inputs order)."""
        if self.in_call:
            raise PlanError("tvm_swap: a call started while the previous one is still running "
                            "(SwapModule calls are not re-entrant)")
        self.in_call = True
        self._t0 = time.perf_counter()
        self.be.begin_call()
        self.pool.reset(self.initial)
        for ev in self.events.values():
            self.be.reset_event(ev)
        self._inputs_seen = {spec.tensor: x for spec, x in zip(self.man.inputs, inputs) if spec.tensor >= 0}
        if self.trace:
            self._trace = [(-1, "begin", 0.0)]
        self._count = {"swap_out_count": 0, "swap_in_count": 0, "swap_out_bytes": 0, "swap_in_bytes": 0}
        early = bool(getattr(self.be, "early_issue", False))
        self._early = early and len(self._inputs_seen) == len(self.input_tensors)
        if self._early:
            self._issue_all()

    def _issue_all(self) -> None:
        """Enqueue every copy (and poisoning drop) of the plan now, in plan order per stream.

        Only for backends whose events may be waited on before they are recorded (`early_issue`: the
        emulated one). There the caller's thread is also the compute stream, so issuing each copy at its place
        in the program would start it only after the kernel before it returns; enqueued up front, a copy starts
        as soon as its deps are met and its stream is free, which is the plan's semantics (and what a GPU
        host thread running ahead of its streams gets). The call sites then only keep the pool's books.
        The enqueuing itself runs on the backend's issuing thread where it has one (`run_async`).
        """
        run_async = getattr(self.be, "run_async", None)
        if run_async is not None:
            run_async(self._enqueue_all)
        else:
            self._enqueue_all()

    def _enqueue_all(self) -> None:
        for i in self.stream_actions:
            a = self.actions[i]
            if a.kind == "drop":
                self.be.fill("aux", self.pool.storage(a.obj), waits=self.waits[i], record=self.events.get(i))
                continue
            nbytes = self._spec(a.tensor).nbytes
            if a.kind == "swap_out":
                self.be.copy("d2h", self.host.get(a.tensor), self._view(a.obj, a.tensor), self.waits[i],
                             self.events.get(i), self._stamper(i), nbytes)
            else:
                src = self._inputs_seen.get(a.tensor)
                if src is None:
                    src = self.host.get(a.tensor)
                self.be.copy("h2d", self._view(a.obj, a.tensor), src, self.waits[i], self.events.get(i),
                             self._stamper(i), nbytes)

    def _view(self, obj: int, t: int):
        s = self._spec(t)
        return self.pool.view(obj, t, s.shape, s.dtype)

    def object(self, i: int, t: int, obj: int):
        if i >= 0:
            x = self.handover.get((i, t))
            if x is not None:               # in place: the input's object passes to the output
                self.pool.release(obj, x)
            self.pool.occupy(obj, t)
        elif not self.pool.holds(obj, t):
            raise PoolError(f"{self._name(t)} should be resident in object {obj} when the call starts")
        return self._view(obj, t)

    def wait(self, i: int) -> None:
        if self.trace:
            self._stamp(i, "wait")
        w = self.waits[i]
        if w:
            self.be.wait("compute", w)
        if self.trace:
            self._stamp(i, "start")

    def record(self, i: int) -> None:
        ev = self.events.get(i)
        if ev is not None:
            self.be.record("compute", ev)
        if self.trace:
            self._stamp(i, "end")

    def _stamper(self, i: int):
        if not self.trace:
            return None
        return lambda phase: self._stamp(i, phase)

    def swap_out(self, i: int) -> None:
        a = self.actions[i]
        if not self.pool.holds(a.obj, a.tensor):
            raise PoolError(f"action {i} swaps out {self._name(a.tensor)} from object {a.obj}, which does not hold it")
        nbytes = self._spec(a.tensor).nbytes
        if not self._early:
            src, dst = self._view(a.obj, a.tensor), self.host.get(a.tensor)
            self.be.copy("d2h", dst, src, self.waits[i], self.events.get(i), self._stamper(i), nbytes)
        self._count["swap_out_count"] += 1
        self._count["swap_out_bytes"] += nbytes

    def swap_in(self, i: int, source=None):
        a = self.actions[i]
        t = a.tensor
        self.pool.occupy(a.obj, t)
        dst = self._view(a.obj, t)
        nbytes = self._spec(t).nbytes
        if not self._early:
            if source is None:
                if not self.host.has(t):
                    raise PlanError(f"action {i} swaps in {self._name(t)}, which has no host copy")
                source = self.host.get(t)
            else:
                self._inputs_seen[t] = source
            self.be.copy("h2d", dst, source, self.waits[i], self.events.get(i), self._stamper(i), nbytes)
        self._count["swap_in_count"] += 1
        self._count["swap_in_bytes"] += nbytes
        return dst

    def host_begin(self, i: int) -> None:
        """Before host op i runs on this thread: wait, on the host, for what it reads."""
        if self.trace:
            self._stamp(i, "wait")
        self.be.host_wait(self.waits[i])
        if self.trace:
            self._stamp(i, "start")

    def host_tensor(self, i: int, t: int):
        """Host memory for tensor t of host op i: the caller's input, or t's host buffer."""
        x = self._inputs_seen.get(t)
        if x is not None:
            if int(x.device.dlpack_device_type()) != 1:     # the host kernel (llvm) reads CPU memory only
                raise PlanError(f"input {self._name(t)} is read by an op run on the host, so it must be passed "
                                f"in host memory (a numpy array or a CPU tensor), not on {x.device}")
            return x
        if not self.host.has(t):
            raise PlanError(f"action {i} runs an op on the host that reads {self._name(t)}, which has no host copy")
        return self.host.get(t)

    def host_end(self, i: int) -> None:
        """Host op i has run (synchronously): the actions waiting on it may go."""
        ev = self.events.get(i)
        if ev is not None:
            self.be.record("compute", ev)
        if self.trace:
            self._stamp(i, "end")

    def drop(self, i: int) -> None:
        a = self.actions[i]
        self.pool.release(a.obj, a.tensor)
        if self.poison and not self._early:
            self.be.fill("aux", self.pool.storage(a.obj), waits=self.waits[i], record=self.events.get(i))

    def end(self) -> list:
        try:
            if self.trace:
                self._stamp(-1, "end_call")
            self.be.synchronize()
            where = self.end_where
            for o, t in enumerate(self.pool.tenant):
                if t >= 0 and where.get(t) != o:
                    raise PoolError(f"object {o} still holds {self._name(t)} at the end of the call")
            results = []
            for o, src in zip(self.man.outputs, self.output_source):
                t = o.tensor
                if src == "host":
                    v = self.host.get(t)
                elif src == "device":
                    v = self._view(where[t], t)
                elif src == "input":
                    v = self._inputs_seen.get(t)
                    if v is None:
                        raise PlanError(f"result {self._name(t)} is an input the plan never read")
                else:
                    v = self._param_tensor(t)
                if tuple(v.shape) != tuple(o.shape):
                    v = v._create_view(tuple(o.shape), o.dtype, 0)
                results.append(v)
            for new, old in self.end_updates:
                self.host.rename(new, old)
            self.pool.rename(self.next_backing)      # the successors' buffers play the initial objects next call
            self.calls += 1
            if self.trace:
                self.traces = (self.traces + [self._trace])[-self.keep_traces:]
            self._count["time_s"] = time.perf_counter() - self._t0
            self.last = dict(self._count)
            for k in self.totals:
                self.totals[k] += self._count[k]
            return results
        finally:
            self.in_call = False

    def abort(self) -> None:
        """After a failed call: drain the streams so the next call starts clean."""
        try:
            self.be.synchronize()
        except Exception:  # the first error was already reported by the failed call
            pass
        self.in_call = False

    def _param_tensor(self, t: int):
        resident = dict(self.initial)
        if t in resident:
            return self._view(resident[t], t)
        return self.host.get(t)

    def stats(self) -> dict:
        d = {**self.pool.stats(), "host_bytes": self.host.allocated_bytes, "calls": self.calls,
             "last_call": dict(self.last), "totals": dict(self.totals)}
        d.update({k: v for k, v in self.last.items() if k != "time_s"})
        return d
