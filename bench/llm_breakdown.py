#!/usr/bin/env python
"""Where the link bytes of an LLM training step go: bytes moved each way by tensor role (weights, fp32 master
weights, optimizer state, gradients, activations, other), the copies that are avoidable by construction, next
to the tight bound's must-move bytes (tight_bound.tight_lower_bound_detail) and each stream's busy seconds.

Plans each case (as bench/llm.py does: h200, one process) or reads saved plans (`tvm-swap plan ... -o`,
e.g. made with PYTHONPATH=/work/base for a "before"), prints one table per plan and writes
benchmarks/llm_breakdown.json with the git commit.

    python -m bench llm-breakdown --budget 60                        # both steps, swapadvisor
    python -m bench llm-breakdown --saved before=plan13b.json before=plan7b.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_CASES = ["llama-13b@batch=1,seq=4096:141GB", "llama-7b@batch=4,seq=4096:80GB"]


def planned(case: str, planner: str, budget: float, device: str, generations: int | None, host_ops=None):
    from tvm_swap.planner import plan_graph
    from tvm_swap.units import parse_limit
    from tvm_swap.zoo import load_zoo

    spec, _, limit_text = case.rpartition(":")
    g = load_zoo("zoo:" + spec)
    t0 = time.perf_counter()
    kw = {"host_ops": host_ops} if host_ops and planner.startswith("swapadvisor") else {}
    p = plan_graph(g, int(parse_limit(limit_text)), device=device, planner=planner, budget_s=budget, workers=1,
                   generations=generations if planner == "swapadvisor" else None, **kw)
    return g, p, time.perf_counter() - t0


def saved(path: str):
    from tvm_swap.frontends.graph_ref import graph_of_plan
    from tvm_swap.plan import Plan

    p = Plan.load(path)
    return graph_of_plan(p, None), p


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="*", default=DEFAULT_CASES, help="MODEL@OPTIONS:LIMIT to plan here")
    ap.add_argument("--planners", nargs="+", default=["swapadvisor"])
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--generations", type=int, default=None)
    ap.add_argument("--device", default="h200")
    ap.add_argument("--host-ops", choices=("optimizer", "auto"), default=None,
                    help="swapadvisor planners: the optimizer's updates on the host (see bench/llm.py)")
    ap.add_argument("--saved", nargs="*", default=[], metavar="LABEL=PLAN.json",
                    help="saved plans to break down instead of (or besides) planning; give --cases with no value "
                         "to plan nothing")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "llm_breakdown.json"))
    args = ap.parse_args(argv)
    from tvm_swap.planner.breakdown import format_breakdown
    from tvm_swap.provenance import git_commit
    from tvm_swap.report.breakdown import breakdown_of

    rows = []
    for item in args.saved:
        label, _, path = item.rpartition("=")
        g, p = saved(path)
        rows.append({"label": label or path, "plan_file": path, **breakdown_of(g, p)})
        print(f"[{rows[-1]['label']}] " + format_breakdown(rows[-1]) + "\n", flush=True)
    for case in args.cases:
        for planner in args.planners:
            g, p, secs = planned(case, planner, args.budget, args.device, args.generations, args.host_ops)
            rows.append({"label": "planned", "plan_s": secs, "host_policy": p.search.get("host_policy"),
                         **breakdown_of(g, p)})
            print(f"[planned, {secs:.0f} s] " + format_breakdown(rows[-1]) + "\n", flush=True)
    doc = {"benchmark": "bench_llm_breakdown", "git_commit": git_commit(short=False), "device": args.device,
           "budget_s": args.budget, "generations": args.generations, "host_ops": args.host_ops, "rows": rows}
    record.write(Path(args.out), doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
