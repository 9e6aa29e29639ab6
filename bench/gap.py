#!/usr/bin/env python
"""How far from optimal are the planners on small graphs? Brackets from both sides, per instance.

Instances: random DAGs and random training graphs of 8-20 ops (tvm_swap.testing, seeded), each at 3 limits
(10%, 40%, 80% of the way from the smallest feasible limit to the no-swap peak), V100 link, roofline-like
random op times. Per instance:
- tight lower bound (tvm_swap.planner.tight_bound): no verified plan is faster;
- the exact stage model (tvm_swap.planner.exact; CP-SAT where installed, else HiGHS): its optimum is exact for
  a restricted model, so its plan (verified, then simulated) is an UPPER bound on the true optimum; "closed" =
  solved to optimality (within 0.1%) within the time limit. Run twice: with the schedule fixed to the GA's
  (memory and copies only: the best swap plan for the GA's own schedule), then schedule free (the whole
  problem), warm-started from the first (CP-SAT);
- every planner (swapadvisor with a fixed seed and generation count; the baselines), verified and simulated.
best = the fastest verified plan of all (exact-stage plan included) >= the true optimum >= tight bound.
So for a planner p: gap_best = time_p / best - 1 <= true gap <= time_p / tight bound - 1 = gap_lb.

    python -m bench gap                         # 200 graphs x 3 limits, 60 s MILP limit (hours)
    python -m bench gap --graphs 20 --milp-s 20 # what fits in ~30 minutes on a shared machine
    python -m bench gap --instances 37:0.8,67:0.4 --exact-from before.json --out after
                                                        # chosen instances; reuse an earlier run's free solve
Writes benchmarks/gap.json (with the git commit) and benchmarks/gap.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench import record

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

from tvm_swap.cost.devices import get_device  # noqa: E402
from tvm_swap.errors import InfeasibleLimitError  # noqa: E402
from tvm_swap.planner.api import plan_graph  # noqa: E402
from tvm_swap.planner.bounds import noswap_peak  # noqa: E402
from tvm_swap.planner.exact import solve_exact  # noqa: E402
from tvm_swap.planner.feasibility import min_feasible_limit  # noqa: E402
from tvm_swap.planner.simulator import simulate  # noqa: E402
from tvm_swap.planner.tight_bound import tight_lower_bound  # noqa: E402
from tvm_swap.testing import random_dag, random_op_times, random_training_graph  # noqa: E402
from tvm_swap.verify import verify_plan  # noqa: E402

PLANNERS = ["swapadvisor", "swapadvisor-nosearch", "odswap", "vdnn", "noswap"]
FRACS = (0.1, 0.4, 0.8)
EXACT = {"exact-stages": "exact", "exact-stages@GA-schedule": "exact_ga_schedule"}   # column -> row key
DEVICE = "v100-16gb"


def instance_graph(i: int):
    """Graph i: even -> random DAG of 8-20 ops, odd -> training graph of 2-4 layers (8-20 ops)."""
    if i % 2 == 0:
        return random_dag(i, n_ops=8 + (i // 2) % 13, update_prob=0.4, workspace_prob=0.2, name=f"dag{i}")
    g = random_training_graph(i, n_layers=2 + (i // 2) % 3, momentum=(i // 2) % 2 == 1, name=f"train{i}")
    return g


def run_instance(g, frac: float, args, dev) -> dict:
    t = random_op_times(g, 0)
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    limit = int(lo + frac * max(0, hi - lo))
    row = {"graph": g.name, "ops": g.num_ops, "frac": frac, "limit": limit,
           "tight_bound_s": tight_lower_bound(g, t, dev, limit), "planners": {}}
    ga_schedule = None
    for p in PLANNERS:
        t0 = time.perf_counter()
        try:
            plan = plan_graph(g, limit, device=dev, op_time=t, planner=p, seed=args.seed,
                              generations=args.generations, workers=1)
            row["planners"][p] = {"time_s": plan.predicted["time_s"], "wall_s": time.perf_counter() - t0}
            if p == "swapadvisor":
                ga_schedule = plan.schedule
        except InfeasibleLimitError:
            row["planners"][p] = {"time_s": None, "status": "infeasible"}

    def exact(schedule, warm=None):
        r = solve_exact(g, t, dev, limit, time_limit_s=args.milp_s, schedule=schedule, backend=args.backend,
                        warm_start=warm, workers=args.solver_workers)
        ex = {"status": r.status, "solve_s": r.solve_s, "objective_s": r.objective_s, "vars": r.num_vars,
              "backend": r.backend, "mip_gap": r.mip_gap}
        if r.plan is not None:
            viol = verify_plan(g, r.plan, limit)
            ex["verified"] = not viol
            if not viol:
                ex["time_s"] = simulate(g, r.plan, t, dev).time_s
        return ex, r

    # the best stage plan for the GA's own schedule first; with CP-SAT it is the free solve's first incumbent
    warm = None
    if ga_schedule:
        row["exact_ga_schedule"], warm = exact(ga_schedule)
        if args.backend == "highs" or warm.solution is None:
            warm = None
    else:
        row["exact_ga_schedule"] = {"status": "none", "solve_s": 0.0}
    reuse = args.exact_rows.get((g.name, frac)) if getattr(args, "exact_rows", None) else None
    if reuse is not None and reuse["limit"] == limit:
        row["exact"] = dict(reuse["exact"], reused=True)   # an earlier run's schedule-free solve, same model
    else:
        row["exact"], _ = exact(None, warm)          # schedule, memory and copies together
    times = [v["time_s"] for v in row["planners"].values() if v.get("time_s")] + \
            [e["time_s"] for e in (row["exact"], row["exact_ga_schedule"]) if e.get("time_s")]
    row["best_s"] = min(times) if times else None
    return row


def refresh_bounds(rows: list[dict]) -> None:
    """Recompute each row's tight bound with this code (the graphs, times and limits are seeded)."""
    dev = get_device(DEVICE)
    graphs = {}
    for r in rows:
        i = int(r["graph"].removeprefix("dag").removeprefix("train"))
        g = graphs.setdefault(i, instance_graph(i))
        r["tight_bound_s"] = tight_lower_bound(g, random_op_times(g, 0), dev, r["limit"])


def summarize(rows: list[dict]) -> dict:
    out = {}
    for p in PLANNERS + list(EXACT):
        gb, gl, gc = [], [], []
        for r in rows:
            tp = r[EXACT[p]].get("time_s") if p in EXACT else r["planners"][p].get("time_s")
            if not tp or not r["best_s"]:
                continue
            gb.append(tp / r["best_s"] - 1)
            gl.append(tp / r["tight_bound_s"] - 1)
            if r["exact"]["status"] == "optimal" and r["exact"].get("time_s"):
                gc.append(tp / r["exact"]["time_s"] - 1)
        f = (lambda xs, q: float(np.quantile(xs, q)) if xs else None)
        refused = sum(1 for r in rows if p not in EXACT and r["planners"][p].get("status") == "infeasible")
        out[p] = {"n": len(gb), "refused": refused, "median_gap_vs_best": f(gb, 0.5), "p90_gap_vs_best": f(gb, 0.9),
                  "share_within_2pct_of_best": (sum(x <= 0.02 for x in gb) / len(gb)) if gb else None,
                  "share_within_10pct_of_best": (sum(x <= 0.10 for x in gb) / len(gb)) if gb else None,
                  "worst_gap_vs_best": max(gb) if gb else None,
                  "median_gap_vs_bound": f(gl, 0.5), "worst_gap_vs_bound": max(gl) if gl else None,
                  "n_closed": len(gc), "median_gap_vs_closed_stage_optimum": f(gc, 0.5),
                  "worst_gap_vs_closed_stage_optimum": max(gc) if gc else None}
    for key in ("exact", "exact_ga_schedule"):
        closed = [r for r in rows if r[key]["status"] == "optimal"]
        solve = [r[key]["solve_s"] for r in rows]
        out["solver" if key == "exact" else "solver_ga_schedule"] = {
            "instances": len(rows), "closed": len(closed), "median_solve_s": f(solve, 0.5) if solve else None,
            "max_solve_s": max(solve) if solve else None,
            "no_solution": sum(1 for r in rows if not r[key].get("time_s")),
            "largest_closed_ops": max((r["ops"] for r in closed), default=None)}
    # the GA against the best stage plan for its own schedule (where that MILP closed): its swap planning's gap
    own = [r["planners"]["swapadvisor"]["time_s"] / r["exact_ga_schedule"]["time_s"] - 1 for r in rows
           if r["exact_ga_schedule"]["status"] == "optimal" and r["exact_ga_schedule"].get("time_s")
           and r["planners"]["swapadvisor"].get("time_s")]
    out["swapadvisor_by_kind"] = {}
    for kind in ("dag", "train"):            # random DAGs vs training graphs (graph names dagN / trainN)
        sub = [r for r in rows if r["graph"].startswith(kind) and r["best_s"]
               and r["planners"]["swapadvisor"].get("time_s")]
        gb = [r["planners"]["swapadvisor"]["time_s"] / r["best_s"] - 1 for r in sub]
        ow = [r["planners"]["swapadvisor"]["time_s"] / r["exact_ga_schedule"]["time_s"] - 1 for r in sub
              if r["exact_ga_schedule"]["status"] == "optimal" and r["exact_ga_schedule"].get("time_s")]
        out["swapadvisor_by_kind"][kind] = {"n": len(gb), "median_gap_vs_best": f(gb, 0.5), "p90": f(gb, 0.9),
                                            "worst": max(gb) if gb else None, "n_own": len(ow),
                                            "median_vs_own_schedule": f(ow, 0.5), "worst_vs_own_schedule":
                                            max(ow) if ow else None}
    ratios = [r["best_s"] / r["tight_bound_s"] for r in rows if r["best_s"]]
    out["bound"] = {"violations": sum(x < 1 - 1e-9 for x in ratios), "median_best_over_bound": f(ratios, 0.5),
                    "min_best_over_bound": min(ratios) if ratios else None}
    out["ga_vs_own_schedule"] = {"n": len(own), "median": f(own, 0.5), "worst": max(own) if own else None,
                                 "share_within_2pct": (sum(g <= 0.02 for g in own) / len(own)) if own else None}
    return out


def pct(x):
    return "-" if x is None else f"{100 * x:+.1f}%"


def render(summary: dict, meta: dict) -> str:
    lines = [f"# Gap to optimal on small graphs (commit {meta['commit']})", "",
             f"{meta['instances']} instances ({meta['graphs']} graphs x limits {list(FRACS)} of the way from the "
             f"smallest feasible limit to the no-swap peak), {DEVICE}; swapadvisor seed {meta['seed']}, "
             f"{meta['generations']} generations; exact-stages limit {meta['milp_s']} s per solve "
             f"({meta.get('backend', 'highs')}, {meta.get('solver_workers', 1)} thread(s)).", "",
             "gap vs best = time / fastest verified plan of all - 1 (<= true gap); gap vs bound = time / tight "
             "lower bound - 1 (>= true gap); gap vs closed = against the schedule-free stage-model optimum where "
             "the solver closed it. exact-stages@GA-schedule: the best stage plan for the GA's own schedule.",
             "",
             "| planner | n (refused) | median gap vs best | p90 | worst | within 2% / 10% of best "
             "| median gap vs bound | worst | n closed | median vs closed | worst |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    share = (lambda x: "-" if x is None else f"{100 * x:.0f}%")
    for p in PLANNERS + list(EXACT):
        s = summary[p]
        lines.append(f"| {p} | {s['n']} ({s['refused']}) | {pct(s['median_gap_vs_best'])} | "
                     f"{pct(s.get('p90_gap_vs_best'))} | {pct(s['worst_gap_vs_best'])} | "
                     f"{share(s.get('share_within_2pct_of_best'))} / {share(s.get('share_within_10pct_of_best'))} | "
                     f"{pct(s['median_gap_vs_bound'])} | "
                     f"{pct(s['worst_gap_vs_bound'])} | {s['n_closed']} | "
                     f"{pct(s['median_gap_vs_closed_stage_optimum'])} | "
                     f"{pct(s['worst_gap_vs_closed_stage_optimum'])} |")
    lines.append("")
    own = summary["ga_vs_own_schedule"]
    share = "-" if own["share_within_2pct"] is None else f"{100 * own['share_within_2pct']:.0f}%"
    b = summary["bound"]
    lines += [f"Tight bound: best verified plan / bound median {b['median_best_over_bound']:.3f}, min "
              f"{b['min_best_over_bound']:.3f}; {b['violations']} instances where a plan beat the bound "
              f"(must be 0).", ""]
    lines += [f"swapadvisor vs the stage-model optimum for its own schedule ({own['n']} closed instances): median "
              f"{pct(own['median'])}, worst {pct(own['worst'])}, within 2% on {share} of them.", ""]
    for kind, k in summary.get("swapadvisor_by_kind", {}).items():
        lines.append(f"- swapadvisor on {kind} graphs ({k['n']} instances): gap vs best median {pct(k['median_gap_vs_best'])}"
                     f", p90 {pct(k['p90'])}, worst {pct(k['worst'])}; vs the stage optimum on its own schedule "
                     f"({k['n_own']} closed) median {pct(k['median_vs_own_schedule'])}, worst "
                     f"{pct(k['worst_vs_own_schedule'])}.")
    lines.append("")
    for key, what in (("solver", "exact-stages (schedule free)"),
                      ("solver_ga_schedule", "exact-stages on the GA's schedule")):
        sv = summary[key]
        lines.append(f"- {what}: {sv['closed']}/{sv['instances']} closed within {meta['milp_s']} s, "
                     f"{sv['no_solution']} without any solution; solve time median {sv['median_solve_s']:.1f} s, "
                     f"max {sv['max_solve_s']:.1f} s; largest graph closed: {sv['largest_closed_ops']} ops.")
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", type=int, default=200)
    ap.add_argument("--start", type=int, default=0, help="first graph index (to extend an earlier run)")
    ap.add_argument("--milp-s", type=float, default=60.0)
    ap.add_argument("--generations", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="auto", choices=["auto", "cpsat", "highs"], help="exact solver")
    ap.add_argument("--solver-workers", type=int, default=1, help="CP-SAT threads (the machine is shared)")
    ap.add_argument("--instances", default=None,
                    help="comma list of GRAPH:FRAC (graph index as in instance_graph, e.g. 37:0.8) to run instead "
                         "of --graphs x the three limits")
    ap.add_argument("--exact-from", nargs="+", default=[],
                    help="bench.gap JSON(s) of an earlier run: reuse their schedule-free exact solve on the same "
                         "instance (the exact model must be unchanged since; the GA-schedule solve is rerun)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "gap"))
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite gap.md and the summary from gap.json, with the tight bound recomputed by this code")
    ap.add_argument("--merge", action="append", default=[], help="with --render-only: add the rows of another run")
    args = ap.parse_args(argv)
    if args.render_only:
        out = Path(args.out)
        data = json.loads(out.with_suffix(".json").read_text())
        for extra in args.merge:
            more = json.loads(Path(extra).read_text())
            data["rows"] += more["rows"]
            data["meta"]["graphs"] += more["meta"]["graphs"]
            data["meta"]["commit"] += "+" + more["meta"]["commit"]
        data["meta"]["instances"] = len(data["rows"])
        data["meta"]["graphs"] = len({r["graph"] for r in data["rows"]})
        refresh_bounds(data["rows"])
        data["summary"] = summarize(data["rows"])
        record.write(out.with_suffix(".json"), data)
        out.with_suffix(".md").write_text(render(data["summary"], data["meta"]))
        print(render(data["summary"], data["meta"]))
        return 0
    dev = get_device(DEVICE)
    from tvm_swap.provenance import git_commit
    commit = git_commit()
    meta = {"commit": commit, "graphs": args.graphs, "start": args.start, "instances": 0, "seed": args.seed,
            "backend": args.backend, "solver_workers": args.solver_workers,
            "generations": args.generations, "milp_s": args.milp_s, "device": DEVICE}
    rows = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    args.exact_rows = {}
    for path in args.exact_from:
        for r in json.loads(Path(path).read_text())["rows"]:
            args.exact_rows[(r["graph"], r["frac"])] = r
    if args.instances:
        specs = [(int(x.split(":")[0]), float(x.split(":")[1])) for x in args.instances.split(",") if x]
        meta["instances_arg"] = args.instances
    else:
        specs = [(i, frac) for i in range(args.start, args.start + args.graphs) for frac in FRACS]
    meta["graphs"] = len({i for i, _ in specs})
    for i, frac in specs:
        g = instance_graph(i)
        r = run_instance(g, frac, args, dev)
        rows.append(r)
        ex = r["exact"]
        print(f"{g.name:8s} {g.num_ops:3d} ops frac {frac}: bound {r['tight_bound_s']:.6f} best {r['best_s']:.6f} "
              f"ga {r['planners']['swapadvisor'].get('time_s') or float('nan'):.6f} exact {ex['status']} "
              f"{ex.get('time_s') or float('nan'):.6f} in {ex['solve_s']:.1f}s", flush=True)
        meta["instances"] = len(rows)
        summary = summarize(rows)
        record.write(out.with_suffix(".json"), {"meta": meta, "summary": summary, "rows": rows})
        out.with_suffix(".md").write_text(render(summary, meta))
    print(render(summarize(rows), meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
