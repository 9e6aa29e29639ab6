#!/usr/bin/env python
"""The SwapAdvisor paper's evaluation, in simulation: its workloads on a V100 at 16 GB, every planner here.

Pieces (`--only`, comma list; default all):
- training (or a model name, e.g. `nasnet-25`): each training workload (model, batch) planned with every
  planner at the limit (swapadvisor, swapadvisor-nosearch, odswap, vdnn, noswap, and the tools a user
  would pick instead: tflms, save-on-cpu, save-on-cpu-async, checkpoint-sqrt, ...), each plan's throughput as
  a fraction of the ideal (same schedule, unlimited memory), the lower bound, and the paper's published
  fractions beside them;
- tflms: WResNet-152-4 at 16 GB, swapadvisor against tflms (paper: at least 3x);
- inference: the paper's Table 2, ResNet-152 inference at batch 1/16/64 under 64-640 MiB, seconds per
  iteration, N/A where infeasible, and the smallest limit at which batch 1 runs within 1.1x of unlimited;
- sweep: limits from the no-swap need down to the smallest feasible one for a CNN and an RNN;
- picture: one plan drawn (the README's).
A run merges its pieces into an existing benchmarks/paper.json (rows it measured replace the old ones;
each row records the commit and budget it was measured with) and rewrites paper.md from the merge.

    python -m bench paper                      # the full run, about 2 hours on 2 cores
    python -m bench paper --only nasnet-25 --budget-s 120     # one model's rows
    python -m bench paper --only tflms,inference
    python -m bench paper --points nasnet-25@batch=16,inception-4@batch=32
    python -m bench paper --quick              # one batch per model, 10 s searches: about 2 minutes
    python -m bench paper --models rnn-8-8k,inception-4@batch=32 --budget-s 30 --no-sweep
    python -m bench paper --models random:40 --mem-limit 60MB --budget-s 2   # no zoo needed
    python -m bench paper --render-only        # rewrite paper.md from paper.json
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
import traceback
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

from tvm_swap.errors import InfeasibleLimitError  # noqa: E402
from tvm_swap.planner.registry import PlannerName  # noqa: E402
from tvm_swap.zoo import ZooError  # noqa: E402
from tvm_swap.units import format_bytes, format_seconds, parse_bytes  # noqa: E402

PLANNERS = [str(n) for n in PlannerName]
# The planners with a memory-model choice (--pool); the baselines model the paper's size-class pool only.
# A cell of theirs is keyed by the planner's name for the arena (the default) and NAME@size-classes otherwise.
SEARCH = ("swapadvisor", "swapadvisor-nosearch")
POOLS = ("arena", "size-classes")
MEM_LIMIT = 16 * 10**9
DEVICE = "v100-16gb"

# (model, batches) in the paper's order; BERT-large is not in the paper: batches chosen so it needs
# about 1.7x to 5.8x the 16 GB (it is the workload reimplementations call slowest to search).
WORKLOADS = [
    ("rnn-8-8k", (128, 256)),
    ("brnn-4-8k", (64, 128)),
    ("wresnet-152-10", (16, 32, 64)),
    ("inception-4", (16, 32, 64)),
    ("bert-large", (8, 16, 32)),
    ("nasnet-25", (16, 32, 64)),
]
QUICK_WORKLOADS = [("rnn-8-8k", (128,)), ("brnn-4-8k", (128,)), ("wresnet-152-10", (32,)), ("inception-4", (64,)),
                   ("bert-large", (16,)), ("nasnet-25", (32,))]
SWEEP = [("wresnet-152-10", 32), ("rnn-8-8k", 128)]          # one CNN, one RNN
PICTURE = ("wresnet-152-10", 32)                             # the plan drawn for the README

# Throughput as a fraction of an infinite-memory GPU, from the paper's figure (notes/swapadvisor.md):
# (model, batch) -> (SwapAdvisor, ODSwap).
PAPER = {
    ("rnn-8-8k", 128): (0.84, 0.04), ("rnn-8-8k", 256): (0.76, 0.07),
    ("brnn-4-8k", 64): (0.76, 0.08), ("brnn-4-8k", 128): (0.81, 0.11),
    ("wresnet-152-10", 16): (0.92, 0.75), ("wresnet-152-10", 32): (0.95, 0.82),
    ("wresnet-152-10", 64): (0.97, 0.83),
    ("inception-4", 16): (0.98, 0.82), ("inception-4", 32): (0.99, 0.72), ("inception-4", 64): (0.70, 0.44),
    ("nasnet-25", 16): (0.84, 0.34), ("nasnet-25", 32): (0.60, 0.30), ("nasnet-25", 64): (0.53, 0.25),
}

# The TFLMS comparison (paper: SwapAdvisor at least 3x TFLMS on WResNet-152-4; batch not stated).
TFLMS_WORKLOAD = ("wresnet-152-4", (16, 32, 64))
# Table 2: ResNet-152 inference latency under small limits ("MB" read as MiB). The paper's text gives two
# cells relative to unlimited memory (notes/swapadvisor.md): (batch, limit MiB) -> time / unlimited.
INFERENCE_WORKLOAD = ("resnet-152-inference", (1, 16, 64))
INFERENCE_LIMITS_MIB = (64, 128, 192, 512, 640)
PAPER_INFERENCE = {(1, 64): 1.40, (1, 192): 1.06}
WITHIN = 1.1       # "runs within 1.1x of unlimited"
PIECES = ("training", "tflms", "inference", "sweep", "picture")


# ---------------------------------------------------------------- workloads
def load_workload(name: str, batch: int):
    """A zoo graph, or `random:LAYERS` (tvm_swap.testing, sizes scaled by batch) to try the script without the zoo."""
    if name.startswith("random:"):
        from tvm_swap.testing import random_training_graph

        layers = int(name.split(":", 1)[1])
        sizes = [s * batch for s in (1_000_000, 1 << 20, 3 << 20, 4_000_000, 8 << 20)]
        return random_training_graph(seed=layers, n_layers=layers, width_bytes=sizes, momentum=True,
                                     name=f"random-{layers}")
    from tvm_swap.zoo import load_zoo

    return load_zoo(f"zoo:{name}@batch={batch}")


def parse_models(text: str | None, quick: bool) -> list[tuple[str, tuple[int, ...]]]:
    if not text:
        return QUICK_WORKLOADS if quick else WORKLOADS
    known = dict(WORKLOADS)
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "@batch=" in item:
            name, b = item.split("@batch=", 1)
            out.append((name, tuple(int(x) for x in b.split("/"))))
        elif item in known:
            out.append((item, known[item][:1] if quick else known[item]))
        elif item.startswith("random:"):
            out.append((item, (1,)))
        else:
            raise SystemExit(f"unknown model {item!r}: give one of {', '.join(known)}, NAME@batch=B[/B2], "
                             f"or random:LAYERS")
    return out


# ---------------------------------------------------------------- planning
def planner_options(args) -> dict:
    """Options every plan_graph call gets (the place for a memory-model switch such as pool=...)."""
    return dict(getattr(args, "planner_options", None) or {})


def cell_key(planner: str, pool: str) -> str:
    """Where a planner's result is stored in a row: see SEARCH."""
    return f"{planner}@{pool}" if planner in SEARCH and pool != "arena" else planner


def pool_of(planner: str, args, pool: str | None = None) -> str:
    return (pool or getattr(args, "pool", "arena")) if planner in SEARCH else "size-classes"


def pools_for(planner: str, args) -> list[str]:
    """The pools a planner is measured in this run: every --pool for the search planners, size classes else."""
    return list(getattr(args, "pools", None) or [getattr(args, "pool", "arena")]) if planner in SEARCH else [
        "size-classes"]


def search_of(r: dict, default: str = "-") -> str:
    """How much search a cell got: its fixed generations, else its budget (else `default`)."""
    g = r.get("search_generations")
    if g is not None:
        return f"{g} gen"
    return f"{r['budget_s']:g} s" if r.get("budget_s") is not None else default


def label_pools(result: dict) -> dict:
    """Give every stored cell its pool. Cells written before --pool existed carry none: every search-planner
    cell among them was measured with size classes (the arena became the default after them, and the bench
    never passed a pool), so they move to NAME@size-classes."""
    def fix(cells: dict) -> None:
        for p in list(cells):
            r = cells[p]
            if "pool" in r or not isinstance(r, dict):
                continue
            r["pool"] = "size-classes"
            if p in SEARCH:
                cells[cell_key(p, "size-classes")] = cells.pop(p)

    for row in result.get("rows", []) + result.get("tflms_comparison", []):
        fix(row["planners"])
    for row in (result.get("inference") or {}).get("rows", []):
        for cells in row["cells"].values():
            fix(cells)
    for sw in result.get("sweeps", []):
        for pt in sw["points"]:
            fix(pt["planners"])
    return result


def baseline_budget(args, planner: str, budget: float) -> float:
    return budget if planner == "swapadvisor" else min(budget, 10.0)


def run_planner(graph, planner: str, mem_limit: int, args, budget_s: float,
                pool: str | None = None) -> tuple[dict, object]:
    """One plan, as a JSON row; failures become rows too, so one bad run does not lose the benchmark.
    pool: for the search planners (default: the run's first --pool); args.generations, when set, fixes the
    search to that many GA generations (budget_s is then ignored: load-independent and reproducible)."""
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import plan_graph

    pool = pool_of(planner, args, pool or pools_for(planner, args)[0])
    gens = getattr(args, "generations", None)
    t0 = time.perf_counter()
    try:
        plan = plan_graph(graph, mem_limit=mem_limit, device=get_device(args.device), planner=planner,
                          budget_s=budget_s, seed=args.seed, workers=args.workers, progress=False,
                          **({"generations": gens} if gens is not None else {}),
                          **planner_options(args), **({"pool": pool} if planner in SEARCH else {}))
    except InfeasibleLimitError as e:
        return {"status": "oom" if planner == "noswap" else "infeasible", "needs_bytes": e.min_feasible,
                "wall_s": time.perf_counter() - t0, "pool": pool}, None
    except Exception as e:  # a planner bug must show in the table, not end a 30-minute run
        traceback.print_exc()
        return {"status": "error", "error": f"{type(e).__name__}: {e}", "wall_s": time.perf_counter() - t0,
                "pool": pool}, None
    p, s = plan.predicted, plan.search or {}
    row = {"status": "ok", "wall_s": time.perf_counter() - t0, "verified": bool(plan.verified), "pool": pool}
    for k in ("time_s", "ideal_time_s", "lower_bound_s", "tight_lower_bound_s", "throughput_vs_ideal",
              "pool_bytes", "peak_bytes",
              "swap_in_bytes", "swap_out_bytes", "swap_in_count", "swap_out_count", "recompute_count"):
        row[k] = p.get(k)
    for k in ("search_s", "generations"):
        row[k] = s.get(k)
    for k in ("threshold", "ahead"):  # tflms: what its grid picked
        if k in s:
            row[k] = s[k]
    if s.get("history"):
        row["history"] = s["history"]
    return row, plan


def _noswap_needs(r: dict, planner: str, need: int) -> None:
    """noswap's refusal may quote the generic floor (largest op); what it really needs is everything resident."""
    if planner == "noswap" and r.get("status") == "oom":
        r["needs_bytes"] = max(int(r["needs_bytes"]), int(need))


def noswap_need(graph) -> int:
    from tvm_swap.plan import DEFAULT_ALIGNMENT
    from tvm_swap.planner.baselines.noswap import noswap_need as need

    return int(need(graph, DEFAULT_ALIGNMENT))


def smallest_feasible(graph, args) -> int:
    """The smallest limit swapadvisor accepts in the run's first pool (the arena by default): ask it at a limit
    of 1 byte and read its refusal (the floor check runs before any search). Baselines with size classes may
    need more (their cells say N/A below it)."""
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import plan_graph

    try:
        plan_graph(graph, mem_limit=1, device=get_device(args.device), planner="swapadvisor", budget_s=1,
                   seed=args.seed, workers=1, progress=False, pool=args.pool)
    except InfeasibleLimitError as e:
        return int(e.min_feasible)
    return 1


def row_bounds(graph, args, mem_limit: int) -> dict:
    """The row's bounds, from the graph alone (not from whichever plan came first: a plan that recomputes
    reports no tight bound): seconds, and the bytes every plan without recomputation copies each way."""
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import resolve_op_time
    from tvm_swap.planner.tight_bound import tight_lower_bound_detail

    dev = get_device(args.device)
    d = tight_lower_bound_detail(graph, resolve_op_time(graph, dev, None), dev, mem_limit)
    return {"ideal_time_s": float(d["compute_s"]), "lower_bound_s": float(d["lower_bound_s"]),
            "tight_lower_bound_s": float(d["tight_lower_bound_s"]),
            "bound_out_bytes": float(d["tight_out_bytes"]), "bound_in_bytes": float(d["tight_in_bytes"])}


def bench_workload(name: str, batch: int, args, mem_limit: int) -> tuple[dict, dict]:
    t0 = time.perf_counter()
    graph = load_workload(name, batch)
    row = {"model": name, "batch": batch, "ops": graph.num_ops, "tensors": graph.num_tensors,
           "load_s": time.perf_counter() - t0, "mem_limit_bytes": mem_limit, "need_bytes": noswap_need(graph),
           "planners": {}}
    row.update(row_bounds(graph, args, mem_limit))
    plans = {}
    for planner in args.planners:
        for pool in pools_for(planner, args):
            r, plan = run_planner(graph, planner, mem_limit, args, baseline_budget(args, planner, args.budget_s),
                                  pool=pool)
            _noswap_needs(r, planner, row["need_bytes"])
            r["commit"] = args.commit
            r["budget_s"] = args.budget_s
            if planner == "swapadvisor" and args.generations is not None:
                r["search_generations"] = args.generations
            key = cell_key(planner, pool)
            row["planners"][key] = r
            if plan is not None:
                plans[key] = plan
            print(f"  {name}@{batch} {key:<34} {cell(r):<24} ({format_seconds(r['wall_s'])})", flush=True)
    paper = PAPER.get((name, batch))
    row["paper"] = {"swapadvisor": paper[0], "odswap": paper[1]} if paper else None
    row.update(provenance(args))
    return row, {"graph": graph, "plans": plans}


def provenance(args) -> dict:
    """What a row was measured with: rows of different runs live side by side in paper.json."""
    out = {"commit": args.commit, "budget_s": args.budget_s, "measured": time.strftime("%Y-%m-%d %H:%M"),
           "options": {**planner_options(args), "pool": args.pool, "pools": list(args.pools)}}
    if args.generations is not None:
        out["generations"] = args.generations
    return out


# ---------------------------------------------------------------- inference (Table 2)
def bench_inference(args) -> dict:
    """Seconds per inference under each Table 2 limit, every planner; then the smallest limit at which
    swapadvisor keeps batch 1 within WITHIN x of unlimited memory (bisection on the limit)."""
    name, batches = INFERENCE_WORKLOAD
    limits = [mib << 20 for mib in INFERENCE_LIMITS_MIB]
    out = {"model": name, "limits_bytes": limits, "rows": [], "paper_relative": 
           {f"{b}@{m}MiB": v for (b, m), v in PAPER_INFERENCE.items()}, **provenance(args)}
    for batch in batches:
        graph = load_workload(name, batch)
        row = {"batch": batch, "ops": graph.num_ops, "need_bytes": noswap_need(graph),
               "min_feasible_bytes": smallest_feasible(graph, args), "ideal_time_s": ideal_seconds(graph, args),
               "cells": {}}
        for limit in limits:
            cells = {}
            for planner in args.planners:
                for pool in pools_for(planner, args):
                    r, _ = run_planner(graph, planner, limit, args, baseline_budget(args, planner, args.budget_s),
                                       pool=pool)
                    _noswap_needs(r, planner, row["need_bytes"])
                    r.pop("history", None)
                    cells[cell_key(planner, pool)] = r
                    print(f"  {name}@{batch} {format_bytes(limit):>10} {cell_key(planner, pool):<34} "
                          f"{seconds_cell(r)}", flush=True)
            row["cells"][str(limit)] = cells
        out["rows"].append(row)
    if 1 in batches and "swapadvisor" in args.planners:
        out["within"] = smallest_limit_within(load_workload(name, 1), args, WITHIN)
        print(f"  {name}@1 within {WITHIN}x of unlimited from {format_bytes(out['within']['limit_bytes'])}",
              flush=True)
    return out


def ideal_seconds(graph, args) -> float:
    """Unlimited-memory time: the sum of the roofline op times (what every plan's ideal_time_s is)."""
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import resolve_op_time
    from tvm_swap.planner.bounds import ideal_time

    return float(ideal_time(graph, resolve_op_time(graph, get_device(args.device), None)))


def smallest_limit_within(graph, args, factor: float, steps: int = 8) -> dict:
    """Bisection between the smallest feasible limit and the no-swap need for the smallest limit whose
    swapadvisor plan takes at most `factor` x the ideal time (assumes time falls as the limit grows)."""
    lo, hi = smallest_feasible(graph, args), noswap_need(graph)
    tried = []

    def ok(limit):
        r, _ = run_planner(graph, "swapadvisor", limit, args, args.budget_s)
        good = r.get("status") == "ok" and r["time_s"] <= factor * r["ideal_time_s"]
        tried.append({"limit_bytes": limit, "time_s": r.get("time_s"), "ideal_time_s": r.get("ideal_time_s"),
                      "ok": good})
        return good

    if ok(lo):
        return {"limit_bytes": lo, "factor": factor, "tried": tried}
    for _ in range(steps):
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return {"limit_bytes": hi, "factor": factor, "tried": tried}


def seconds_cell(r: dict | None) -> str:
    if r is None:
        return "-"
    if r.get("status") == "ok":
        return f"{r['time_s']:.4f}"
    if r.get("status") in ("oom", "infeasible"):
        return "N/A"
    return "error"


def add_tight_bounds(result: dict, args) -> None:
    """Fill rows' tight_lower_bound_s for the graphs they were planned on. A row whose graph changed since
    (its ideal time no longer matches) is marked stale and gets no bound: its recorded times are of another graph."""
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import resolve_op_time
    from tvm_swap.planner.tight_bound import tight_lower_bound

    dev = get_device(result["meta"]["device"])
    for row in result["rows"]:
        graph = load_workload(row["model"], row["batch"])
        t = resolve_op_time(graph, dev, None)
        if not math.isclose(float(t.sum()), row.get("ideal_time_s") or -1.0, rel_tol=1e-9):
            row["tight_lower_bound_s"] = None
            row["tight_bound_note"] = "graph or op times changed since this row was measured"
            print(f"  {row['model']}@{row['batch']}: stale row (ideal now {t.sum():.4f} s), no tight bound")
            continue
        row["tight_lower_bound_s"] = tight_lower_bound(graph, t, dev, row["mem_limit_bytes"])
        print(f"  {row['model']}@{row['batch']}: tight bound {row['tight_lower_bound_s']:.4f} s", flush=True)


def sweep_limits(need: int, floor: int, points: int) -> list[int]:
    """From the no-swap need down to the smallest feasible limit, evenly on a log scale."""
    if floor >= need:
        return [need]
    ratio = floor / need
    return [int(need * ratio ** (i / (points - 1))) for i in range(points)]


def bench_sweep(name: str, batch: int, args) -> dict:
    graph = load_workload(name, batch)
    need = noswap_need(graph)
    floor = smallest_feasible(graph, args)
    out = {"model": name, "batch": batch, "need_bytes": need, "min_feasible_bytes": floor, "points": []}
    for limit in sweep_limits(need, floor, args.sweep_points):
        pt = {"mem_limit_bytes": limit, "fraction_of_need": limit / need, "planners": {}}
        for planner in args.planners:
            budget = args.sweep_budget_s if planner == "swapadvisor" else min(args.sweep_budget_s, 10.0)
            for pool in pools_for(planner, args):
                r, _ = run_planner(graph, planner, limit, args, budget, pool=pool)
                _noswap_needs(r, planner, need)
                r.pop("history", None)
                pt["planners"][cell_key(planner, pool)] = r
                print(f"  sweep {name}@{batch} {format_bytes(limit):>11} ({100 * limit / need:5.1f}%) "
                      f"{cell_key(planner, pool):<34} {cell(r)}", flush=True)
        out["points"].append(pt)
    return out


# ---------------------------------------------------------------- tables
def cell(r: dict | None) -> str:
    """A planner's result as a table cell: the throughput fraction, or why there is none."""
    if r is None:
        return "-"
    st = r.get("status")
    if st == "ok":
        v = r.get("throughput_vs_ideal")
        return f"{v:.3f}" if v is not None else "?"
    if st == "oom":
        return f"OOM (needs {format_bytes(r['needs_bytes'])})"
    if st == "infeasible":
        return f"infeasible (needs {format_bytes(r['needs_bytes'])})"
    return "error"


def tight_ratio(sa: dict, ratio: float | None) -> str:
    """time / tight bound; the bound assumes no recomputation, so a plan that recomputes is marked (it may
    beat the bound)."""
    if ratio is None:
        return "-"
    return f"{ratio:.2f}x" + (" (recomputes)" if sa.get("recompute_count") else "")


def _fmt(v, f) -> str:
    return "-" if v is None else f(v)


def planners_in(result: dict) -> list[str]:
    """Planner columns: every planner any row has, in PLANNERS order."""
    seen = set(result["meta"].get("planners", []))
    for row in result.get("rows", []) + result.get("tflms_comparison", []):
        seen |= set(row["planners"])
    for row in (result.get("inference") or {}).get("rows", []):
        for cells in row["cells"].values():
            seen |= set(cells)
    keys = [k for p in PLANNERS for k in ([p] + [cell_key(p, x) for x in POOLS if x != "arena"] if p in SEARCH else [p])]
    return [k for k in keys if k in seen]


def best_swapadvisor(cells: dict) -> dict:
    """swapadvisor's faster plan over the pools measured (the cells show each)."""
    ok = [cells[k] for k in (cell_key("swapadvisor", x) for x in POOLS)
          if k in cells and cells[k].get("status") == "ok"]
    return max(ok, key=lambda r: r["throughput_vs_ideal"]) if ok else (cells.get("swapadvisor") or {})


def markdown(result: dict) -> str:
    meta = result["meta"]
    planners = planners_in(result)
    head = (["model", "batch", "ops", "memory need", "need/limit", "ideal", "LB", "tight LB"] + planners +
            ["paper SwapAdvisor", "paper ODSwap", "swapadvisor time/LB", "time / tight bound", "measured at"])
    lines = [
        "# The SwapAdvisor evaluation, in simulation",
        "",
        f"Device `{meta['device']}`, memory limit {format_bytes(meta['mem_limit_bytes'])} "
        f"({meta['mem_limit_bytes']:,} bytes); swapadvisor search budget {meta['budget_s']:g} s per run on "
        f"{meta['cpus']} CPU cores; seed {meta['seed']}. Generated by `bench/paper.py"
        f"{' --quick' if meta['quick'] else ''}` at commit `{meta['commit']}` in {format_seconds(meta['wall_s'])}; "
        f"rows measured later by a partial run (`--only`, `--points`) name their own commit and search (a budget, "
        f"or `N gen`: a fixed number of GA generations, --generations) in the last column. `-`: not measured in that row's run.",
        "",
        "Planner columns: throughput as a fraction of the ideal (the same model with unlimited memory: "
        "the sum of its op times). *LB* is the lower bound on the iteration time under the limit "
        "(compute, or the bytes that must cross the link each way); *ideal* and *LB* are times per "
        "iteration. *tight LB* (`tvm_swap.planner.tight_bound`) adds the activations that must leave the device "
        "because they are live across an op in every schedule and do not fit, and the time windows their copies "
        "must fit in; it does not count recomputation (so it bounds no plan that recomputes: checkpoint-sqrt's "
        "throughput may exceed it) and assumes nothing about the memory "
        "model beyond tensors occupying their bytes; *time / tight bound* is swapadvisor's time over it "
        "(an upper bound on how far from optimal that plan is). "
        "tflms, save-on-cpu, save-on-cpu-async and checkpoint-sqrt are fixed policies that keep weights and "
        "optimizer state on the GPU: the *needs* of their refusals is the exact-size pool the policy fills (each "
        "size class at its own peak), more than the bytes live at once. "
        "The paper columns are the fractions published in SwapAdvisor (ASPLOS 2020) for real "
        "runs on a V100; ours are simulated with roofline op times, so compare trends, not digits.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    for row in result["rows"]:
        sa = best_swapadvisor(row["planners"])
        lb = row.get("lower_bound_s")
        ratio = (sa["time_s"] / lb) if sa and sa.get("status") == "ok" and lb else None
        tlb = row.get("tight_lower_bound_s")
        tratio = (sa["time_s"] / tlb) if sa and sa.get("status") == "ok" and tlb else None
        paper = row.get("paper") or {}
        cells = [row["model"], str(row["batch"]), str(row["ops"]), format_bytes(row["need_bytes"]),
                 f"{row['need_bytes'] / row['mem_limit_bytes']:.1f}",
                 _fmt(row.get("ideal_time_s"), format_seconds), _fmt(lb, format_seconds), _fmt(tlb, format_seconds)]
        cells += [cell(row["planners"].get(p)) for p in planners]
        cells += [_fmt(paper.get("swapadvisor"), lambda v: f"{v:.2f}"), _fmt(paper.get("odswap"), lambda v: f"{v:.2f}"),
                  _fmt(ratio, lambda v: f"{v:.2f}x"), tight_ratio(sa, tratio), measured_at(row, meta)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += pools_section(result, meta)
    lines += tflms_section(result.get("tflms_comparison") or [], planners, meta)
    lines += inference_section(result.get("inference"), planners)
    errors = [(r["model"], r["batch"], p, x["error"]) for r in result["rows"] + result.get("tflms_comparison", [])
              for p, x in r["planners"].items() if x.get("status") == "error"]
    if errors:
        lines += ["", "Errors:", ""] + [f"- {m}@{b} {p}: `{e}`" for m, b, p, e in errors]
    for sw in result.get("sweeps", []):
        plot = f" ![throughput vs limit]({Path(sw['plot']).name})" if sw.get("plot") else ""
        lines += ["", f"## Memory-limit sweep: {sw['model']} batch {sw['batch']}", "",
                  f"No-swap need {format_bytes(sw['need_bytes'])}, smallest feasible limit "
                  f"{format_bytes(sw['min_feasible_bytes'])}."
                  + (f" Measured at `{sw['commit']}`" + (f", {sw['generations']} GA generations per search"
                                                         if sw.get("generations") is not None else "") + "."
                     if sw.get("commit") else "") + plot, "",
                  "| limit | % of need | " + " | ".join(planners) + " |",
                  "|---|---|" + "|".join("---" for _ in planners) + "|"]
        for pt in sw["points"]:
            lines.append(f"| {format_bytes(pt['mem_limit_bytes'])} | {100 * pt['fraction_of_need']:.0f}% | " +
                         " | ".join(cell(pt["planners"].get(p)) for p in planners) + " |")
    if result.get("pictures"):
        lines += ["", "## Pictures", ""] + [f"- [{Path(p).name}]({Path(p).name})" for p in result["pictures"]]
    return "\n".join(lines) + "\n"


README_BEGIN = "<!-- paper-table: made by bench/paper.py --readme from benchmarks/paper.json -->"
RESULTS = ROOT / "docs" / "RESULTS.md"          # where --readme writes the table (the README links to it)
README_END = "<!-- /paper-table -->"
README_PLANNERS = ["swapadvisor", "swapadvisor@size-classes", "swapadvisor-nosearch",
                   "swapadvisor-nosearch@size-classes", "odswap", "vdnn"]


def readme_table(result: dict) -> str:
    """The results table of docs/RESULTS.md: the training rows, swapadvisor in both pools, the paper's
    baselines; where and how they were measured said once below it (per group of rows if runs differ)."""
    meta = result.get("meta", {})
    head = (["model", "batch", "memory need", "need / 16 GB"] + [p.replace("@", " ") for p in README_PLANNERS] +
            ["paper SwapAdvisor", "paper ODSwap", "swapadvisor time / tight bound"])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    stamps: dict[str, list[str]] = {}
    for row in result["rows"]:
        paper = row.get("paper") or {}
        sa, tlb = best_swapadvisor(row["planners"]), row.get("tight_lower_bound_s")
        tratio = sa["time_s"] / tlb if sa.get("status") == "ok" and tlb else None
        cells = [row["model"], str(row["batch"]), format_bytes(row["need_bytes"]),
                 f"{row['need_bytes'] / row['mem_limit_bytes']:.1f}x"]
        cells += [cell(row["planners"].get(p)).split(" (")[0] for p in README_PLANNERS]
        cells += [_fmt(paper.get("swapadvisor"), lambda v: f"{v:.2f}"), _fmt(paper.get("odswap"), lambda v: f"{v:.2f}"),
                  tight_ratio(sa, tratio)]
        lines.append("| " + " | ".join(cells) + " |")
        stamps.setdefault(measured_at(row, meta), []).append(f"{row['model']}@{row['batch']}")
    lines.append("")
    if len(stamps) == 1:
        lines.append(f"Measured at {next(iter(stamps))}.")
    else:
        lines += [f"Measured at {s}: {', '.join(rows)}." for s, rows in stamps.items()]
    return "\n".join(lines)


def write_readme(result: dict, path: Path) -> None:
    """Replace the table between README_BEGIN and README_END (both must be there) with readme_table."""
    text = path.read_text()
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise SystemExit(f"{path} has no results-table markers: put {README_BEGIN!r} and {README_END!r} "
                         f"around the table")
    path.write_text(text[:start + len(README_BEGIN)] + "\n" + readme_table(result) + "\n" + text[end:])
    print(f"rewrote the results table in {path}")


def row_search(row: dict, meta: dict) -> str:
    """The search the row's run gave swapadvisor: `N gen` (--generations) or `B s` (its budget)."""
    g = row.get("generations", meta.get("generations")) if "commit" in row else meta.get("generations")
    return f"{g} gen" if g is not None else f"{row.get('budget_s', meta.get('budget_s', 0)):g} s"


def measured_at(row: dict, meta: dict) -> str:
    """swapadvisor's commit and search (generations or budget), and the commit (and search) of any planner
    measured by another run."""
    base = row.get("commit", meta.get("commit"))
    search = row_search(row, meta)
    later: dict[tuple, list[str]] = {}
    for p, r in row["planners"].items():
        key = (r.get("commit", base), search_of(r, search) if p.split("@")[0] == "swapadvisor" else search)
        if key != (base, search):
            later.setdefault(key, []).append(p)
    # (names sorted: rows measured alike read alike, so the results table says it once)
    return f"`{base}`, {search}" + "".join(f"; {', '.join(sorted(ps))} at `{c}`" + (f", {b}" if b != search else "")
                                           for (c, b), ps in later.items())


def _gib_pair(r: dict | None) -> str:
    if not r or r.get("status") != "ok" or r.get("swap_out_bytes") is None:
        return "-"
    return f"{r['swap_out_bytes'] / 2**30:.1f} / {r['swap_in_bytes'] / 2**30:.1f}"


def pools_section(result: dict, meta: dict) -> list[str]:
    """Arena (the default) against size classes (the paper's pool) per training row, with the bytes each
    plan copies each way next to the bound, and a mark where the arena loses to size classes or the paper."""
    rows = [r for r in result["rows"] if any(k.endswith("@size-classes") for k in r["planners"])]
    if not rows:
        return []
    lines = ["", "## Arena vs size classes", "",
             "swapadvisor and swapadvisor-nosearch in both pool modes, same run, seed and search per row (the "
             "`measured at` column above). *out / in*: GiB swapadvisor copies device-to-host / host-to-device per "
             "iteration; *bound*: GiB every plan without recomputation must copy each way (the tight bound's "
             "bytes; a plan that recomputes may copy less). *arena - SC*: swapadvisor arena minus size classes; "
             "*short of*: where the arena is below size classes or the paper's figure.", "",
             "| model | batch | swapadvisor arena | swapadvisor size-classes | arena - SC | paper | "
             "nosearch arena | nosearch size-classes | arena out / in | size-classes out / in | bound out / in | "
             "arena recomputes | short of |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        c = row["planners"]
        a, sc = c.get("swapadvisor") or {}, c.get("swapadvisor@size-classes") or {}
        ok = a.get("status") == "ok" and sc.get("status") == "ok"
        d = a["throughput_vs_ideal"] - sc["throughput_vs_ideal"] if ok else None
        paper = (row.get("paper") or {}).get("swapadvisor")
        short = []
        if d is not None and d < 0:
            short.append("size classes")
        if paper is not None and a.get("status") == "ok" and a["throughput_vs_ideal"] < paper:
            short.append("paper")
        bound = (f"{row['bound_out_bytes'] / 2**30:.1f} / {row['bound_in_bytes'] / 2**30:.1f}"
                 if row.get("bound_out_bytes") is not None else "-")
        lines.append(f"| {row['model']} | {row['batch']} | {cell(a or None)} | {cell(sc or None)} | "
                     f"{_fmt(d, lambda v: f'{v:+.3f}')} | {_fmt(paper, lambda v: f'{v:.2f}')} | "
                     f"{cell(c.get('swapadvisor-nosearch'))} | {cell(c.get('swapadvisor-nosearch@size-classes'))} | "
                     f"{_gib_pair(a)} | {_gib_pair(sc)} | {bound} | {a.get('recompute_count', '-')} | "
                     f"{', '.join(short) or '-'} |")
    return lines


def tflms_section(rows: list[dict], planners: list[str], meta: dict) -> list[str]:
    if not rows:
        return []
    lines = ["", "## WResNet-152-4: swapadvisor against tflms", "",
             "The paper reports SwapAdvisor at least 3x faster than TFLMS (activations only, hand-tuned) on "
             "WResNet-152-4. Throughput as a fraction of the ideal at the same limit; *x tflms*: swapadvisor's "
             "throughput over tflms's (its threshold and lead tuned over a grid and by TFLMS 2's auto-tuner search, see "
             "tvm_swap/planner/baselines/tflms.py).", "",
             "| batch | memory need | need/limit | " + " | ".join(planners) + " | swapadvisor x tflms | tflms threshold "
             "| measured at |",
             "|---|---|---|" + "|".join("---" for _ in planners) + "|---|---|---|"]
    for row in rows:
        sa, tf = best_swapadvisor(row["planners"]), row["planners"].get("tflms") or {}
        ratio = (sa["throughput_vs_ideal"] / tf["throughput_vs_ideal"]
                 if sa.get("status") == "ok" and tf.get("status") == "ok" else None)
        why = "tflms cannot fit" if sa.get("status") == "ok" and tf.get("status") in ("infeasible", "oom") else "-"
        lines.append(f"| {row['batch']} | {format_bytes(row['need_bytes'])} | "
                     f"{row['need_bytes'] / row['mem_limit_bytes']:.1f} | " +
                     " | ".join(cell(row["planners"].get(p)) for p in planners) +
                     f" | {_fmt(ratio, lambda v: f'{v:.2f}x') if ratio else why} | {tf.get('threshold', '-')} "
                     f"(ahead {tf.get('ahead', 1)}) "
                     f"| {measured_at(row, meta)} |")
    return lines


def _search_words(meta: dict) -> str:
    """How a piece searched: a fixed number of generations, or a budget."""
    if meta.get("generations") is not None:
        return f"{meta['generations']} GA generations"
    return f"a {meta.get('budget_s', 0):g} s budget"


def inference_section(inf: dict | None, planners: list[str]) -> list[str]:
    if not inf:
        return []
    limits = inf["limits_bytes"]
    lines = ["", f"## Inference: {inf['model']} (the paper's Table 2)", "",
             f"Seconds per inference (simulated) under each limit; N/A: the planner cannot meet it. *unlimited*: "
             f"the ideal. The paper's text gives batch 1 at 64 MB as 1.40x unlimited and at 192 MB as 1.06x; "
             f"those are shown beside ours as *x unlimited*. *lower bound*: no plan can be faster (the weights that "
             f"do not fit must cross the link every inference); our unlimited time is a roofline V100's, faster "
             f"than the paper's MXNet run, so the same bytes weigh more. Measured at commit `{inf.get('commit')}` with "
             f"{_search_words(inf)} per swapadvisor cell.", ""]
    for row in inf["rows"]:
        b = row["batch"]
        lines += [f"### batch {b}", "",
                  f"Need with everything resident {format_bytes(row['need_bytes'])}, smallest feasible limit "
                  f"{format_bytes(row['min_feasible_bytes'])}, unlimited {format_seconds(row['ideal_time_s'])} "
                  f"({row['ideal_time_s']:.4f} s).", "",
                  "| limit | " + " | ".join(planners) + " | swapadvisor x unlimited | paper x unlimited "
                  "| lower bound x unlimited |",
                  "|---|" + "|".join("---" for _ in planners) + "|---|---|---|"]
        for limit in limits:
            cells = row["cells"].get(str(limit), {})
            sa = cells.get("swapadvisor") or {}
            rel = sa["time_s"] / row["ideal_time_s"] if sa.get("status") == "ok" and row.get("ideal_time_s") else None
            paper = inf.get("paper_relative", {}).get(f"{b}@{limit >> 20}MiB")
            lbs = [c["lower_bound_s"] for c in cells.values() if c.get("status") == "ok" and c.get("lower_bound_s")]
            lb = max(lbs) / row["ideal_time_s"] if lbs and row.get("ideal_time_s") else None
            lines.append(f"| {limit >> 20} MiB | " + " | ".join(seconds_cell(cells.get(p)) for p in planners) +
                         f" | {_fmt(rel, lambda v: f'{v:.2f}x')} | {_fmt(paper, lambda v: f'{v:.2f}x')} "
                         f"| {_fmt(lb, lambda v: f'{v:.2f}x')} |")
        lines.append("")
    w = inf.get("within")
    if w:
        lines += [f"Smallest limit at which batch 1 runs within {w['factor']}x of unlimited (swapadvisor, bisection "
                  f"over {len(w['tried'])} plans): **{format_bytes(w['limit_bytes'])}** ({w['limit_bytes']:,} bytes)."]
    return lines


def print_table(result: dict) -> None:
    planners = planners_in(result)
    print()
    print(f"{'workload':<22}{'need':>12}{'ideal':>10}{'LB':>10}" + "".join(f"{p[:14]:>16}" for p in planners) +
          f"{'paper SA':>10}{'paper OD':>10}")
    for row in result["rows"]:
        paper = row.get("paper") or {}
        print(f"{row['model'] + '@' + str(row['batch']):<22}{format_bytes(row['need_bytes']):>12}"
              f"{_fmt(row.get('ideal_time_s'), format_seconds):>10}"
              f"{_fmt(row.get('lower_bound_s'), format_seconds):>10}" +
              "".join(f"{cell(row['planners'].get(p))[:15]:>16}" for p in planners) +
              f"{_fmt(paper.get('swapadvisor'), str):>10}{_fmt(paper.get('odswap'), str):>10}")


# ---------------------------------------------------------------- plots
def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("the plots need matplotlib: pip install 'tvm_swap[plots]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


PLANNER_STYLE = {"swapadvisor": ("#4C72B0", "o"), "swapadvisor-nosearch": ("#8172B3", "s"),
                 "odswap": ("#DD8452", "^"), "vdnn": ("#55A868", "v"), "noswap": ("#333333", "D")}


def plot_sweep(sw: dict, path: Path, device: str) -> None:
    """Throughput vs the limit as a share of the no-swap need (100% at the right), one line per planner."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.5), dpi=110)
    pts = sw["points"]
    x = [100 * p["fraction_of_need"] for p in pts]
    def order(key: str):               # cells are keyed planner[@pool] (cell_key): the planner's order, arena first
        base, _, pool = key.partition("@")
        return PLANNERS.index(base), pool

    for planner in sorted({k for p in pts for k in p["planners"]}, key=order):
        y = [p["planners"][planner].get("throughput_vs_ideal")
             if p["planners"].get(planner, {}).get("status") == "ok" else math.nan for p in pts]
        base, _, pool = planner.partition("@")
        color, marker = PLANNER_STYLE.get(base, ("#999999", "x"))
        ax.plot(x, y, marker=marker, color=color, label=planner, linewidth=1.6,
                linestyle="--" if pool else "-",
                markersize=8 if planner == "noswap" else 5, zorder=3 if planner == "noswap" else 2)
    ax.set_xlim(0, 104)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(f"memory limit, % of the no-swap need ({format_bytes(sw['need_bytes'])}); "
                  f"smallest feasible {format_bytes(sw['min_feasible_bytes'])}")
    ax.set_ylabel("throughput vs ideal")
    ax.grid(alpha=0.3)
    ax.set_title(f"{sw['model']} batch {sw['batch']} on {device}: throughput as the limit shrinks", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": "tvm_swap"})
    plt.close(fig)


def plot_convergence(rows: list[dict], path: Path) -> bool:
    """Each workload's GA: best time over the lower bound against search seconds."""
    hist = [(r, r["planners"]["swapadvisor"]["history"]) for r in rows
            if r["planners"].get("swapadvisor", {}).get("history") and r.get("lower_bound_s")]
    if not hist:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.5), dpi=110)
    colors = plt.get_cmap("tab20").colors
    for i, (r, h) in enumerate(hist):
        ax.plot([e for _, e, _ in h], [b / r["lower_bound_s"] for _, _, b in h], drawstyle="steps-post",
                linewidth=1.4, color=colors[i % len(colors)], label=f"{r['model']}@{r['batch']}")
    ax.axhline(1.0, color="#C00000", linestyle="--", linewidth=1, label="lower bound")
    ax.set_xlabel("search time (s)")
    ax.set_ylabel("best iteration time / lower bound")
    ax.set_title("SwapAdvisor search: convergence per workload", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": "tvm_swap"})
    plt.close(fig)
    return True


# ---------------------------------------------------------------- main
def git_commit() -> str:
    from tvm_swap.provenance import git_commit

    return git_commit()


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget-s", type=float, default=None,
                    help="search budget per swapadvisor run (default 60, quick 10)")
    ap.add_argument("--sweep-budget-s", type=float, default=None,
                    help="per swapadvisor run in the sweep (default budget/2)")
    ap.add_argument("--sweep-points", type=int, default=None, help="limits per sweep (default 6, quick 4)")
    ap.add_argument("--models", default=None,
                    help="comma list: NAME (its paper batches), NAME@batch=B[/B2], random:LAYERS")
    ap.add_argument("--only", default=None,
                    help=f"comma list of pieces to run: {', '.join(PIECES)}, or a model name (its training rows); "
                         f"merged into the existing paper.json")
    ap.add_argument("--points", default=None,
                    help="comma list NAME@batch=B: just these training rows, merged into the existing paper.json")
    ap.add_argument("--planners", default=",".join(PLANNERS), help="comma list (default: all)")
    ap.add_argument("--pool", choices=POOLS + ("both",), default="arena",
                    help="memory model of swapadvisor and swapadvisor-nosearch (the baselines model size classes "
                         "only); `both`: each search planner in both pools in this run, side by side (the "
                         "other pool's cells in paper.json stay when only one is run)")
    ap.add_argument("--generations", type=int, default=None,
                    help="exactly this many GA generations per swapadvisor search (--budget-s is then ignored): "
                         "a fixed, load-independent search, the same for both pools; recorded in each cell")
    ap.add_argument("--readme", action="store_true",
                    help="also rewrite the results table of docs/RESULTS.md (between its paper-table markers) "
                         "from paper.json")
    ap.add_argument("--quick", action="store_true", help="one batch per model, shorter searches (about 2 minutes)")
    ap.add_argument("--no-sweep", action="store_true", help="skip the memory-limit sweep")
    ap.add_argument("--no-picture", action="store_true", help="skip the picture of one plan")
    ap.add_argument("--sweep-models", default=None, help="comma list NAME@batch=B (default: a CNN and an RNN)")
    ap.add_argument("--mem-limit", default=str(MEM_LIMIT), help="limit for the table (default 16GB = 16e9 bytes)")
    ap.add_argument("--device", default=DEVICE)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None, help="search processes (default: all cores)")
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks"))
    ap.add_argument("--add-tight-bounds", action="store_true",
                    help="add the tight lower bound to an existing paper.json's rows (no re-planning), then render")
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite paper.md (and the table) from an existing paper.json; plans nothing")
    args = ap.parse_args(argv)
    args.commit = git_commit()
    args.pools = list(POOLS) if args.pool == "both" else [args.pool]
    args.pool = args.pools[0]
    if args.generations is not None and args.generations < 0:
        ap.error("--generations must be >= 0")
    args.planner_options = {}
    args.pieces, models = set(PIECES), args.models
    args.partial = bool(args.only or args.points or args.models)
    if args.only:
        known = dict(WORKLOADS)
        items = [x.strip() for x in args.only.split(",") if x.strip()]
        bad = [x for x in items if x not in PIECES and x not in known]
        if bad:
            ap.error(f"unknown --only item(s) {bad}; give pieces ({', '.join(PIECES)}) or models ({', '.join(known)})")
        args.pieces = {x for x in items if x in PIECES}
        named = [x for x in items if x in known]
        if named:
            args.pieces.add("training")
            models = ",".join(named)
        elif "training" not in args.pieces:
            models = None
    if args.points:
        args.pieces = (args.pieces if args.only else set()) | {"training"}
        models = ",".join(x for x in (models, args.points) if x)
    if args.models and not args.only:
        args.pieces = {"training"}
    args.models = models
    if args.no_sweep:
        args.pieces.discard("sweep")
    if args.no_picture:
        args.pieces.discard("picture")
    args.budget_s = args.budget_s if args.budget_s is not None else (10.0 if args.quick else 60.0)
    args.sweep_budget_s = args.sweep_budget_s if args.sweep_budget_s is not None else args.budget_s / 2
    args.sweep_points = args.sweep_points or (4 if args.quick else 6)
    args.planners = [p.strip() for p in args.planners.split(",") if p.strip()]
    bad = [p for p in args.planners if p not in PLANNERS]
    if bad:
        ap.error(f"unknown planner(s) {bad}; choose from {PLANNERS}")
    return args


def main(argv=None) -> int:
    import os

    args = parse_args(argv)
    mem_limit = parse_bytes(args.mem_limit)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if args.render_only or args.add_tight_bounds:
        result = label_pools(json.loads((out / "paper.json").read_text()))
        if args.add_tight_bounds:
            add_tight_bounds(result, args)
            record.write((out / "paper.json"), result)
        (out / "paper.md").write_text(markdown(result))
        print_table(result)
        if args.readme:
            write_readme(result, RESULTS)
        return 0
    t_start = time.perf_counter()
    run = {"device": args.device, "mem_limit_bytes": mem_limit, "budget_s": args.budget_s,
           "sweep_budget_s": args.sweep_budget_s, "seed": args.seed, "quick": args.quick,
           "planners": args.planners, "cpus": os.cpu_count(), "python": platform.python_version(),
           "commit": args.commit, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "pieces": sorted(args.pieces),
           "models": args.models, "options": planner_options(args), "pools": args.pools,
           "generations": args.generations}
    existing = out / "paper.json"
    if args.partial and existing.exists():       # a piece: merge into the last full run's results
        result = label_pools(json.loads(existing.read_text()))
        result["meta"].setdefault("partial_runs", []).append(run)
        run = result["meta"]["partial_runs"][-1]
    else:
        result = {"meta": run, "rows": [], "sweeps": [], "pictures": []}

    def save() -> None:
        run["wall_s"] = time.perf_counter() - t_start
        record.write((out / "paper.json"), result)
        (out / "paper.md").write_text(markdown(result))

    def put(rows: list, row: dict) -> None:
        """Replace the row of the same (model, batch), or append. At the same limit only the cells this run
        measured are replaced (the other pool's and other planners' stay); the row's commit and budget are
        those of the run that measured its arena swapadvisor cell."""
        for i, r in enumerate(rows):
            if (r["model"], r["batch"]) == (row["model"], row["batch"]):
                if r.get("mem_limit_bytes") == row["mem_limit_bytes"]:
                    cells = {**r["planners"], **row["planners"]}
                    if "swapadvisor" not in row["planners"]:
                        row = r
                    row["planners"] = cells
                rows[i] = row
                return
        rows.append(row)

    keep = {}
    if "training" in args.pieces:
        for name, batches in parse_models(args.models, args.quick):
            for batch in batches:
                print(f"{name} batch {batch}", flush=True)
                try:
                    row, ctx = bench_workload(name, batch, args, mem_limit)
                except ZooError as e:            # e.g. nasnet-25 before its data file is generated
                    print(f"  skipped: {e}", flush=True)
                    continue
                put(result["rows"], row)
                if (name, batch) == PICTURE or not keep:
                    keep = {"key": (name, batch), **ctx}
                save()
    if "tflms" in args.pieces:
        name, batches = TFLMS_WORKLOAD
        rows = result.setdefault("tflms_comparison", [])
        for batch in batches:
            print(f"{name} batch {batch} (tflms comparison)", flush=True)
            put(rows, bench_workload(name, batch, args, mem_limit)[0])
            save()
    if "inference" in args.pieces:
        print(f"inference: {INFERENCE_WORKLOAD[0]}", flush=True)
        result["inference"] = bench_inference(args)
        save()
    if "picture" in args.pieces and keep.get("plans"):
        from tvm_swap.report.write import write_report

        plan = keep["plans"].get("swapadvisor") or next(iter(keep["plans"].values()))
        paths = write_report(keep["graph"], plan, out)
        paths[1].unlink()  # the HTML page holds the SVG already; keep the repo light
        result["pictures"] = [str(p) for p in paths if p.exists()]
        print("wrote", ", ".join(result["pictures"]), flush=True)
    if "sweep" in args.pieces:
        sweeps = SWEEP
        if args.sweep_models:
            sweeps = [(s.split("@batch=")[0], int(s.split("@batch=")[1]) if "@batch=" in s else 1)
                      for s in args.sweep_models.split(",")]
        for name, batch in sweeps:
            print(f"sweep {name} batch {batch}", flush=True)
            sw = bench_sweep(name, batch, args)
            path = out / f"sweep_{name.replace(':', '-')}_{batch}.png"
            plot_sweep(sw, path, args.device)
            sw["plot"] = str(path)
            sw["commit"], sw["generations"] = args.commit, args.generations
            # a rerun replaces that sweep (a partial run merges into the existing paper.json)
            result["sweeps"] = [s for s in result.get("sweeps", [])
                                if (s["model"], s["batch"]) != (name, batch)] + [sw]
            save()
    if not args.partial and plot_convergence(result["rows"], out / "convergence.png"):
        result["convergence_plot"] = str(out / "convergence.png")
    save()
    print_table(result)
    if args.readme:
        write_readme(result, RESULTS)
    print(f"\nwrote {out / 'paper.md'} and {out / 'paper.json'} in {format_seconds(time.perf_counter() - t_start)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
