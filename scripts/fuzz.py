#!/usr/bin/env python
"""Fuzz the planners as users' graphs would vary: every plan verified, within its limit, no faster than the bound.

Each case (one seed) draws a graph (a random DAG or a random training step from tvm_swap.testing, 1-200 ops,
tensors from 256 B to 1 GB, views, multi-output ops, params read by many ops, updates, workspaces), op
times, a device, an alignment and a limit across the feasible range (min feasible to 1.2x the no-swap
peak), then runs every planner registered in tvm_swap.planner.PLANNERS and checks:

- verified: the plan comes back verified, and the independent verifier passes its JSON round trip;
- peak: the predicted peak <= the pool <= the limit;
- bound: the simulated time >= the lower bound (tvm_swap/planner/bounds.py);
- same seed: planning again with the same seed, on a fresh copy of the graph (nothing remembered with it),
  gives the same plan (timings aside; every `--determinism-every`-th case, default every 16th (DETERMINISM_EVERY),
  as it doubles a case's time: a 10^4-case run re-plans 625 cases). The planners' re-plans share one copy per
  case, as their first plans share the graph: whatever a re-plan finds remembered there was computed again on the
  copy by an earlier re-plan, which compared its own plan, so a nondeterministic computation is still caught (where
  first used);
- refusal: a planner that refuses a limit names a minimum above it, and plans at exactly that minimum;
  a limit below the min feasible is refused by every planner, naming a min it then plans at (exactly the
  min feasible for swapadvisor and swapadvisor-nosearch, at least it for the baselines; a search planner there
  with its seeds only, AT_MIN_GENERATIONS: the cases whose limit is the min search at it).
On a device without a host spec, or for a graph without an optimizer update, the host variants are the planners
they name (SAME_WITHOUT_HOST): planned once.

    python scripts/fuzz.py --n 10000                   # counts per planner, a reproducer line per failure
    python scripts/fuzz.py --case 1234 --planner odswap  # one case, verbosely

A share of the graphs (--splits, 0.3) has some ops run as K slices, as the lowering splits the ops that set the
floor (zoo/batch_split.py), and half the graphs mark ops runnable in place: planners meet split chains,
accumulated reductions and in-place kernels on slices. Importing this module draws no splits (SPLIT_PROB).
The command line's run is thin (THIN): the host-placement search variant and the plans at the mins named below the
floor each in a third of the cases, where a case spent most for what it adds; `--all-checks` runs every variant and
check in every case, as the tests' runs and `--case` do.
Exit code: 0 when nothing failed, 1 otherwise. `--json FILE` writes the counts, failures and git commit.

The summary also gives CPU seconds per planner (its plans, re-plans and checks) and per case: CPU time, so
the numbers hold on a shared machine; on idle cores the wall time is about total / workers. A case computes
its floors once and does not plan a planner twice at one limit (the determinism re-plan aside).
The GA (swapadvisor, its swap-only and size-class variants) runs 0-3 generations of 2-8 genomes per case
(the case's draw: the same for every GA planner of the case, at every limit it plans), and in three cases of
four tries its seeds with the default schedule only (GASettings.seed_schedules=1): a small search, as the
fuzz checks plans, not their quality. swapadvisor recomputes by default, so it runs two islands (swap-only
and hybrid, islands.py); the swap-only variant then finds its genome times remembered with the graph
(ga.genome_times) and simulates nothing again. benchmarks/fuzz.md has the measurements.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

if __name__ == "__main__":      # before the heavy imports: a SIGTERM or Ctrl-C during them is kept (cut_short.py)
    from cut_short import catch_early

    catch_early()

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cut_short import run_cut_short, worker_signals  # noqa: E402
from tvm_swap.cost.devices import DEVICES  # noqa: E402
from tvm_swap.errors import InfeasibleLimitError, TvmSwapError  # noqa: E402
from tvm_swap.graph import DataflowGraph, TensorInfo  # noqa: E402
from tvm_swap.plan import Plan  # noqa: E402
from tvm_swap.planner import PLANNERS, min_feasible_limit, plan_graph  # noqa: E402
from tvm_swap.planner.api import FEASIBLE_AT_THE_FLOOR, feasible_floor, resolve_pool  # noqa: E402
from tvm_swap.planner.bounds import noswap_peak  # noqa: E402
from tvm_swap.planner.host_split import optimizer_host_ops  # noqa: E402
from tvm_swap.testing import random_dag, random_op_times, random_training_graph  # noqa: E402
from tvm_swap.verify import verify_plan  # noqa: E402
from tvm_swap.zoo.batch_split import split_batch  # noqa: E402

# The simulator adds compute times one by one, the bound sums them with numpy's pairwise sum: the two
# roundings may differ by a few ulps, which is not a plan beating the bound.
BOUND_RTOL = 1e-9
SEARCH_PLANNERS = ("swapadvisor",)   # planners that take GA settings
# registered planners with options, fuzzed as planners of their own: name -> (planner, options); swapadvisor
# itself recomputes by default (arena pool), so its variant is swap-only
VARIANTS = {"swapadvisor-swap-only": ("swapadvisor", {"recompute": "off", "pool": "arena"}),
            "swapadvisor-nosearch+recompute": ("swapadvisor-nosearch", {"recompute": "on", "pool": "arena"}),
            # the paper's memory model (issue 10 keeps it as a mode): every pool mode is fuzzed
            "swapadvisor-size-classes": ("swapadvisor", {"recompute": "off", "pool": "size-classes"}),
            # every optimizer update on the host (Plan.host_ops), the rest planned on the device; on a device
            # without a host spec (v100) the option is left out
            "swapadvisor-nosearch+host": ("swapadvisor-nosearch", {"host_ops": "optimizer"}),
            # the search over host placements (planner/swapadvisor/host_genes.py) from the policy's candidates
            # (host_generations: the case's, Case.host_generations)
            "swapadvisor+host-search": ("swapadvisor", {"host_ops": "auto", "host_generations": 1})}
ALL_PLANNERS = [*PLANNERS, *VARIANTS]
# on a device without a host spec (v100) _plan leaves the host option out, so these variants make exactly the
# plan_graph call of the planner named (the same plan, checked the same way: 14 of 14 v100 cases of seeds
# 7000-7039 compared equal); on a graph without an optimizer update no op may run on the host and plan_with_host
# makes the planner's own plan (its search summary says so: host_policy): a case plans them once, and the
# variant's outcome is that planner's (tests/planner/test_fuzz.py compares the plans)
SAME_WITHOUT_HOST = {"swapadvisor+host-search": "swapadvisor", "swapadvisor-nosearch+host": "swapadvisor-nosearch"}


def base_planner(pl: str) -> str:
    return VARIANTS[pl][0] if pl in VARIANTS else pl


def same_as(case: "Case", pl: str, planners) -> str | None:
    """The planner whose plans `pl`'s are in this case (SAME_WITHOUT_HOST), when the case runs it; else None."""
    twin = SAME_WITHOUT_HOST.get(pl)
    return twin if twin in planners and nothing_for_the_host(case) else None


def nothing_for_the_host(case: "Case") -> bool:
    """No op of the case can run on the host: its device names no host spec (_plan leaves the host option out),
    or its graph has no optimizer update (no op is host-eligible: host_policy.plan_with_host makes the plan of
    the planner named, "optimizer" and "auto" alike). A quarter of the graphs have no update."""
    if "nothing for the host" not in case.memo:
        case.memo["nothing for the host"] = not DEVICES[case.device].host or not optimizer_host_ops(case.graph)
    return case.memo["nothing for the host"]


@dataclass
class Case:
    seed: int
    graph: DataflowGraph
    op_time: np.ndarray
    device: str
    alignment: int
    limit: int
    min_feasible: int
    ga: dict
    # the placement search's generations (swapadvisor+host-search's host_generations): 0 (the policy's candidates
    # screened, then the search from the fastest) or 1 (children bred from them too), half the cases each
    host_generations: int = 1
    # what a case computes once and its checks share: floors per pool, verified plans per (planner, limit)
    memo: dict = field(default_factory=dict, repr=False)

    def describe(self) -> str:
        g, split = self.graph, self.graph.meta.get("batch_split")
        cut = f" ({split['ops']} ops as {split['k']} slices)" if split else ""
        return (f"seed {self.seed}: {g.meta.get('generator')} {g.num_ops} ops{cut} {g.num_tensors} tensors, "
                f"{self.device}, alignment {self.alignment}, limit {self.limit} (min {self.min_feasible})")


# ---------------------------------------------------------------- drawing a case
def _sizes(rng) -> list[int]:
    """1-6 distinct sizes, log-uniform from 256 B to 1 GB, some not multiples of the alignment."""
    k = int(rng.integers(1, 7))
    lo, hi = np.log(256), np.log(1 << 30)
    return sorted({int(np.exp(rng.uniform(lo, hi))) for _ in range(k)})


def _with_views(g: DataflowGraph, rng) -> DataflowGraph:
    """Name views (reshapes aliasing a tensor) on some tensors: they must change nothing but the names."""
    tensors = [TensorInfo(t.id, t.name, t.nbytes, t.shape, t.dtype, t.kind,
                          tuple(f"{t.name}_view{j}" for j in range(int(rng.integers(1, 3)))))
               if rng.random() < 0.2 else t for t in g.tensors]
    out = DataflowGraph(g.name, tensors, g.ops, list(g.outputs), dict(g.updates), dict(g.meta))
    out.validate()
    return out


def _with_inplace(g: DataflowGraph, rng) -> DataflowGraph:
    """Half the graphs: mark (output, input) pairs of equal bytes and dtype as runnable in place (the input an
    intermediate), each with a drawn probability, so planners meet elementwise kernels run in place."""
    if rng.random() < 0.5:
        return g
    p = float(rng.choice([0.3, 1.0]))
    prod, results = g.producer(), set(g.outputs) | set(g.updates)
    pairs = [[op.id, y, x] for op in g.ops for y in op.outputs for x in dict.fromkeys(op.inputs)
             if prod[x] >= 0 and x not in results and g.tensors[x].nbytes == g.tensors[y].nbytes
             and g.tensors[x].dtype == g.tensors[y].dtype and rng.random() < p]
    if not pairs:
        return g
    out = DataflowGraph(g.name, list(g.tensors), g.ops, list(g.outputs), dict(g.updates), {**g.meta, "inplace": pairs})
    out.validate()
    return out


# The share of graphs with ops run as K slices. 0 for importers (tests, bench/small_graphs.py and
# scripts/plan_hashes.py draw what their seeds always drew, comparable with older trees); the command line's
# --splits (default 0.3) sets it, for the run and for `--case` alike.
SPLIT_PROB = 0.0
CLI_SPLIT_PROB = 0.3
MAX_SPLIT_OPS = 200    # a split graph has at most this many ops (or its own count + K - 1): a case's cost stays


def _with_splits(g: DataflowGraph, rng) -> DataflowGraph:
    """Some graphs: run a random set of ops as K slices, as the lowering splits the ops that set the floor
    (tvm_swap/zoo/batch_split.py, reused): each drawn op, and with it some producers of its inputs (so slices
    feed slices: split chains), runs as K ops; an output is cut in K near-equal slices, one the graph returns
    or updates (a reduction: a weight gradient, an update) accumulates through the slices; an op outside the set
    reads a split tensor as its K slices.
    What the graph returns or updates is never cut, so results and updates keep their ids."""
    if rng.random() >= SPLIT_PROB or not g.num_ops:
        return g
    k = int(rng.choice([2, 3, 4, 8]))
    p = float(rng.choice([0.1, 0.3, 0.7]))
    prod, kept = g.producer(), set(g.outputs) | set(g.updates)
    ops = {o for o in range(g.num_ops) if rng.random() < p} or {int(rng.integers(g.num_ops))}
    ops |= {int(prod[t]) for o in sorted(ops) for t in g.ops[o].inputs if prod[t] >= 0 and rng.random() < 0.5}
    room = max(1, (MAX_SPLIT_OPS - g.num_ops) // (k - 1))   # the split graph stays as small as a drawn one
    if len(ops) > room:
        ops = {int(o) for o in rng.choice(sorted(ops), room, replace=False)}
    batch = {t for t in range(g.num_tensors) if prod[t] >= 0 and t not in kept}
    return split_batch(g, ops, batch, k, uneven=True)


def draw_graph(seed: int) -> DataflowGraph:
    rng = np.random.default_rng([seed, 1])
    sizes = _sizes(rng)
    if rng.random() < 0.5:
        n_ops = int(np.clip(np.exp(rng.uniform(0, np.log(200))), 1, 200))
        n_params = int(rng.integers(0, 9))
        n_inputs = int(rng.integers(0 if n_params else 1, 4))
        g = random_dag(rng, n_ops=n_ops, n_params=n_params, n_inputs=n_inputs, sizes=sizes,
                       max_inputs=int(rng.integers(1, 5)), max_outputs=int(rng.integers(1, 4)),
                       locality=int(rng.integers(1, 11)), update_prob=float(rng.choice([0.0, 0.3, 1.0])),
                       workspace_prob=float(rng.choice([0.0, 0.0, 0.2])), name=f"fuzz_dag_{seed}")
    else:
        g = random_training_graph(rng, n_layers=int(rng.integers(1, 50)), width_bytes=sizes,
                                  with_updates=bool(rng.random() < 0.8), skip_prob=float(rng.uniform(0, 0.5)),
                                  momentum=bool(rng.random() < 0.4), stash_prob=float(rng.uniform(0, 0.5)),
                                  name=f"fuzz_train_{seed}")
    # splits and in-place pairs each from a stream of their own, so a graph neither draws is what it was
    g = _with_splits(_with_views(g, rng), np.random.default_rng([seed, 5]))
    return _with_inplace(g, np.random.default_rng([seed, 4]))


def draw_case(seed: int) -> Case:
    g = draw_graph(seed)
    rng = np.random.default_rng([seed, 2])
    device = str(rng.choice(sorted(DEVICES)))
    alignment = int(rng.choice([256, 256, 256, 64, 4096]))
    op_time = random_op_times(g, rng, flops_per_s=float(10 ** rng.uniform(9, 14)), jitter=float(rng.uniform(0, 0.9)))
    lo = min_feasible_limit(g, alignment)
    hi = max(lo, int(1.2 * noswap_peak(g, alignment=alignment)))
    r = rng.random()
    limit = lo if r < 0.1 else hi if r < 0.15 else int(rng.integers(lo, hi + 1))
    ga = {"generations": int(rng.integers(0, 4)), "population": int(rng.integers(2, 9))}
    # a quick search in most cases (the default schedule only for the seeds: a third of the seed evaluations,
    # which are most of a small search's), the full seeds in a quarter; a stream of its own, so the graph,
    # limit and other settings of a seed are what they were before this draw existed
    ga["seed_schedules"] = 3 if np.random.default_rng([seed, 4]).random() < 0.25 else 1
    host_generations = int(np.random.default_rng([seed, 6]).integers(0, 2))   # (a stream of its own, as above)
    return Case(seed, g, op_time, device, alignment, limit, lo, ga, host_generations)


# ---------------------------------------------------------------- checking
def floors(case: Case, pl: str) -> tuple[int, int]:
    """(the planner's pool floor, the limit below which it must refuse). Size classes: both the min feasible
    limit. An arena: its min feasible limit is found by planning and placement is not monotone, so below it
    a plan may still be found (and must then verify); only below the largest op's own bytes is a refusal
    certain. Computed once per case and pool."""
    pool = resolve_pool(base_planner(pl), VARIANTS.get(pl, (None, {}))[1].get("pool"))
    if pool != "arena":
        return case.min_feasible, case.min_feasible
    if ("floors", pool) not in case.memo:
        from tvm_swap.planner.graphindex import GraphIndex
        from tvm_swap.planner.swapadvisor.arena import working_set_floor

        gi = GraphIndex.build(case.graph, case.alignment, keep_updated=False)
        case.memo["floors", pool] = (feasible_floor(case.graph, "arena", case.alignment)[0],
                                     working_set_floor(gi) + gi.workspace)
    return case.memo["floors", pool]


def _plan(case: Case, planner: str, limit: int, graph: DataflowGraph | None = None,
          generations: int | None = None) -> Plan:
    """`planner` (a name of ALL_PLANNERS) at `limit` with the case's settings; `generations`: instead of the
    case's (a search planner's)."""
    planner, extra = VARIANTS.get(planner, (planner, {}))
    kw = dict(case.ga) if planner in SEARCH_PLANNERS else {}
    kw.update(extra)
    if "host_generations" in kw:
        kw["host_generations"] = case.host_generations
    if "host_ops" in kw and not DEVICES[case.device].host:
        del kw["host_ops"]
    gens = kw.pop("generations", 0)
    gens = gens if generations is None else generations
    return plan_graph(graph or case.graph, limit, device=case.device, op_time=case.op_time, planner=planner,
                      seed=case.seed, generations=gens, workers=1, alignment=case.alignment, **kw)


def fresh_copy(g: DataflowGraph) -> DataflowGraph:
    """The same graph as a new object, with nothing remembered (DataflowGraph._cache empty)."""
    return DataflowGraph(g.name, list(g.tensors), list(g.ops), list(g.outputs), dict(g.updates), dict(g.meta))


def _comparable(plan: Plan) -> dict:
    d = plan.to_dict()
    d["search"] = {k: v for k, v in d["search"].items() if k not in ("search_s", "history")}
    return d


def check_plan_claims(case: Case, plan: Plan, limit: int) -> list[tuple[str, str]]:
    """(check, message) for each claim of `plan` that does not hold."""
    bad = []
    if not plan.verified:
        bad.append(("verified", "plan_graph returned a plan not marked verified"))
    v = verify_plan(case.graph, Plan.from_json(plan.to_json()), limit)
    if v:
        bad.append(("verified", f"{len(v)} violations, first: {v[0]}"))
    p = plan.predicted
    if not p.get("peak_bytes", 0) <= p.get("pool_bytes", -1) <= limit:
        bad.append(("peak", f"peak {p.get('peak_bytes')} pool {p.get('pool_bytes')} limit {limit}"))
    if not p["time_s"] >= p["lower_bound_s"] * (1 - BOUND_RTOL):
        bad.append(("bound", f"simulated {p['time_s']!r} s < lower bound {p['lower_bound_s']!r} s"))
    return bad


# In-process runs: a signal's flag (cut_short.Run.cut), looked at between planners, since the GA catches the
# signal's KeyboardInterrupt and returns its last generation (fuzz() sets it; forked workers never see one).
_CUT = [lambda: False]


def _stop_if_cut() -> None:
    if _CUT[0]():
        raise KeyboardInterrupt


def run_case(seed: int, planners=None, determinism: bool = True, thin: bool = False) -> dict:
    """Outcomes per planner ('planned' / 'refused') and failures [(planner, check, message)] of one case.
    thin: the command line's run (THIN): the costliest parts of a case in a share of the cases only."""
    t0, c0 = time.perf_counter(), time.process_time()
    planners = list(planners or ALL_PLANNERS)
    if thin and seed % THIN_EVERY:
        planners = [pl for pl in planners if pl not in THIN_PLANNERS]
    plan_min = not thin or seed // THIN_EVERY % THIN_EVERY == 0
    out = {"seed": seed, "outcomes": {}, "failures": [], "planner_s": dict.fromkeys(planners, 0.0),
           "check_s": dict.fromkeys(CHECKS, 0.0)}
    spent = out["planner_s"]
    fail = lambda pl, check, msg: out["failures"].append((pl, check, msg))  # noqa: E731
    try:
        case = draw_case(seed)
    except Exception as e:          # a generator bug is a failure too, not a crash of the run
        fail("-", "draw", f"{type(e).__name__}: {e}")
        return out
    out["ops"] = case.graph.num_ops
    out["split"] = "batch_split" in case.graph.meta
    out["inplace"] = bool(case.graph.meta.get("inplace"))
    for pl in planners:
        _stop_if_cut()
        if same_as(case, pl, planners):
            continue
        c1 = time.process_time()
        try:
            out["outcomes"][pl] = _check_planner(case, pl, fail, determinism, out["check_s"])
        except Exception as e:
            fail(pl, "crash", f"{type(e).__name__}: {e} | {traceback.format_exc(limit=-2).splitlines()[-3].strip()}")
            out["outcomes"][pl] = "crash"
        spent[pl] += time.process_time() - c1
    for pl in planners:
        if same_as(case, pl, planners):
            out["outcomes"][pl] = out["outcomes"][same_as(case, pl, planners)]
    # below its floor a planner refuses, naming a min at or above the floor at which it then plans (exactly the
    # floor for the planners that reach it); an arena planner may plan there instead (see floors)
    frac = np.random.default_rng([seed, 3]).uniform(0.3, 1.0)
    for pl in planners:
        _stop_if_cut()
        if same_as(case, pl, planners):
            continue
        c1 = time.process_time()
        try:
            _check_below_floor(case, pl, frac, fail, plan_min)
        except Exception as e:      # a crash below the floor or at the min it names fails the case, not the run
            fail(pl, "crash", f"below its floor: {type(e).__name__}: {e} | "
                              f"{traceback.format_exc(limit=-2).splitlines()[-3].strip()}")
        spent[pl] += time.process_time() - c1
        out["check_s"]["below floor"] += time.process_time() - c1
    out["wall_s"] = time.perf_counter() - t0
    out["cpu_s"] = time.process_time() - c0
    return out


# the generations of a search planner's plan at the min its refusal below the floor names: seeds only. Half the
# CPU of a case went to the checks below the floor, most of it to the GA planners' searches at their floor; the
# searches at the floor stay covered by the cases whose own limit is the min feasible (one in ten draws it:
# draw_case), which plan with the case's generations (and by the arena planners that plan below the floor)
AT_MIN_GENERATIONS = 0


def _check_below_floor(case: Case, pl: str, frac: float, fail, plan_min: bool = True) -> None:
    """Below its floor `pl` is refused naming a min at or above the floor (exactly the floor where it reaches it)
    and plans there (`plan_min`; a thin run's case, see THIN), or plans, and that plan must hold."""
    floor, hard = floors(case, pl)
    below = int(floor * frac)
    if not 0 < below < floor:
        return
    try:
        plan = _plan(case, pl, below)
        if below < hard:
            fail(pl, "refusal", f"planned at {below} bytes, below what its largest op needs ({hard})")
        for check, msg in check_plan_claims(case, plan, below):
            fail(pl, check, msg + f" (planned below its floor {floor})")
        return
    except InfeasibleLimitError as e:
        named = e.min_feasible
    except Exception as e:
        fail(pl, "refusal", f"{type(e).__name__} instead of InfeasibleLimitError: {e}")
        return
    if named < floor or (base_planner(pl) in FEASIBLE_AT_THE_FLOOR and named != floor):
        fail(pl, "refusal", f"refused {below} naming min {named}; the min feasible is {floor}")
        return
    if not plan_min or (pl, named) in case.memo:   # (or planned and checked there already: the case's limit or min)
        return
    try:
        # a search planner with its seeds only (AT_MIN_GENERATIONS): whether the named min is plannable does not
        # hang on the generations (every plan is of a seed or bred from seeds at that limit)
        plan = _plan(case, pl, named, generations=AT_MIN_GENERATIONS)
    except TvmSwapError as e:
        fail(pl, "refusal", f"refused {below} naming min {named}, but refused that too: {e}")
        return
    for check, msg in check_plan_claims(case, plan, named):
        fail(pl, check, msg + f" (at the min {named} named for {below})")


# what a case's CPU goes to (run_case's check_s): its limit's plans and their checks, the determinism re-plans,
# the checks below the floor
CHECKS = ("limit", "same seed", "below floor")


def _check_planner(case: Case, pl: str, fail, determinism: bool, check_s: dict | None = None) -> str:
    check_s = {} if check_s is None else check_s
    c0, again0 = time.process_time(), check_s.get("same seed", 0.0)
    try:
        return _check_at_limit(case, pl, fail, determinism, check_s)
    finally:
        again = check_s.get("same seed", 0.0) - again0
        check_s["limit"] = check_s.get("limit", 0.0) + time.process_time() - c0 - again


def _check_at_limit(case: Case, pl: str, fail, determinism: bool, check_s: dict) -> str:
    limit, outcome = case.limit, "planned"
    try:
        plan = _plan(case, pl, limit)
    except InfeasibleLimitError as e:
        floor, _ = floors(case, pl)
        if base_planner(pl) in FEASIBLE_AT_THE_FLOOR and limit >= floor:
            fail(pl, "refusal", f"refused {limit} >= min feasible {floor}: {e}")
            return "refused"
        if not e.min_feasible > limit:
            fail(pl, "refusal", f"refused {limit} naming a min {e.min_feasible} that is not above it")
            return "refused"
        limit, outcome = e.min_feasible, "refused"
        try:
            plan = _plan(case, pl, limit)          # the named min must itself be feasible
        except TvmSwapError as e2:
            fail(pl, "refusal", f"refused {case.limit} naming min {limit}, but refused that too: {e2}")
            return outcome
    for check, msg in check_plan_claims(case, plan, limit):
        fail(pl, check, msg + (f" (at the min {limit} it named)" if outcome == "refused" else ""))
    case.memo[pl, limit] = True
    if determinism:
        # on a fresh copy of the graph: what the planner keeps with a graph (floors, fits, offload needs,
        # bounds) is computed again, so a nondeterministic computation cannot hide behind a remembered answer
        c0 = time.process_time()
        if "fresh" not in case.memo:
            case.memo["fresh"] = fresh_copy(case.graph)
        again = _plan(case, pl, limit, case.memo["fresh"])
        if _comparable(again) != _comparable(plan):
            fail(pl, "same seed", "planning twice with the same seed gave different plans")
        check_s["same seed"] = check_s.get("same seed", 0.0) + time.process_time() - c0
    return outcome


# ---------------------------------------------------------------- the run
# the command line's default: the determinism re-plan in every 16th case. Every other case (an old default) spent
# a quarter of the run's CPU on re-plans (benchmarks/fuzz.md, fuzzfast), every 8th ~7%: a 10^4-case run still
# re-plans 625 cases, every planner in each (no re-plan has differed since the check exists)
DETERMINISM_EVERY = 16
# The command line's run is thin (--all-checks: every variant and check in every case, as the tests' fuzz() runs
# and run_case by default): what costs most for what it adds runs in a share of the cases (benchmarks/fuzz.md,
# issue 28: a 10^4-case run on 2 cores within an hour; every 2nd instead of 3rd took 64 minutes).
# - THIN_PLANNERS in every THIN_EVERY-th case (seed % THIN_EVERY == 0): the placement search screens each
#   candidate placement with a seeds-only search of its device part, 3.5x a swapadvisor plan, 39% of a case's CPU;
#   the host-eligible cases among them (a device with a host, a graph with updates: ~55%) are ~1800 of 10^4 (its
#   device plans are swapadvisor's, fuzzed in every case; swapadvisor-nosearch+host, the placement's split and
#   lift, in every case with a host and an update);
# - below the floor, every planner's refusal is checked in every case, the plan at the min it names in a
#   THIN_EVERY-th of the cases (seed // THIN_EVERY % THIN_EVERY == 0: for THIN_PLANNERS, in that share of theirs);
#   a quarter of the CPU went there, and the planners that refuse the case's own limit plan at the min they name
#   in every case (_check_at_limit), as every planner does in the tenth of the cases drawn at the min.
THIN = True
THIN_EVERY = 3
THIN_PLANNERS = ("swapadvisor+host-search",)


def _git_commit() -> str:
    from tvm_swap.provenance import git_commit

    return git_commit()


def fuzz(seeds, planners=None, workers: int = 1, determinism_every: int = 1, progress: bool = False,
         results: list | None = None, cut=lambda: False, thin: bool = False):
    """Run the cases; returns (results, wall seconds). Workers are forked processes, one case per task.
    `results`: a list the finished cases are appended to as they come (what a run cut short still has).
    `cut()` True: a signal came (cut_short.Run.cut); stop, dropping the case it came during (in-process, the GA
    caught it and returned its last generation: the case's checks would compare a search cut short).
    thin: the command line's thin run (THIN); the tests' runs check everything in every case."""
    seeds = list(seeds)
    det = (lambda s: determinism_every > 0 and s % determinism_every == 0)  # noqa: E731
    t0 = time.perf_counter()
    results = [] if results is None else results
    _CUT[0] = cut
    if workers <= 1:
        it = (run_case(s, planners, det(s), thin) for s in seeds)
        pool = None
    else:
        _warm_up()
        ctx = multiprocessing.get_context("fork")
        pool = ctx.Pool(workers, initializer=worker_signals)
        # one case per task: cases range from milliseconds to half a minute, so a worker takes the next case
        # when it is done and the run ends with at most one case's tail (a task costs ~0.1 ms of pickling)
        it = pool.imap_unordered(_run_case_star, [(s, planners, det(s), thin) for s in seeds], chunksize=1)
    try:
        for k, r in enumerate(it, 1):
            if cut():
                raise KeyboardInterrupt
            results.append(r)
            if progress:           # failures as they come, so a run cut short still shows them
                for pl, check, msg in r["failures"]:
                    print(f"  failure: seed {r['seed']} {pl} {check}: {msg}", file=sys.stderr, flush=True)
            if progress and k % 100 == 0:
                nf = sum(len(x["failures"]) for x in results)
                cpu = sum(x.get("cpu_s", 0.0) for x in results) / max(1, len(results))
                print(f"  {k}/{len(seeds)} cases, {nf} failures, {time.perf_counter() - t0:.0f} s elapsed, "
                      f"{cpu:.3f} cpu s/case", file=sys.stderr, flush=True)
    finally:
        _CUT[0] = lambda: False
        if pool is not None:
            pool.terminate()
            pool.join()
    results.sort(key=lambda r: r["seed"])
    return results, time.perf_counter() - t0


_WARM = []


def _warm_up() -> None:
    """Compile (or load from numba's cache) the planner's compiled loops once, by planning one small case, so
    forked workers share them instead of each loading them, and the first case's CPU time is its own."""
    if not _WARM:
        run_case(0, ["swapadvisor", "swapadvisor-nosearch", "swapadvisor-size-classes"], determinism=False)
        _WARM.append(True)


def _settle_gc() -> None:
    """For a run of many cases (main, before the workers fork): move everything loaded so far (numpy, numba,
    the planner: ~10^5 objects) out of the garbage collector's sight, so its full collections stop rescanning
    them (~2% of a case's CPU over 20 cases, measured with gc.callbacks; a higher young-generation threshold
    measured no gain, A/B over 25 cases)."""
    import gc

    gc.collect()
    gc.freeze()


def _run_case_star(args):
    return run_case(*args)


def summarize(results, planners) -> tuple[str, list[str]]:
    """The table of counts and CPU seconds per planner (checks included: re-plans, refusals, the verifier)
    and one reproducer line per failure."""
    planned, refused, failed = Counter(), Counter(), Counter()
    secs = Counter()
    checks = Counter()
    lines = []
    splits = "" if SPLIT_PROB == CLI_SPLIT_PROB else f" --splits {SPLIT_PROB:g}"
    for r in results:
        for pl, o in r["outcomes"].items():
            (planned if o == "planned" else refused)[pl] += 1
        for pl, s in r.get("planner_s", {}).items():
            secs[pl] += s
        for pl, check, msg in r["failures"]:
            failed[pl] += 1
            checks[check] += 1
            only = f" --planner {pl}" if pl != "-" else ""
            lines.append(f"FAIL {check:<9} {pl:<21} python scripts/fuzz.py --case {r['seed']}{only}{splits}  # {msg}")
    total = sum(secs.values()) or 1.0
    rows = [f"{'planner':<31}{'cases':>7}{'planned':>9}{'refused':>9}{'failures':>10}{'cpu s':>9}{'share':>7}"]
    for pl in planners:
        n = planned[pl] + refused[pl]
        rows.append(f"{pl:<31}{n:>7}{planned[pl]:>9}{refused[pl]:>9}{failed[pl]:>10}{secs[pl]:>9.1f}"
                    f"{100 * secs[pl] / total:>6.0f}%")
    cpu = sorted(r["cpu_s"] for r in results if "cpu_s" in r)
    if cpu:
        rows.append(f"cpu s per case: median {cpu[len(cpu) // 2]:.3f}, mean {sum(cpu) / len(cpu):.3f}, "
                    f"max {cpu[-1]:.2f}, total {sum(cpu):.1f}")
        by = {c: sum(r.get("check_s", {}).get(c, 0.0) for r in results) for c in CHECKS}
        rows.append("cpu s by check: " + ", ".join(f"{c} {v:.1f}" for c, v in by.items()))
    split = [r for r in results if r.get("split")]
    rows.append(f"graphs with split ops: {len(split)} of {len(results)} "
                f"({sum(bool(r.get('inplace')) for r in split)} of them with in-place ops too), "
                f"{sum(len(r['failures']) for r in split)} failures in them")
    unsplit = [r for r in results if not r.get("split")]
    mean = lambda rs: sum(r.get("cpu_s", 0.0) for r in rs) / max(1, len(rs))  # noqa: E731
    rows.append(f"cpu s per case: split {mean(split):.3f}, not split {mean(unsplit):.3f}")
    rows.append("failures by check: " + (", ".join(f"{k} {v}" for k, v in sorted(checks.items())) or "none"))
    return "\n".join(rows), lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=200, help="number of cases (seeds start..start+n-1)")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--case", type=int, default=None, help="run only this seed, verbosely")
    ap.add_argument("--planner", action="append", choices=ALL_PLANNERS, help="only these planners (repeatable)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    ap.add_argument("--all-checks", action="store_true",
                    help="every variant and check in every case (default: the thin run, see THIN in the source)")
    ap.add_argument("--determinism-every", type=int, default=DETERMINISM_EVERY, metavar="K",
                    help="re-plan with the same seed in every K-th case (1: all; 0: never)")
    ap.add_argument("--splits", type=float, default=CLI_SPLIT_PROB, metavar="P",
                    help="share of graphs with some ops run as K slices (scripts/fuzz.py _with_splits; 0: none)")
    ap.add_argument("--json", metavar="FILE", help="write counts, failures, wall time and the git commit here")
    args = ap.parse_args(argv)
    planners = args.planner or list(ALL_PLANNERS)
    global SPLIT_PROB
    SPLIT_PROB = args.splits          # before any draw (forked workers inherit it)
    if args.case is not None:
        print(draw_case(args.case).describe())
        r = run_case(args.case, planners, True)
        for pl, o in r["outcomes"].items():
            print(f"  {pl:<22} {o}")
        for pl, check, msg in r["failures"]:
            print(f"  FAIL {pl} {check}: {msg}")
        return 1 if r["failures"] else 0
    seeds = range(args.start, args.start + args.n)
    commit = _git_commit()         # now: the tree may move on while a long run goes (its modules are loaded)
    print(f"fuzzing {args.n} cases (seeds {args.start}..{args.start + args.n - 1}), planners "
          f"{', '.join(planners)}, {args.workers} workers"
          + ("" if args.all_checks or not THIN else f" (thin: {', '.join(THIN_PLANNERS)} and the plans at the mins "
             f"named below the floor in a share of the cases; --all-checks for all)"), flush=True)
    # Ctrl-C or a timeout's SIGTERM: the cases finished so far are summarized (and written) all the same,
    # marked as cut, and the exit code is 130 (cut_short.py)
    done: list = []
    t0 = time.perf_counter()

    def work(run):
        _warm_up()
        _settle_gc()
        fuzz(seeds, planners, args.workers, args.determinism_every, progress=True, results=done,
             cut=lambda: run.cut, thin=THIN and not args.all_checks)

    def summarize_run(cut):
        results = sorted(done, key=lambda r: r["seed"])
        if cut:
            print(f"interrupted after {len(results)} of {args.n} cases", file=sys.stderr)
        return _report(args, planners, commit, results, time.perf_counter() - t0, cut)
    return run_cut_short(work, summarize_run)


def _report(args, planners, commit, results, wall, cut) -> int:
    """Print the summary and write the JSON (also for a run cut before its first case: it says so); the exit
    code (130 for a run cut short)."""
    table, lines = summarize(results, planners)
    for ln in lines:
        print(ln)
    print(table)
    slowest = max(results, key=lambda r: r.get("wall_s", 0), default={"seed": None})
    print(f"{len(results)} cases in {wall:.1f} s wall ({args.workers} workers); slowest case seed "
          f"{slowest['seed']} ({slowest.get('ops')} ops) {slowest.get('wall_s', 0):.2f} s; "
          f"{len(lines)} failures" + (f"; CUT SHORT: {len(results)} of {args.n} cases" if cut else ""))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "commit": commit, "n": args.n, "cases_done": len(results), "cut_short": cut,
            "start": args.start, "workers": args.workers,
            "planners": planners, "wall_s": wall, "table": table, "failures": lines,
            "determinism_every": args.determinism_every, "splits": args.splits, "thin": THIN and not args.all_checks,
            "planner_cpu_s": {pl: round(sum(r.get("planner_s", {}).get(pl, 0.0) for r in results), 3)
                              for pl in planners},
            "case_cpu_s": {str(r["seed"]): round(r.get("cpu_s", 0.0), 4) for r in results},
            "load_avg": list(os.getloadavg())}, indent=1))
    return 130 if cut else 1 if lines or not results else 0


if __name__ == "__main__":
    sys.exit(main())
