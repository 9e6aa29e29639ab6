"""An exact MILP (HiGHS through scipy.optimize.milp) for small graphs, over a discrete-stage model.

The model (stages 0..n+1; stage k in 1..n runs exactly one op, stages 0 and n+1 only copy):
  x[o,k]   op o runs in stage k (a topological schedule: each op once, each compute stage one op,
           every producer in an earlier stage than its readers);
  r[t,k]   tensor t holds an object during stage k; init[p] a persistent tensor starts resident;
  in[t,k]  t is swapped in during stage k (it holds its object then, and is readable from k+1);
  out[t,k] t, resident since stage k-1, is swapped out during stage k (and holds its object);
  y[t,c]   t lives in objects of class c (classes: the distinct aligned sizes; c at least t's size;
           an update in its param's class);
  n[c]     objects of size class c.
Rules: t arrives only by its producer's stage or a swap_in (r[t,k] <= r[t,k-1] + in[t,k] + x[prod,k]);
a param kept on the device between iterations (init) and also swapped in has its update swapped out (the
host copy it reads must be last iteration's update);
a reader's stage has t resident and not arriving; a produced t is swapped in only after a swap_out
of it; graph outputs (and updates whose param does not stay) are swapped out; at the end exactly the
initial residents (through graph.updates) stay (the rest is dropped after the last stage); per stage the
class counts cover the residents and
sum(class bytes x n[c]) + the largest workspace <= mem_limit.
Stage k lasts s_k >= its op's time, and >= the time of its copies on the simulator's link (each
direction alone, and both sharing the duplex rate: the two linear pieces of the simulator's rate model).
Objective: sum of s_k.
Added rows that change no optimum (each function's docstring has the argument): live-across cuts and first-copy
cuts (valid for every integer solution; they tighten the relaxation), and, off by default, dominance rows (a plain
activation or input is resident only until its last reader, and copied only when that buys something): at CP-SAT
deterministic time 10 on two 21-op graphs they slowed the search (benchmarks/exact_reach.md).

Solvers. CP-SAT (OR-Tools, optional extra `exact`; the default where installed) or HiGHS (scipy.optimize.milp)
over the same rows; CP-SAT needs integer coefficients, so its stage times count ticks (see _solve_cpsat).
CP-SAT closes 14-21-op graphs in ~5-40 s where HiGHS found no solution in 30 s. A warm start (`warm_schedule`,
e.g. the GA's order, or `warm_start`, an earlier fixed-schedule result) hands the free solve a first incumbent.
"optimal" means proven within GAP_LIMIT (0.1%) of the stage model's optimum.

What each result is (use it only as that):
- `plan` (status "optimal" or "time_limit"): a verified-ready plan; its SIMULATED time is an UPPER bound on the
  true optimum (the plan is one of the plans the simulator scores). This is the only number to compare with.
- `objective_s`: the stage model's value of that plan (optimal or best found). The model is a RESTRICTION of
  the plans the simulator scores (class sizes from the tensors' aligned sizes, copies aligned to stages, stage
  barriers) and the simulator overlaps across stage borders, so it is neither an upper nor a lower bound on the
  true optimum: reported only. In particular a "closed" (optimal) stage model is NOT the true optimum: a GA plan
  may be faster than it.
- `mip_gap`: the solver's relative gap to its own lower bound of the STAGE MODEL (not of the true problem).
  The only provable LOWER bound on the true optimum is `tight_bound.tight_lower_bound`; bracket with both.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..errors import TvmSwapError
from ..graph import DataflowGraph
from ..plan import DEFAULT_ALIGNMENT, Plan, Pool
from .builder import ActionBuilder
from .simulator import _link_rates

MAX_OPS = 40        # beyond this the model is too large to be worth building


@dataclass
class ExactResult:
    plan: Plan | None          # verified-ready plan (None: no solution found in time)
    status: str                # "optimal", "time_limit", "infeasible", ...
    objective_s: float | None  # the stage model's optimum (or best found) in seconds
    mip_gap: float | None      # HiGHS's relative gap at the end (0 when optimal)
    solve_s: float             # wall-clock seconds in the solver
    num_vars: int
    backend: str = "highs"
    solution: np.ndarray | None = None   # the model's column values (a hint for another solve)


class _Vars:
    """Column indices of the MILP variables."""

    def __init__(self):
        self.n = 0
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.integral: list[int] = []

    def add(self, count: int, lo=0.0, hi=1.0, integral=1) -> np.ndarray:
        idx = np.arange(self.n, self.n + count)
        self.n += count
        self.lo += [lo] * count
        self.hi += [hi] * count
        self.integral += [integral] * count
        return idx


class _Rows:
    """Sparse constraint rows lo <= sum(coef * var) <= hi."""

    def __init__(self):
        self.r: list[int] = []
        self.c: list[int] = []
        self.v: list[float] = []
        self.lo: list[float] = []
        self.hi: list[float] = []
        self.sections: list[tuple[str, int, int]] = []   # (name, rows, nonzeros) at each mark

    def mark(self, name: str) -> None:
        """Close a family of rows (for profiles: bench/profile_exact.py reads the sizes per family)."""
        self.sections.append((name, len(self.lo), len(self.v)))

    def add(self, terms, lo=-np.inf, hi=np.inf) -> None:
        i = len(self.lo)
        for col, coef in terms:
            self.r.append(i)
            self.c.append(int(col))
            self.v.append(float(coef))
        self.lo.append(lo)
        self.hi.append(hi)


def _relatives_count(preds) -> np.ndarray:
    """Number of strict ancestors per node, for nodes in topological order with their predecessor lists.
    (Called on reversed successor lists it counts descendants, indices reversed.)"""
    n = len(preds)
    sets: list[set] = []
    for o in range(n):
        s = set()
        for p in preds[o]:
            s.add(p)
            s |= sets[p]
        sets.append(s)
    return np.array([len(s) for s in sets], dtype=np.int64)


def _add_live_cuts(C, graph, used, tid, x, r, xin, xout, hi, preds) -> None:
    """Valid inequalities from the cut argument of tight_bound: a tensor t that exists before op o runs (a
    param/input, or produced by an ancestor of o) and is read by a descendant of o is live across o in every
    schedule (o in live(t)). If such an o runs in compute stage k and t is not resident then, t is copied in
    after k (the reader after k needs it back, and only a swap_in brings it); if t was produced on the device,
    it was also copied out before k (a swap_in needs an earlier swap_out, and t, absent in k, is resident again
    only after that swap_in). At most one op runs per stage, so summing over live(t):
        r[t,k] + sum_{j>k} xin[t,j] >= sum_{o in live(t)} x[o,k]
        r[t,k] + sum_{j<k} xout[t,j] >= sum_{o in live(t)} x[o,k]     (t produced).
    Every integer solution of the model satisfies both (the model has no recompute), so the optimum is
    unchanged; the LP relaxation, whose fractional residency otherwise copies nothing, gets the link time,
    placed on the right side of the stage."""
    n = graph.num_ops
    S = n + 2
    anc: list[set] = []
    for o in range(n):
        a = set()
        for p in preds[o]:
            a.add(p)
            a |= anc[p]
        anc.append(a)
    prod = graph.producer()
    readers = {t: [o for o in range(n) if t in graph.ops[o].inputs] for t in used}
    for t in used:
        live = [o for o in range(n) if (prod[t] < 0 or prod[t] in anc[o]) and any(o in anc[q] for q in readers[t])]
        if not live:
            continue
        i = tid[t]
        for k in range(1, n + 1):               # compute stage k runs the op of column k - 1
            ops = [(x[o, k - 1], -1.0) for o in live if hi[x[o, k - 1]] > 0]
            if not ops:
                continue
            C.add([(r[i, k], 1.0)] + [(xin[i, j], 1.0) for j in range(k + 1, S) if hi[xin[i, j]] > 0] + ops, lo=0)
            if prod[t] >= 0:
                C.add([(r[i, k], 1.0)] + [(xout[i, j], 1.0) for j in range(k) if hi[xout[i, j]] > 0] + ops, lo=0)


def _add_dominance_rows(C, graph, used, x, r, xin, xout, hi, P, persistent) -> None:
    """Rows that remove only dominated solutions: a tensor that is neither persistent, nor a graph output, nor an
    update (an activation or a graph input) is resident in stage k only if it is produced in k or a reader of
    it runs in stage >= k; it is swapped in during k only if a reader runs after k; and it is swapped out during
    k only if it is swapped in after k. From any solution, dropping such a tensor after its last reader and
    removing the copies these rows forbid keeps every other row satisfied (residency and copies only add
    memory and stage time) and costs no more, so the optimum is unchanged; the search has far fewer states
    (and fewer equal-cost copies of each plan) to rule out."""
    n = graph.num_ops
    S = n + 2
    cons = graph.consumers()
    outputs = set(graph.outputs)
    for i, t in enumerate(used):
        if persistent[i] or t in outputs or t in graph.updates:
            continue
        readers = cons[t]
        # reader_from[k]: terms "a reader of t runs in stage >= k" (compute stages 1..n, column k - 1)
        reader_from = [[(x[o, j - 1], -1.0) for o in readers for j in range(max(k, 1), n + 1)
                        if hi[x[o, j - 1]] > 0] for k in range(S + 1)]
        for k in range(S):
            if hi[r[i, k]] > 0:
                C.add([(r[i, k], 1.0)] + reader_from[k] + [(c, -v) for c, v in P(i, k)], hi=0)
            if hi[xin[i, k]] > 0:
                C.add([(xin[i, k], 1.0)] + reader_from[k + 1], hi=0)
            if hi[xout[i, k]] > 0:
                C.add([(xout[i, k], 1.0)] + [(xin[i, j], -1.0) for j in range(k + 1, S) if hi[xin[i, j]] > 0],
                      hi=0)


def _add_first_copy_cuts(C, graph, used, tid, x, xin, xout, init, hi, persistent) -> None:
    """Valid inequalities that count each tensor's first copy once (the model's rows let a fractional solution
    satisfy "a copy before each possible reader stage" with one fractional copy; integer solutions cannot):
    - a tensor that must reach the host (a graph output, or an update whose param is not kept) is copied out
      after its producer's stage: for every compute stage J,
          sum_{k > J} xout[t,k] (+ init[param]) >= sum_{q >= J} x[prod,q];
    - a param or input is resident at the start (init) or copied in before its first reader: for every reader
      o and stage J,  init[t] + sum_{k < J} xin[t,k] >= sum_{q <= J} x[o,q].
    Every integer solution satisfies them (the copy it needs happens in that window), so the optimum is
    unchanged."""
    n = graph.num_ops
    S = n + 2
    prod = graph.producer()
    cons = graph.consumers()
    outputs = set(graph.outputs)

    def stage_terms(o, lo_k, hi_k, coef):     # x[o, q] for compute stages lo_k <= q <= hi_k (column q - 1)
        return [(x[o, q - 1], coef) for q in range(max(lo_k, 1), min(hi_k, n) + 1) if hi[x[o, q - 1]] > 0]

    for i, t in enumerate(used):
        if prod[t] >= 0 and (t in outputs or t in graph.updates):
            keep = [(init[tid[graph.updates[t]]], 1.0)] if t in graph.updates and graph.updates[t] in tid else []
            for J in range(1, n + 1):
                made = stage_terms(prod[t], J, n, -1.0)
                if made:
                    C.add([(xout[i, k], 1.0) for k in range(J + 1, S) if hi[xout[i, k]] > 0] + keep + made, lo=0)
        elif prod[t] < 0:
            start = [(init[i], 1.0)] if persistent[i] else []
            for o in cons[t]:
                for J in range(1, n + 1):
                    need = stage_terms(o, 1, J, -1.0)
                    if need:
                        C.add([(xin[i, k], 1.0) for k in range(J) if hi[xin[i, k]] > 0] + start + need, lo=0)


def _aligned(nbytes: int, a: int) -> int:
    return max(a, (int(nbytes) + a - 1) // a * a)


def solve_exact(graph: DataflowGraph, op_time, device, mem_limit: int, alignment: int = DEFAULT_ALIGNMENT,
                time_limit_s: float = 60.0, planner_name: str = "exact-stages", schedule=None,
                class_choice: bool = True, backend: str = "auto", warm_schedule=None,
                warm_start: ExactResult | None = None, workers: int = 2, live_cuts: bool = True,
                dominance: bool = False, copy_cuts: bool = True, det_limit: float | None = None) -> ExactResult:
    """Solve the stage model (module docstring) and build its plan. Raises TvmSwapError past MAX_OPS ops.

    `schedule`, if given, fixes the op order (the model then optimises memory and copies only).
    `class_choice=False` puts every tensor in the class of its own aligned size (a smaller, faster model).
    `backend`: "cpsat" (OR-Tools, the `exact` extra), "highs" (scipy), "auto" (CP-SAT where installed).
    `warm_schedule` (CP-SAT only): an op order, e.g. the GA's; the model is first solved with that order fixed
    (a fraction of the time limit) and its solution is the free solve's starting incumbent (a hint), so the
    free solve never ends worse than the best stage plan for that order. `warm_start`: such a result, already
    solved (same graph, limit and class_choice), used the same way. `live_cuts` adds valid inequalities that
    tighten the relaxation (_add_live_cuts); they remove no integer solution. `det_limit` (CP-SAT only): also stop
    at this much deterministic time (CP-SAT's work units: the same result whatever the machine's load)."""
    backend = _check_backend(backend, warm_schedule, warm_start)
    n = graph.num_ops
    if n > MAX_OPS:
        raise TvmSwapError(f"the exact solver takes graphs of up to {MAX_OPS} ops; this one has {n}")
    op_time = np.asarray(op_time, dtype=np.float64)
    f = _Facts.of(graph)
    used, T, S = f.used, len(f.used), n + 2
    sizes = sorted({_aligned(graph.tensors[t].nbytes, alignment) for t in used})
    cls_of = [sizes.index(_aligned(graph.tensors[t].nbytes, alignment)) for t in used]
    max_ws = max((op.workspace for op in graph.ops), default=0)
    ws_bytes = _aligned(max_ws, alignment) if max_ws else 0
    V, m = _columns(n, T, S, len(sizes))
    hi = np.array(V.hi)
    lo = np.array(V.lo)
    preds = _fix_bounds(graph, f, m, lo, hi, schedule, class_choice, cls_of)
    C = _Rows()
    x, r, xin, xout, init = m.x, m.r, m.xin, m.xout, m.init

    def P(i: int, k: int):
        """terms for 'tensor i is produced in stage k'."""
        t = used[i]
        if f.prod[t] < 0 or not 1 <= k <= n:
            return []
        return [(x[f.prod[t], k - 1], 1.0)]

    _add_order_rows(C, graph, x)
    _add_residency_rows(C, f, m, hi, P)
    if live_cuts:
        _add_live_cuts(C, graph, used, f.tid, x, r, xin, xout, hi, preds)
    C.mark("live cuts")
    if dominance:
        _add_dominance_rows(C, graph, used, x, r, xin, xout, hi, P, f.persistent)
    C.mark("dominance")
    if copy_cuts:
        _add_first_copy_cuts(C, graph, used, f.tid, x, xin, xout, init, hi, f.persistent)
    C.mark("first-copy cuts")
    _add_memory_rows(C, f, m, hi, sizes, cls_of, float(mem_limit - ws_bytes))
    _add_stage_rows(C, graph, f, m, op_time, device)

    if backend == "cpsat":
        warm, warm_s = warm_start, 0.0
        if warm is None and warm_schedule is not None and schedule is None:
            warm = solve_exact(graph, op_time, device, mem_limit, alignment, time_limit_s * WARM_SHARE,
                               planner_name, schedule=warm_schedule, class_choice=class_choice,
                               backend="cpsat", workers=workers)
            warm_s = warm.solve_s
        hint = None if warm is None else warm.solution
        if hint is not None and len(hint) != V.n:
            raise TvmSwapError("warm_start is a solution of another model (graph, limit or class_choice differ)")
        stage_cols = np.zeros(V.n, dtype=bool)
        stage_cols[m.s] = True
        copy_cols = np.zeros(V.n, dtype=bool)
        copy_cols[xin.ravel()] = copy_cols[xout.ravel()] = True
        status, sol, objective_s, gap, solve_s = _solve_cpsat(
            V, C, lo, hi, stage_cols, copy_cols, float(op_time.sum()), max(1e-3, time_limit_s - warm_s), workers,
            hint, det_limit)
        solve_s += warm_s
        if hint is not None and (sol is None or objective_s > warm.objective_s):   # the hint was not taken up
            status, sol, objective_s, gap = "time_limit", hint, warm.objective_s, None
    else:
        status, sol, objective_s, gap, solve_s = _solve_highs(V, C, lo, hi, m.s, xin, xout, float(op_time.sum()),
                                                              time_limit_s)
    if sol is None:
        return ExactResult(None, status, None, None, solve_s, V.n)
    cls_of = [int(np.argmax(sol[m.y[i]])) for i in range(T)]
    plan = _build_plan(graph, device, mem_limit, alignment, planner_name, used, sizes, cls_of, ws_bytes,
                       sol[x], sol[r], sol[xin], sol[xout], sol[init], sol[m.cnt])
    return ExactResult(plan, status, objective_s, gap, solve_s, V.n, backend, sol)


def _check_backend(backend: str, warm_schedule, warm_start) -> str:
    """The backend "auto" stands for, after checking the choice is one there is."""
    if backend == "auto":
        backend = "cpsat" if _have_cpsat() else "highs"
    if backend not in ("cpsat", "highs"):
        raise TvmSwapError(f"unknown exact backend {backend!r}: use 'cpsat', 'highs' or 'auto'")
    if (warm_schedule is not None or warm_start is not None) and backend != "cpsat":
        raise TvmSwapError("warm_schedule needs the CP-SAT backend (pip install 'tvm_swap[exact]')")
    if backend == "cpsat" and not _have_cpsat():
        raise TvmSwapError("the CP-SAT backend needs OR-Tools: pip install 'tvm_swap[exact]' (or backend='highs')")
    return backend


class _Facts(NamedTuple):
    """What the rows read of the graph: the used tensors (the model's tensor index i is their position)."""
    used: list
    tid: dict                  # tensor -> its index i
    prod: np.ndarray           # tensor -> producing op (-1: none)
    cons: list                 # tensor -> consuming ops
    persistent: list           # per index i
    updates: dict              # new -> old
    new_of: dict               # old -> new
    outputs: set

    @staticmethod
    def of(graph: DataflowGraph) -> "_Facts":
        used = graph.used_tensors()
        updates = graph.updates
        return _Facts(used, {t: i for i, t in enumerate(used)}, graph.producer(), graph.consumers(),
                      [graph.is_persistent(t) for t in used], updates, {old: new for new, old in updates.items()},
                      set(graph.outputs))


class _Model(NamedTuple):
    """The model's columns (index arrays into the MILP's variables)."""
    x: np.ndarray              # x[o, k-1]: op o runs in compute stage k = 1..n
    r: np.ndarray              # r[i, k]: tensor i resident in stage k
    xin: np.ndarray            # copied in during stage k
    xout: np.ndarray           # copied out during stage k
    init: np.ndarray           # resident at the start
    y: np.ndarray              # y[i, c]: tensor i lives in objects of class c (>= its size)
    z: np.ndarray              # z[i, k, c] >= r[i, k] AND y[i, c]
    w: np.ndarray              # w[i, c] >= init[i] AND y[i, c]
    cnt: np.ndarray            # objects per class
    s: np.ndarray              # stage seconds


def _columns(n: int, T: int, S: int, nc: int) -> tuple[_Vars, _Model]:
    V = _Vars()
    x = V.add(n * n).reshape(n, n)
    r = V.add(T * S).reshape(T, S)
    xin = V.add(T * S).reshape(T, S)
    xout = V.add(T * S).reshape(T, S)
    init = V.add(T)
    y = V.add(T * nc).reshape(T, nc)
    z = V.add(T * S * nc, 0.0, 1.0, 0).reshape(T, S, nc)
    w = V.add(T * nc, 0.0, 1.0, 0).reshape(T, nc)
    cnt = V.add(nc, 0.0, float(T), 1)
    s = V.add(S, 0.0, np.inf, 0)
    return V, _Model(x, r, xin, xout, init, y, z, w, cnt, s)


def _fix_bounds(graph: DataflowGraph, f: _Facts, m: _Model, lo, hi, schedule, class_choice: bool, cls_of):
    """Fixings in the column bounds: a given schedule; an op runs no earlier than its ancestors allow and no
    later than its descendants allow; nothing of a tensor before its producer's earliest stage; a fixed class
    without class choice; what cannot happen. Returns the ops' predecessor lists."""
    n, x = graph.num_ops, m.x
    if schedule is not None:
        for k, o in enumerate(schedule):
            lo[x[int(o), k]] = 1.0
    preds, succs = graph.op_preds(), graph.op_succs()
    anc_n = _relatives_count(preds)
    desc_n = _relatives_count([[n - 1 - v for v in succs[n - 1 - j]] for j in range(n)])[::-1]
    first_stage = np.full(graph.num_tensors, n + 1)
    for o in range(n):
        hi[x[o, :anc_n[o]]] = 0.0
        hi[x[o, n - desc_n[o]:]] = 0.0
        for t in graph.ops[o].outputs:
            first_stage[t] = anc_n[o] + 1
    for i, t in enumerate(f.used):
        if f.prod[t] >= 0:         # nothing of t exists before its producer's earliest stage
            hi[m.r[i, :first_stage[t]]] = 0.0
            hi[m.xin[i, :first_stage[t] + 1]] = 0.0
            hi[m.xout[i, :first_stage[t] + 1]] = 0.0
    if not class_choice:
        for i in range(len(f.used)):
            lo[m.y[i, cls_of[i]]] = 1.0
    for i, t in enumerate(f.used):                 # fixings: what cannot happen
        if not f.persistent[i]:
            hi[m.init[i]] = 0.0
        if f.prod[t] < 0:
            hi[m.xout[i]] = 0.0                    # host already has params and inputs
    return preds


def _add_order_rows(C: _Rows, graph: DataflowGraph, x) -> None:
    """One op per stage, one stage per op, and precedence."""
    n = graph.num_ops
    for o in range(n):
        C.add([(x[o, k], 1.0) for k in range(n)], 1, 1)
    for k in range(n):
        C.add([(x[o, k], 1.0) for o in range(n)], 1, 1)
    C.mark("assignment")
    for o, ps in enumerate(graph.op_preds()):
        for p in ps:   # o has run by stage k only if p ran before k (stronger than comparing positions)
            for k in range(n):
                C.add([(x[o, j], 1.0) for j in range(k + 1)] + [(x[p, j], -1.0) for j in range(k)], hi=0)
    C.mark("precedence")


def _add_residency_rows(C: _Rows, f: _Facts, m: _Model, hi, P) -> None:
    """Residency follows copies and production, a consumer's inputs are resident (or copied in) at its
    stage, the end state repeats the start, and results and updates reach the host."""
    x, r, xin, xout, init = m.x, m.r, m.xin, m.xout, m.init
    n, S = x.shape[0], r.shape[1]
    prod, tid, updates = f.prod, f.tid, f.updates
    for i, t in enumerate(f.used):
        for k in range(S):
            prev = [(r[i, k - 1], -1.0)] if k else [(init[i], -1.0)]
            C.add([(r[i, k], 1.0), (xin[i, k], -1.0)] + prev + [(c, -v) for c, v in P(i, k)], hi=0)
            C.add([(xin[i, k], 1.0), (r[i, k], -1.0)], hi=0)
            C.add([(xin[i, k], 1.0)] + [(c, -v) for c, v in prev], hi=1 if k else 1)  # not while resident
            C.add([(xin[i, k], 1.0)] + P(i, k), hi=1)
            C.add([(xout[i, k], 1.0), (r[i, k], -1.0)], hi=0)
            C.add([(xout[i, k], 1.0)] + [(c, v) for c, v in prev], hi=0 if k else 0)        # resident before
            if prod[t] >= 0:
                C.add([(xin[i, k], 1.0)] + [(xout[i, j], -1.0) for j in range(k)], hi=0)
            # produced in stage k: resident in it
            if P(i, k):
                C.add([(r[i, k], 1.0)] + [(c, -v) for c, v in P(i, k)], lo=0)
        if prod[t] >= 0:           # t exists only once its producer has run
            for k in range(S):
                C.add([(r[i, k], 1.0)] + [(x[prod[t], j - 1], -1.0) for j in range(1, min(k, n) + 1)], hi=0)
        for o in f.cons[t]:
            for k in range(1, n + 1):
                C.add([(r[i, k], 1.0), (xin[i, k], -1.0), (x[o, k - 1], -1.0)], lo=0)
        # the end state repeats the start (everything else is dropped after the last stage)
        if f.persistent[i] and t not in f.new_of:
            C.add([(r[i, S - 1], 1.0), (init[i], -1.0)], lo=0)
        elif t in updates and updates[t] in tid:
            C.add([(r[i, S - 1], 1.0), (init[tid[updates[t]]], -1.0)], lo=0)
        if prod[t] >= 0 and (t in f.outputs or t in updates) and not (t in updates and updates[t] in tid):
            C.add([(xout[i, k], 1.0) for k in range(S)], lo=1)
        if t in updates and updates[t] in tid:
            C.add([(xout[i, k], 1.0) for k in range(S)] + [(init[tid[updates[t]]], 1.0)], lo=1)
            # a kept param read back from the host reads last iteration's update there: copy it out too
            # (the runtime would otherwise refresh the host copy between iterations, a copy nobody simulates)
            j = tid[updates[t]]
            for k in range(S):
                if hi[xin[j, k]] > 0:
                    C.add([(xout[i, q], 1.0) for q in range(S)] + [(xin[j, k], -1.0), (init[j], -1.0)], lo=-1)
    C.mark("residency and copies")


def _add_memory_rows(C: _Rows, f: _Facts, m: _Model, hi, sizes, cls_of, room: float) -> None:
    """Memory: each tensor picks one class at least its size (an update the class of its param); the objects
    per class cover every stage; the classes fit `room` (the limit less the workspace)."""
    y, z, w, r, init, cnt = m.y, m.z, m.w, m.r, m.init, m.cnt
    nc, S, T = len(sizes), r.shape[1], len(f.used)
    updates, tid = f.updates, f.tid
    for i, t in enumerate(f.used):
        for c in range(nc):
            if c < cls_of[i]:
                hi[y[i, c]] = 0.0
            for k in range(S):
                C.add([(z[i, k, c], 1.0), (r[i, k], -1.0), (y[i, c], -1.0)], lo=-1)
            C.add([(w[i, c], 1.0), (init[i], -1.0), (y[i, c], -1.0)], lo=-1)
        C.add([(y[i, c], 1.0) for c in range(nc)], 1, 1)
        if t in updates and updates[t] in tid:
            for c in range(nc):
                C.add([(y[i, c], 1.0), (y[tid[updates[t]], c], -1.0)], 0, 0)
    for c in range(nc):
        for k in range(S):
            C.add([(cnt[c], 1.0)] + [(z[i, k, c], -1.0) for i in range(T)], lo=0)
        C.add([(cnt[c], 1.0)] + [(w[i, c], -1.0) for i in range(T)], lo=0)
    C.add([(cnt[c], float(sizes[c])) for c in range(len(sizes))], hi=room)
    C.mark("memory classes")


def _add_stage_rows(C: _Rows, graph: DataflowGraph, f: _Facts, m: _Model, op_time, device) -> None:
    """Stage times: a stage lasts at least its compute and what its copies take on the link (each way alone,
    both at the shared rates, and the link's total)."""
    d_solo, h_solo, d_both, h_both = _link_rates(device)
    link = max(d_solo, h_solo, d_both + h_both)
    nb = graph.tensor_bytes().astype(np.float64)
    x, s, xin, xout, used = m.x, m.s, m.xin, m.xout, f.used
    n, S, T = graph.num_ops, m.r.shape[1], len(used)
    a1 = (1.0 - h_both / h_solo) / d_both        # out first at the shared rate, then in alone
    a2 = (1.0 - d_both / d_solo) / h_both
    for k in range(S):
        if 1 <= k <= n:
            C.add([(s[k], 1.0)] + [(x[o, k - 1], -float(op_time[o])) for o in range(n)], lo=0)
        outs = [(xout[i, k], nb[used[i]]) for i in range(T)]
        ins = [(xin[i, k], nb[used[i]]) for i in range(T)]
        C.add([(s[k], 1.0)] + [(c, -v / d_solo) for c, v in outs], lo=0)
        C.add([(s[k], 1.0)] + [(c, -v / h_solo) for c, v in ins], lo=0)
        C.add([(s[k], 1.0)] + [(c, -v / link) for c, v in outs + ins], lo=0)
        C.add([(s[k], 1.0)] + [(c, -v * a1) for c, v in outs] + [(c, -v / h_solo) for c, v in ins], lo=0)
        C.add([(s[k], 1.0)] + [(c, -v * a2) for c, v in ins] + [(c, -v / d_solo) for c, v in outs], lo=0)
    C.mark("stage times")


WARM_SHARE = 0.25      # of the time limit, for the fixed-schedule solve that warms the free one


def _have_cpsat() -> bool:
    try:
        import ortools.sat.python.cp_model  # noqa: F401
    except ImportError:
        return False
    return True


def _solve_highs(V, C, lo, hi, s, xin, xout, total_op_s, time_limit_s):
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_array

    cost = np.zeros(V.n)
    cost[s] = 1.0
    scale = max(total_op_s, 1e-12)
    cost[xin.ravel()] = 1e-9 * scale              # tie-break: no copy that buys nothing
    cost[xout.ravel()] = 1e-9 * scale
    A = csr_array((C.v, (C.r, C.c)), shape=(len(C.lo), V.n))
    t0 = time.perf_counter()
    res = milp(cost / scale, constraints=LinearConstraint(A, C.lo, C.hi), integrality=np.array(V.integral),
               bounds=Bounds(lo, hi), options={"time_limit": float(time_limit_s), "disp": False, "mip_rel_gap": GAP_LIMIT})
    solve_s = time.perf_counter() - t0
    status = {0: "optimal", 1: "time_limit", 2: "infeasible", 3: "unbounded"}.get(res.status, "other")
    if res.x is None:
        return status, None, None, None, solve_s
    gap = getattr(res, "mip_gap", None)
    return (status, np.round(res.x).astype(np.int64), float(res.x[s].sum()), None if gap is None else float(gap),
            solve_s)


GAP_LIMIT = 1e-3       # CP-SAT stops (and reports "optimal") once proven within 0.1% of the model's optimum
TIME_TICKS = 10**6     # CP-SAT's integer time unit: the total op time / TIME_TICKS


def _solve_cpsat(V, C, lo, hi, stage_cols, copy_cols, total_op_s, time_limit_s, workers, hint, det_limit=None):
    """The same rows in CP-SAT. Its coefficients must be integers: the 0/1 and byte coefficients are; the stage
    times s_k count ticks of total_op_s / TIME_TICKS, and in their rows (s_k - sum c_i v_i >= 0, c_i >= 0) each
    c_i is rounded UP to whole ticks, so a stage never lasts less than in the float model (the objective may
    overstate by at most a tick per term; it is reported only, the plan is simulated)."""
    from ortools.sat.python import cp_model

    tick = max(total_op_s, 1e-12) / TIME_TICKS
    rows: dict[int, list] = {}
    for i, c, v in zip(C.r, C.c, C.v):
        rows.setdefault(i, []).append((c, v))
    int_rows = []
    stage_ub = np.zeros(V.n, dtype=np.int64)   # a stage lasts at most its longest row with every term on
    for i in range(len(C.lo)):
        terms = rows.get(i, [])
        if not terms:
            continue
        timed = any(stage_cols[c] for c, _ in terms)
        coefs = []
        for c, v in terms:
            if timed and not stage_cols[c]:
                v = -np.ceil(-v / tick - 1e-9)          # v < 0: the duration coefficient, rounded up
            if v != round(v):
                raise TvmSwapError(f"CP-SAT row {i} has a fractional coefficient {v}")
            coefs.append((int(round(v)), c))
        if timed:
            need = sum(-a for a, c in coefs if not stage_cols[c])
            for a, c in coefs:
                if stage_cols[c]:
                    stage_ub[c] = max(stage_ub[c], need)
        int_rows.append((coefs, C.lo[i], C.hi[i]))
    m = cp_model.CpModel()
    xs = []
    for j in range(V.n):
        lb = int(np.ceil(lo[j] - 1e-9))
        if stage_cols[j]:
            xs.append(m.new_int_var(max(lb, 0), int(stage_ub[j]), f"s{j}"))
        else:
            ub = int(np.floor(hi[j] + 1e-9))
            xs.append(m.new_bool_var(f"b{j}") if (lb >= 0 and ub <= 1) else m.new_int_var(lb, ub, f"i{j}"))
            if lb == ub:
                m.add(xs[j] == lb)
    for coefs, lo_i, hi_i in int_rows:
        expr = sum(a * xs[c] for a, c in coefs)
        if np.isfinite(lo_i):
            m.add(expr >= int(np.ceil(lo_i - 1e-9)))
        if np.isfinite(hi_i):
            m.add(expr <= int(np.floor(hi_i + 1e-9)))
    n_copies = int(copy_cols.sum())
    # sum of stage ticks first; one copy costs less than a tick (the tie-break: no copy that buys nothing)
    m.minimize(sum((n_copies + 1) * xs[j] for j in np.flatnonzero(stage_cols))
               + sum(xs[j] for j in np.flatnonzero(copy_cols)))
    if hint is not None:
        for j in range(V.n):
            m.add_hint(xs[j], int(hint[j]))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = int(workers)
    solver.parameters.relative_gap_limit = GAP_LIMIT
    if det_limit is not None:
        solver.parameters.max_deterministic_time = float(det_limit)
    t0 = time.perf_counter()
    st = solver.solve(m)
    if st == cp_model.MODEL_INVALID:
        raise TvmSwapError(f"CP-SAT model invalid: {m.validate()}")
    solve_s = time.perf_counter() - t0
    hit = solve_s >= time_limit_s * 0.99 or (det_limit is not None
                                              and solver.response_proto.deterministic_time >= det_limit * 0.99)
    status = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "time_limit", cp_model.INFEASIBLE: "infeasible",
              cp_model.UNKNOWN: "time_limit" if hit else "unknown"}.get(st, "other")
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return status, None, None, None, solve_s
    sol = np.array([solver.value(v) for v in xs], dtype=np.int64)
    obj = solver.objective_value
    gap = max(0.0, obj - solver.best_objective_bound) / max(obj, 1e-12)
    return status, sol, float(sol[stage_cols].sum()) * tick, float(gap), solve_s


def _build_plan(graph, device, mem_limit, alignment, name, used, sizes, cls_of, ws_bytes, x, r, xin, xout, init,
                cnt) -> Plan:
    """Emit the stage model's decisions as actions through the ActionBuilder (which derives the deps)."""
    n = graph.num_ops
    S = n + 2
    counts = [int(c) for c in cnt]
    pool = Pool(list(sizes), counts, alignment, ws_bytes)
    first = pool.first_object().tolist()
    free = [list(range(first[c], first[c] + counts[c])) for c in range(len(sizes))]
    tensor_class = [-1] * graph.num_tensors
    for i, t in enumerate(used):
        tensor_class[t] = cls_of[i]
    schedule = [int(np.argmax(x[:, k])) for k in range(n)]
    b = ActionBuilder(graph, pool.num_objects)
    take = lambda i: free[cls_of[i]].pop(0)  # noqa: E731
    residents = []
    for i, t in enumerate(used):
        if init[i]:
            o = take(i)
            b.place_initial(t, o)
            residents.append((t, o))
    prev = [bool(init[i]) for i in range(len(used))]
    for k in range(S):
        for i, t in enumerate(used):        # drops at the border into stage k
            if prev[i] and not r[i, k]:
                o = b.where[t]
                b.drop(t)
                free[cls_of[i]].append(o)
                free[cls_of[i]].sort()
        for i, t in enumerate(used):
            if xin[i, k]:
                b.swap_in(t, take(i))
        if 1 <= k <= n:
            op = schedule[k - 1]
            idx = {t: i for i, t in enumerate(used)}
            b.compute(op, [take(idx[t]) for t in graph.ops[op].outputs])
        for i, t in enumerate(used):
            if xout[i, k]:
                b.swap_out(t)
        prev = [bool(r[i, k]) for i in range(len(used))]
    stay = {t for t, _ in residents}
    stay |= {new for new, old in graph.updates.items() if old in stay}
    stay -= set(graph.updates.values())
    for i, t in enumerate(used):
        if prev[i] and t not in stay:
            b.drop(t)
    return Plan(graph_name=graph.name, graph_fingerprint=graph.fingerprint(), planner=name,
                mem_limit=int(mem_limit), device=device.to_dict() if hasattr(device, "to_dict") else dict(device),
                schedule=schedule, pool=pool, tensor_class=tensor_class, initial_residents=sorted(residents),
                actions=b.actions)
