"""plan_graph: the one entry point every caller uses (CLI, build, benchmarks).

It checks the request, picks per-op times, dispatches to a planner, and then ALWAYS verifies the plan
(tvm_swap.verify.check_plan) and fills `plan.predicted` from the simulator and the bounds, so no caller
ever sees an unverified or unpredicted plan.

Percentage limits ('25%') are of what the model uses without tvm_swap: the device bytes of TVM's own static
plan (tvm_swap.limits.mem_limit.no_swap_bytes), so "100%" means no swapping; `bounds.noswap_peak(graph)` (the
idealised liveness peak) is reported beside it.
"""
from __future__ import annotations

import hashlib
import time

import numpy as np

from ..cost.roofline import roofline_times
from ..cost.devices import DeviceSpec, get_device
from ..errors import InfeasibleLimitError, TvmSwapError
from ..graph import DataflowGraph
from ..plan import Plan
from .context import PlanningContext
from .feasibility import min_feasible_limit
from .graphindex import GraphIndex
from .registry import FEASIBLE_AT_THE_FLOOR, PLANNERS, SEARCH_PLANNERS
from .swapadvisor.arena import arena_min_limit

POOL_KINDS = ("arena", "size-classes")


# ---------------------------------------------------------------- inputs
def resolve_pool(planner: str, pool: str | None) -> str:
    """The memory model for `planner`: arena by default for the swapadvisor planners, size classes for the
    paper's baselines (which model only that pool)."""
    if pool is None:
        return "arena" if planner in SEARCH_PLANNERS else "size-classes"
    if pool not in POOL_KINDS:
        raise TvmSwapError(f"unknown pool {pool!r}; choose one of {', '.join(POOL_KINDS)}")
    if pool == "arena" and planner not in SEARCH_PLANNERS:
        raise TvmSwapError(f"planner {planner!r} models the paper's size-class pool only; use pool='size-classes' "
                           f"or one of {', '.join(SEARCH_PLANNERS)}")
    return pool


def feasible_floor(graph: DataflowGraph, pool: str, alignment: int = 256, memo=None) -> tuple[int, str]:
    """(smallest feasible limit, why) for a memory model; needs no op times, so it runs before profiling.
    memo: an object with get(pool, alignment) -> (floor, why) | None and put(pool, alignment, (floor, why))
    that keeps the answer for this very graph (tvm_swap.caches.graph.FloorMemo keeps it on disk)."""
    if memo is not None:
        known = memo.get(pool, alignment)
        if known is None:
            known = feasible_floor(graph, pool, alignment)
            memo.put(pool, alignment, known)
        return known
    if pool == "arena":
        gi = GraphIndex.of(graph, alignment, keep_updated=False)
        return arena_min_limit(gi), ("in an arena the largest op's inputs, outputs and workspace must fit at "
                                     "once, plus the fragmentation placement cannot avoid")
    return min_feasible_limit(graph, alignment), (
        "the size-class pool needs, per class, as many objects as one op uses at once (sum over classes of "
        "class size x that count) plus the workspace; an arena (pool='arena') needs less")


def infeasible_floor(graph: DataflowGraph, limit: int, pool: str, alignment: int = 256, memo=None):
    """None when `limit` is feasible for the memory model, else (smallest feasible limit, why)."""
    if pool == "arena":
        # one plan at the limit settles most cases; the min feasible limit (a search) only for a refusal
        from .swapadvisor.arena import arena_fits, working_set_floor

        gi = GraphIndex.of(graph, alignment, keep_updated=False)
        if limit >= working_set_floor(gi) + gi.workspace and arena_fits(gi, limit):
            return None
    floor, why = feasible_floor(graph, pool, alignment, memo)
    return (floor, why) if limit < floor else None


def sure_refusal(graph: DataflowGraph, pool: str, alignment: int = 256) -> tuple[int, int, str]:
    """(below, floor, why): infeasible_floor refuses every limit under `below`, naming (floor, why); what a
    caller may keep to refuse those limits without the graph (tvm_swap.examples.floors). The arena's fit test
    is not monotone (a limit under the floor may still fit), but none fits under the largest op's working
    set plus the workspace, where infeasible_floor goes straight to the floor."""
    floor, why = feasible_floor(graph, pool, alignment)
    if pool != "arena":
        return floor, floor, why
    from .swapadvisor.arena import working_set_floor

    gi = GraphIndex.of(graph, alignment, keep_updated=False)
    return min(floor, working_set_floor(gi) + gi.workspace), floor, why


def check_feasible(graph: DataflowGraph, limit: int, pool: str, alignment: int = 256, planner: str | None = None,
                   device="v100-16gb", op_time=None, seed: int = 0, options: dict | None = None,
                   memo=None) -> None:
    """Raise InfeasibleLimitError when `limit` cannot be met: below the pool's floor, naming the smallest limit
    `planner` meets (a baseline with a floor of its own names that one; see _refusal). Runs before any
    profiling (roofline times when `op_time` is None), so compile_model and plan_graph refuse alike.
    memo: keeps the pool's floor for this graph (see feasible_floor)."""
    from ..limits.mem_limit import floor_hint, no_swap_bytes

    below = infeasible_floor(graph, limit, pool, alignment, memo)
    if below is None:
        return
    floor, why = below
    why = f"{why}; {floor_hint(graph, pool, alignment, limit)}"
    if planner is None:
        e = InfeasibleLimitError(limit, floor, why)
    else:
        dev = get_device(device)
        at_floor = PlanningContext(graph, resolve_op_time(graph, dev, op_time), dev, floor, alignment, int(seed), 1.0,
                                   0, 1, False, dict(options or {}), pool)
        e = _refusal(planner, limit, floor, why, at_floor)
    raise InfeasibleLimitError(e.mem_limit, e.min_feasible, e.reason, e.exact,
                               reference_bytes=no_swap_bytes(graph, alignment))   # the floor as a percentage too



def resolve_limit(graph: DataflowGraph, mem_limit, alignment: int = 256) -> int:
    """Bytes from an int, '16GB' / '512MiB', or a percentage of the model's no-swap need ('25%'; tvm_swap.limits.mem_limit)."""
    from ..limits.mem_limit import resolve_limit as resolve

    return resolve(graph, mem_limit, alignment)


def resolve_op_time(graph: DataflowGraph, device: DeviceSpec, op_time) -> np.ndarray:
    if op_time is None:
        return np.asarray(roofline_times(graph, device), dtype=np.float64)
    t = np.asarray(getattr(op_time, "times", op_time), dtype=np.float64).reshape(-1)
    if len(t) != graph.num_ops:
        raise TvmSwapError(f"op_time has {len(t)} entries but the graph has {graph.num_ops} ops: "
                           f"give one time in seconds per op (or None for roofline times)")
    if not np.isfinite(t).all() or (t < 0).any():
        raise TvmSwapError("op_time must be finite, non-negative seconds per op")
    return t


# ---------------------------------------------------------------- the entry point
def plan_graph(graph: DataflowGraph, mem_limit, device="v100-16gb", op_time=None, planner: str = "swapadvisor",
               budget_s: float = 60.0, seed: int = 0, generations: int | None = None, workers: int | None = None,
               progress: bool = False, alignment: int = 256, pool: str | None = None, executor: str = "processes",
               ray_address: str | None = None, **options) -> Plan:
    """Plan one iteration of `graph` under `mem_limit`; returns a verified Plan with `predicted` filled.

    mem_limit: bytes, '16GB', '512MiB' or '25%' (of the no-swap need, see the module docstring).
    op_time: seconds per op (array), or None for roofline times on `device`.
    planner: a PlannerName (or its string; see registry.py). budget_s: search wall-clock budget; generations: if given, exactly that many
    GA generations (reproducible: same seed + generations = same plan) and budget_s is ignored.
    workers: processes for the search (None: all cores; 1: in-process). executor: "processes" (local) or
    "ray" (Ray actors; ray_address: a running cluster, default a local Ray with `workers` CPUs); the plan
    does not depend on the executor or the number of workers. options: planner knobs
    (swapadvisor: population, temperature, schedule_mutation, max_pick_rate, cls_flip, cnt_redraw, cnt_sigma;
    recompute="on"/"off": whether evicted activations may be dropped and recomputed instead of copied, the
    search choosing per tensor; default on for swapadvisor in the arena pool, off for swapadvisor-nosearch
    and the size-class pool, see swapadvisor/planners.py).
    host_ops: ops run on the host instead ("optimizer": the update kernels; "auto": the ops the search over
    host placements puts there, from the policy's candidates; a list of op ids; see host_policy.py), the planner planning the rest.
    pool: the device memory model, "arena" (one region, a byte offset per stay; the default of the
    swapadvisor planners) or "size-classes" (the paper's pool; the only one the baselines model).
    Raises InfeasibleLimitError (with the smallest feasible limit) when no plan can meet the limit.
    """
    from ..errors import VerificationError
    from ..verify import check_plan, verify_prediction
    from .gc_pause import gc_paused

    t0 = time.perf_counter()
    if not isinstance(graph, DataflowGraph):
        raise TvmSwapError(f"plan_graph needs a DataflowGraph, got {type(graph).__name__}; "
                           f"load one with DataflowGraph.load(path) or tvm_swap.frontends.sources.load_graph")
    if planner not in PLANNERS:
        raise TvmSwapError(f"unknown planner {planner!r}; choose one of {', '.join(map(str, PLANNERS))}")
    if not isinstance(alignment, int) or alignment <= 0:
        raise TvmSwapError(f"alignment must be a positive number of bytes, got {alignment!r}")
    if generations is not None and (not isinstance(generations, (int, np.integer)) or generations < 0):
        raise TvmSwapError(f"generations must be a non-negative integer or None, got {generations!r}")
    if generations is None and not budget_s > 0:
        raise TvmSwapError(f"budget_s must be positive seconds, got {budget_s!r}")
    pool_given = pool
    pool = resolve_pool(planner, pool)
    from .swapadvisor.executors import EXECUTORS

    if executor not in EXECUTORS:
        raise TvmSwapError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    if ray_address and executor != "ray":
        raise TvmSwapError("ray_address is only for executor='ray'")
    host_ops = options.pop("host_ops", None)
    options = {**options, "executor": executor, "ray_address": ray_address}
    dev = get_device(device)
    with gc_paused():      # (gc_pause.py: collections rescan millions of live objects at 10^5 ops)
        limit = resolve_limit(graph, mem_limit, alignment)
        times = resolve_op_time(graph, dev, op_time)
        # "100%" means no swapping: where TVM's own plan fits there is nothing to move or search, if the size-class
        # pool that plan runs in fits too (its floor, objects per class plus the workspace, can exceed TVM's static
        # plan: then the search planner plans, rather than a refusal above the no-swap need; fuzz_runtime case 1151)
        no_swap_fits = (planner in SEARCH_PLANNERS and pool_given is None and limit >= _no_swap_bytes(graph, alignment)
                        and infeasible_floor(graph, limit, "size-classes", alignment) is None)
        if no_swap_fits:
            planner, pool = "noswap", "size-classes"
            host_ops = None   # (and nothing to place on the host)
        check_feasible(graph, limit, pool, alignment, planner, dev, times, seed, options)
        # the budget covers all of plan_graph: what the checks above took (an arena plan for feasibility) is spent
        budget_left = max(0.1 * float(budget_s), float(budget_s) - (time.perf_counter() - t0))
        ctx = PlanningContext(graph, times, dev, limit, alignment, int(seed), budget_left,
                              None if generations is None else int(generations), workers, bool(progress), dict(options),
                              pool)
        if host_ops is not None:     # some ops on the host (host_policy.py): the planner plans the device part
            from .host_policy import plan_with_host

            plan = plan_with_host(ctx, planner, host_ops)
        else:
            plan = PLANNERS[planner](ctx)
        check_plan(graph, plan, limit)
        plan.predicted = predict(graph, plan, times, dev)
        wrong = verify_prediction(plan)     # what the plan now reports of itself must hold too
        if wrong:
            plan.verified = False
            raise VerificationError(wrong)
    search = dict(plan.search or {})
    for k, v in (("search_s", round(time.perf_counter() - t0, 4)), ("generations", 0), ("evaluations", 1),
                 ("seed", int(seed)), ("history", [])):
        search.setdefault(k, v)
    if no_swap_fits:
        search["no_swap_fits"] = True
    plan.search = search
    return plan


def _no_swap_bytes(graph: DataflowGraph, alignment: int) -> int:
    from ..limits.mem_limit import no_swap_bytes

    return no_swap_bytes(graph, alignment)


# planners that plan at any limit down to their pool's floor (feasible_floor); the others have floors of their own


def _refusal(planner: str, limit: int, floor: int, why: str, at_floor: PlanningContext) -> InfeasibleLimitError:
    """The refusal of a limit below the floor, naming the smallest limit THIS planner meets, so that raising
    the limit to it works: a baseline with a higher floor of its own (noswap's everything-resident need, the
    exact-size pools of odswap and vdnn) says so when asked to plan at the general floor."""
    if planner not in FEASIBLE_AT_THE_FLOOR:
        try:
            PLANNERS[planner](at_floor)
        except InfeasibleLimitError as e:
            return InfeasibleLimitError(limit, max(floor, e.min_feasible), e.reason or why)
    return InfeasibleLimitError(limit, floor, why)


def predict(graph: DataflowGraph, plan: Plan, op_time: np.ndarray, device: DeviceSpec) -> dict:
    """Simulated time, bounds, memory and copy totals of a plan."""
    from .bounds import ideal_time, lower_bound
    from .host_sim import simulate_plan
    from .tight_bound import tight_lower_bound_detail
    from .timeline import peak_in_use

    sim = simulate_plan(graph, plan, op_time, device)     # host ops (if any) on the host's stream
    ideal = ideal_time(graph, op_time)
    t = float(sim.time_s)
    # the bounds depend on the graph, op times, device, limit and alignment only: kept with the graph, so
    # every planner asked at one limit (a comparison, the fuzz) shares them
    key = (int(plan.mem_limit), int(plan.pool.alignment), repr(device),
           hashlib.blake2b(np.ascontiguousarray(op_time, dtype=np.float64).tobytes(), digest_size=16).digest())
    bounds = graph._cache.setdefault("predict_bounds", {})
    recomputes = any(a.kind == "recompute" for a in plan.actions)
    if plan.host_ops:       # the device-only bounds assume every op on the device: the host-aware one instead
        return _predict_with_host(graph, plan, op_time, device, sim)
    if not recomputes and ("tight",) + key not in bounds:
        # the tight bound's detail carries the plain bound's terms too: one pass over the graph for both
        detail = tight_lower_bound_detail(graph, op_time, device, plan.mem_limit, plan.pool.alignment)
        bounds[("tight",) + key] = float(detail["tight_lower_bound_s"])
        bounds.setdefault(("lower",) + key, float(detail["lower_bound_s"]))
    if ("lower",) + key not in bounds:
        bounds[("lower",) + key] = float(lower_bound(graph, op_time, device, plan.mem_limit, plan.pool.alignment))
    out = {
        "time_s": t,
        "ideal_time_s": float(ideal),
        "lower_bound_s": bounds[("lower",) + key],
        # the tight bound assumes no recomputation (tight_bound.py, A2): not a bound for plans that recompute
        "tight_lower_bound_s": None if recomputes else bounds[("tight",) + key],
        "throughput_vs_ideal": float(ideal / t) if t > 0 else 1.0,
        "mem_limit_bytes": int(plan.mem_limit),
        "pool_bytes": int(plan.pool.total_bytes()),
        "peak_bytes": int(peak_in_use(graph, plan, sim)),
        "stream_busy_s": {k: float(v) for k, v in sim.stream_busy_s.items()},
    }
    out.update(plan.swap_stats(graph.tensor_bytes()))
    tb = graph.tensor_bytes()
    # output bytes of the recomputed ops only (of every op it cost ~0.4 CPU s at 10^5 ops)
    rc_ops = {a.op for a in plan.actions if a.kind == "recompute"}
    out.update(plan.recompute_stats({o: int(tb[list(graph.ops[o].outputs)].sum()) for o in rc_ops}, op_time))
    return out


def _predict_with_host(graph: DataflowGraph, plan: Plan, op_time: np.ndarray, device: DeviceSpec, sim) -> dict:
    """predict() of a plan with host ops: the host-aware bound (host_bound.py, the ops the placement search may
    place and the plan's host ops eligible) as both bounds, the host's busy seconds beside the streams'."""
    from ..cost.devices import get_host
    from ..cost.host import host_times
    from .bounds import ideal_time
    from .host_bound import host_lower_bound_detail
    from .host_split import host_eligible
    from .timeline import peak_in_use

    host = get_host(device)
    eligible = set(host_eligible(graph)) | set(plan.host_ops)   # (every op the placement search may place)
    # (a pure function of these, a linear program each: kept with the graph, as predict's other bounds, so the
    # host plans of one limit share it, ~20 ms each on the fuzz's graphs)
    key = ("host", int(plan.mem_limit), int(plan.pool.alignment), repr(device), tuple(sorted(eligible)),
           hashlib.blake2b(np.ascontiguousarray(op_time, dtype=np.float64).tobytes(), digest_size=16).digest())
    bounds = graph._cache.setdefault("predict_bounds", {})
    if key not in bounds:
        bounds[key] = host_lower_bound_detail(graph, op_time, host_times(graph, host), device, plan.mem_limit,
                                              eligible, plan.pool.alignment)
    hb = bounds[key]
    ideal = ideal_time(graph, op_time)
    t = float(sim.time_s)
    out = {"time_s": t, "ideal_time_s": float(ideal), "lower_bound_s": hb["host_lower_bound_s"],
           "tight_lower_bound_s": None if any(a.kind == "recompute" for a in plan.actions)
           else hb["host_lower_bound_s"],
           "throughput_vs_ideal": float(ideal / t) if t > 0 else 1.0, "mem_limit_bytes": int(plan.mem_limit),
           "pool_bytes": int(plan.pool.total_bytes()), "peak_bytes": int(peak_in_use(graph, plan, sim)),
           "stream_busy_s": {k: float(v) for k, v in sim.stream_busy_s.items()},
           "host": host.name, "host_ops": len(plan.host_ops)}
    out.update(plan.swap_stats(graph.tensor_bytes()))
    tb = graph.tensor_bytes()
    rc_ops = {a.op for a in plan.actions if a.kind == "recompute"}
    out.update(plan.recompute_stats({o: int(tb[list(graph.ops[o].outputs)].sum()) for o in rc_ops}, op_time))
    return out
