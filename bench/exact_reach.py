#!/usr/bin/env python
"""How large a graph does the exact stage model close within a time limit? (issue 13: "the largest graph the
exact solver closes within 60 s").

Per graph (bench.gap.instance_graph, one limit fraction): the GA's plan (30 generations, seed 0), then the
stage model with the GA's schedule fixed (CP-SAT), then schedule free warm-started from it, each with the
time limit. Prints ops, status, solve seconds, the solver's own gap, and the simulated times (the stage plan's
simulated time is an upper bound on the true optimum; see tvm_swap/planner/exact.py).

    python -m bench exact-reach --graphs 20 22 24 5 11 --limit-s 60
Writes benchmarks/exact_reach.json (with the git commit) and prints a markdown table.
    python -m bench exact-reach --compare BEFORE.json AFTER.json [--note TEXT]
writes both runs, side by side per graph, to benchmarks/exact_reach.json and benchmarks/exact_reach.md.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent
from bench.gap import DEVICE, instance_graph  # noqa: E402
from tvm_swap.cost.devices import get_device  # noqa: E402
from tvm_swap.planner.api import plan_graph  # noqa: E402
from tvm_swap.planner.bounds import noswap_peak  # noqa: E402
from tvm_swap.planner.exact import solve_exact  # noqa: E402
from tvm_swap.planner.feasibility import min_feasible_limit  # noqa: E402
from tvm_swap.planner.simulator import simulate  # noqa: E402
from tvm_swap.verify import verify_plan  # noqa: E402
from tvm_swap.testing import random_op_times  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", type=int, nargs="+", default=[20, 22, 24, 46, 48, 50])
    ap.add_argument("--frac", type=float, default=0.4)
    ap.add_argument("--limit-s", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=1, help="CP-SAT threads")
    ap.add_argument("--det-time", type=float, default=None,
                    help="limit each CP-SAT solve by this deterministic time instead (load-independent; the wall "
                         "limit is then 100x --limit-s)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "exact_reach.json"))
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="two runs' JSON: render side by side")
    ap.add_argument("--note", default="", help="with --compare: how the runs were made (machine, load)")
    args = ap.parse_args(argv)
    if args.compare:
        runs = [json.loads(Path(f).read_text()) for f in args.compare]
        out = Path(args.out)
        record.write(out, {"note": args.note, "runs": runs})
        md = render_compare(runs, args.note)
        out.with_suffix(".md").write_text(md)
        print(md)
        return 0
    dev = get_device(DEVICE)
    from tvm_swap.provenance import git_commit
    commit = git_commit()
    rows = []
    print("| graph | ops | GA ms | fixed-schedule: status, s | free: status, s, gap | free plan ms |")
    print("|---|---|---|---|---|---|")
    for i in args.graphs:
        g = instance_graph(i)
        t = random_op_times(g, 0)
        lo, hi = min_feasible_limit(g), noswap_peak(g)
        limit = int(lo + args.frac * (hi - lo))
        ga = plan_graph(g, limit, device=dev, op_time=t, planner="swapadvisor", seed=0, generations=30, workers=1)
        wall = args.limit_s * (100 if args.det_time else 1)
        fixed = solve_exact(g, t, dev, limit, time_limit_s=wall, schedule=ga.schedule,
                            backend="cpsat", workers=args.workers, det_limit=args.det_time)
        free = solve_exact(g, t, dev, limit, time_limit_s=wall, backend="cpsat", workers=args.workers,
                           warm_start=fixed if fixed.solution is not None else None, det_limit=args.det_time)
        sim = None
        if free.plan is not None and not verify_plan(g, free.plan, limit):
            sim = simulate(g, free.plan, t, dev).time_s
        row = {"graph": g.name, "ops": g.num_ops, "limit": limit, "ga_s": ga.predicted["time_s"],
               "fixed": {"status": fixed.status, "solve_s": fixed.solve_s},
               "free": {"status": free.status, "solve_s": free.solve_s, "mip_gap": free.mip_gap, "time_s": sim}}
        rows.append(row)
        gap = "-" if free.mip_gap is None else f"{100 * free.mip_gap:.1f}%"
        print(f"| {g.name} | {g.num_ops} | {ga.predicted['time_s'] * 1e3:.3f} | {fixed.status}, "
              f"{fixed.solve_s:.1f} | {free.status}, {free.solve_s:.1f}, {gap} | "
              f"{'-' if sim is None else f'{sim * 1e3:.3f}'} |", flush=True)
        record.write(Path(args.out), {"commit": commit, "limit_s": args.limit_s, "det_time": args.det_time,
                                              "frac": args.frac,
                                              "workers": args.workers, "device": DEVICE, "rows": rows})
    closed = [r["ops"] for r in rows if r["free"]["status"] == "optimal"]
    within = f"deterministic time {args.det_time:g}" if args.det_time else f"{args.limit_s:.0f} s"
    print(f"\nlargest graph closed (schedule free) within {within}: {max(closed) if closed else None} ops")
    return 0


def _cell(r: dict) -> str:
    f = r["free"]
    gap = "-" if f.get("mip_gap") is None else f"{100 * f['mip_gap']:.1f}%"
    return f"{r['fixed']['status']} {r['fixed']['solve_s']:.1f} s | {f['status']} {f['solve_s']:.1f} s, gap {gap}"


def render_compare(runs: list[dict], note: str) -> str:
    """Per graph: both runs' fixed-schedule and schedule-free results, then the largest graph each closed."""
    a, b = runs
    lines = [f"# Exact stage model: reach within {a['limit_s']:.0f} s (before {a['commit']}, after {b['commit']})", "",
             note, "",
             "Per graph: the stage model with the GA's schedule fixed, then schedule free warm-started from it "
             f"(CP-SAT, {a['workers']} thread(s), limit fraction {a['frac']}); gap = the solver's own gap to its "
             "bound of the stage model at the end (\"optimal\" = within 0.1%).", "",
             "| graph | ops | before: fixed | before: free | after: fixed | after: free |",
             "|---|---|---|---|---|---|"]
    after = {r["graph"]: r for r in b["rows"]}
    for r in a["rows"]:
        s = after.get(r["graph"])
        lines.append(f"| {r['graph']} | {r['ops']} | {_cell(r)} | {_cell(s) if s else '- | -'} |")
    lines.append("")
    for name, run in (("before", a), ("after", b)):
        closed = [r["ops"] for r in run["rows"] if r["free"]["status"] == "optimal"]
        lines.append(f"- {name} ({run['commit']}): schedule free closed on {len(closed)}/{len(run['rows'])} graphs; "
                     f"largest closed: {max(closed) if closed else None} ops.")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
