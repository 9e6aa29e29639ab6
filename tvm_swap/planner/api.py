"""plan_graph: the one entry point every caller uses (CLI, build, benchmarks).

It checks the request, picks per-op times, dispatches to a planner, and then ALWAYS verifies the plan
(tvm_swap.verify.check_plan) and fills `plan.predicted` from the simulator and the bounds, so no caller
ever sees an unverified or unpredicted plan.

Percentage limits ('25%') are of `bounds.noswap_peak(graph)`: the peak device bytes of the default schedule
with everything kept resident (params and inputs for the whole call, each produced tensor from its
producer to its last reader, outputs to the end, aligned sizes, plus the op's workspace).
"""
from __future__ import annotations

import time

import numpy as np

from ..devices import DeviceSpec, get_device
from ..errors import InfeasibleLimitError, TvmSwapError
from ..graph import DataflowGraph
from ..plan import Plan
from ..units import parse_limit
from .context import PlanningContext
from .encoding import AllocationSpace
from .feasibility import min_feasible_limit
from .ga import GASettings, GeneticSearch
from .graphindex import GraphIndex
from .swapplan import plan_swaps


# ---------------------------------------------------------------- the SwapAdvisor planners
def plan_swapadvisor(ctx: PlanningContext) -> Plan:
    """Genetic search over schedule and allocation (ga.py), then the swap plan of the best genome."""
    try:
        settings = GASettings.from_options(ctx.options)
    except (TypeError, ValueError) as e:
        raise TvmSwapError(f"bad swapadvisor option: {e}") from None
    t0 = time.perf_counter()
    ev = _keep_updated_or_not(ctx)
    budget = max(0.1 * ctx.budget_s, ctx.budget_s - (time.perf_counter() - t0))
    search = GeneticSearch(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment, ctx.seed, settings,
                           evaluator=ev)
    res = search.run(budget_s=budget, generations=ctx.generations, workers=ctx.workers,
                     progress=ctx.progress)
    sp = plan_swaps(search.gi, search.space, res.best.schedule, res.best.alloc)
    plan = sp.to_plan(ctx.graph, "swapadvisor", ctx.mem_limit, ctx.device)
    plan.search = {
        "search_s": round(res.search_s, 4), "generations": res.generations, "evaluations": res.evaluations,
        "seed": ctx.seed, "population": settings.population, "history": res.history,
        "seed_times_s": res.seed_times,
    }
    if res.interrupted:         # Ctrl-C: the best plan so far, still verified and predicted by plan_graph
        plan.search["interrupted"] = True
    return plan


def _keep_updated_or_not(ctx: PlanningContext):
    """The GA's evaluator, keeping updated params on the device (graphindex.ROLE_KEEP_*) or not, whichever
    gives the faster best seed genome: keeping them saves their copies when memory allows, but under
    pressure the kept ones can crowd out activations (e.g. BERT-large at 16 GB)."""
    from .ga import Evaluator
    from .graphindex import KEEP_UPDATED

    forced = ctx.options.get("keep_updated")           # planner option: skip the choice
    modes = (bool(forced),) if forced is not None else (True, False) if KEEP_UPDATED else (False,)
    evs = [Evaluator(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment, k) for k in modes]
    if len(evs) == 1 or not evs[0].gi.old_of.max(initial=-1) >= 0:
        return evs[-1] if len(evs) == 1 else evs[0]
    best = []
    for ev in evs:
        seeds = GeneticSearch(ctx.graph, ctx.op_time, ctx.device, ctx.mem_limit, ctx.alignment, ctx.seed,
                              evaluator=ev).seed_genomes()
        best.append(min(ev.time_of(g.schedule, g.alloc) for _, g in seeds))
    return evs[0] if best[0] <= best[1] else evs[1]


def plan_swapadvisor_nosearch(ctx: PlanningContext) -> Plan:
    """The swap planner on the default (graph) schedule and a single-class pool."""
    gi = GraphIndex.build(ctx.graph, ctx.alignment)
    space = AllocationSpace(gi, ctx.mem_limit)
    sp = plan_swaps(gi, space, gi.default_schedule(), space.single_class())
    return sp.to_plan(ctx.graph, "swapadvisor-nosearch", ctx.mem_limit, ctx.device)


def _baseline(name: str):
    def run(ctx: PlanningContext) -> Plan:
        from . import baselines  # lazily: the baselines are another module's business

        return getattr(baselines, f"plan_{name}")(ctx)

    run.__name__ = f"plan_{name}"
    return run


PLANNERS = {
    "swapadvisor": plan_swapadvisor,
    "swapadvisor-nosearch": plan_swapadvisor_nosearch,
    "odswap": _baseline("odswap"),
    "vdnn": _baseline("vdnn"),
    "noswap": _baseline("noswap"),
}


# ---------------------------------------------------------------- inputs
def resolve_limit(graph: DataflowGraph, mem_limit, alignment: int = 256) -> int:
    """Bytes from an int, '16GB' / '512MiB', or a percentage of the no-swap peak ('25%')."""
    ref = None
    if isinstance(mem_limit, str) and mem_limit.strip().endswith("%"):
        from .bounds import noswap_peak

        ref = noswap_peak(graph, alignment=alignment)
    try:
        limit = parse_limit(mem_limit, ref)
    except (TypeError, ValueError) as e:
        raise TvmSwapError(f"bad memory limit: {e}") from None
    if limit <= 0:
        raise TvmSwapError(f"memory limit must be positive, got {mem_limit!r}")
    return int(limit)


def _fallback_roofline(graph: DataflowGraph, device: DeviceSpec) -> np.ndarray:
    """max(flops / attainable FLOP/s, bytes touched / memory bandwidth) + launch overhead per op."""
    nb = graph.tensor_bytes()
    moved = np.array([float(nb[list(set(op.inputs) | set(op.outputs))].sum()) for op in graph.ops])
    flops = np.array([op.flops for op in graph.ops], dtype=np.float64)
    eff = device.compute_efficiency
    return np.maximum(flops / (device.peak_flops * eff), moved / (device.mem_bandwidth * eff)) + device.launch_overhead_s


def resolve_op_time(graph: DataflowGraph, device: DeviceSpec, op_time) -> np.ndarray:
    if op_time is None:
        try:
            from ..cost import roofline_times
        except ImportError:                 # cost model not available: same roofline, locally
            return _fallback_roofline(graph, device)
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
               progress: bool = False, alignment: int = 256, **options) -> Plan:
    """Plan one iteration of `graph` under `mem_limit`; returns a verified Plan with `predicted` filled.

    mem_limit: bytes, '16GB', '512MiB' or '25%' (of the no-swap peak, see the module docstring).
    op_time: seconds per op (array), or None for roofline times on `device`.
    planner: one of PLANNERS. budget_s: search wall-clock budget; generations: if given, exactly that many
    GA generations (reproducible: same seed + generations = same plan) and budget_s is ignored.
    workers: processes for the search (None: all cores; 1: in-process). options: planner knobs
    (swapadvisor: population, temperature, schedule_mutation, max_pick_rate, cls_flip, cnt_redraw, cnt_sigma).
    Raises InfeasibleLimitError (with the smallest feasible limit) when no plan can meet the limit.
    """
    from ..errors import VerificationError
    from ..verify import check_plan, verify_prediction

    t0 = time.perf_counter()
    if not isinstance(graph, DataflowGraph):
        raise TvmSwapError(f"plan_graph needs a DataflowGraph, got {type(graph).__name__}; "
                           f"load one with DataflowGraph.load(path) or tvm_swap.sources.load_graph")
    if planner not in PLANNERS:
        raise TvmSwapError(f"unknown planner {planner!r}; choose one of {', '.join(PLANNERS)}")
    if not isinstance(alignment, int) or alignment <= 0:
        raise TvmSwapError(f"alignment must be a positive number of bytes, got {alignment!r}")
    if generations is not None and (not isinstance(generations, (int, np.integer)) or generations < 0):
        raise TvmSwapError(f"generations must be a non-negative integer or None, got {generations!r}")
    if generations is None and not budget_s > 0:
        raise TvmSwapError(f"budget_s must be positive seconds, got {budget_s!r}")
    dev = get_device(device)
    limit = resolve_limit(graph, mem_limit, alignment)
    floor = min_feasible_limit(graph, alignment)
    times = resolve_op_time(graph, dev, op_time)
    if limit < floor:
        raise _refusal(planner, limit, floor, PlanningContext(graph, times, dev, floor, alignment, int(seed),
                                                              float(budget_s), 0, 1, False, dict(options)))
    ctx = PlanningContext(graph, times, dev, limit, alignment, int(seed), float(budget_s),
                          None if generations is None else int(generations), workers, bool(progress), dict(options))
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
    plan.search = search
    return plan


# planners that plan at any limit down to min_feasible_limit; the others have floors of their own
FEASIBLE_AT_THE_FLOOR = ("swapadvisor", "swapadvisor-nosearch")


def _refusal(planner: str, limit: int, floor: int, at_floor: PlanningContext) -> InfeasibleLimitError:
    """The refusal of a limit below the floor, naming the smallest limit THIS planner meets, so that raising
    the limit to it works: a baseline with a higher floor of its own (noswap's everything-resident need, the
    exact-size pools of odswap and vdnn) says so when asked to plan at the general floor."""
    why = "the largest op's inputs, outputs and workspace must fit at once"
    if planner not in FEASIBLE_AT_THE_FLOOR:
        try:
            PLANNERS[planner](at_floor)
        except InfeasibleLimitError as e:
            return InfeasibleLimitError(limit, max(floor, e.min_feasible), e.reason or why)
    return InfeasibleLimitError(limit, floor, why)


def predict(graph: DataflowGraph, plan: Plan, op_time: np.ndarray, device: DeviceSpec) -> dict:
    """Simulated time, bounds, memory and copy totals of a plan."""
    from .bounds import ideal_time, lower_bound
    from .simulator import simulate
    from .timeline import peak_in_use

    sim = simulate(graph, plan.actions, op_time, device)
    ideal = ideal_time(graph, op_time)
    t = float(sim.time_s)
    out = {
        "time_s": t,
        "ideal_time_s": float(ideal),
        "lower_bound_s": float(lower_bound(graph, op_time, device, plan.mem_limit, plan.pool.alignment)),
        "throughput_vs_ideal": float(ideal / t) if t > 0 else 1.0,
        "mem_limit_bytes": int(plan.mem_limit),
        "pool_bytes": int(plan.pool.total_bytes()),
        "peak_bytes": int(peak_in_use(graph, plan, sim)),
        "stream_busy_s": {k: float(v) for k, v in sim.stream_busy_s.items()},
    }
    out.update(plan.swap_stats(graph.tensor_bytes()))
    return out
