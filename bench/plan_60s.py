#!/usr/bin/env python
"""The issue-10 planner-speed check: BERT-large@32 and BRNN-4-8K@128 at 16 GB on a V100, `--budget-s 60`.

Per model, in one process each (as `tvm-swap plan` runs): the time to the first verified plan (the no-search
planner, graph load included) and to the final plan of a 60 s search (graph load, feasibility, search, the
final plan, verification and prediction), with the search's generations, evaluations and the time its
first generation (the seeds) was done. The search runs once per `--recompute` setting (default: off and on,
side by side in one run, so their evaluations per second compare under the same load; the first plan is the
no-search planner's, whose default is off). Writes benchmarks/plan_60s.json (with the commit) and prints a
table.

    python -m bench plan-60s [--pool arena] [--budget-s 60] [--recompute off,on]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

MODELS = ["bert-large@batch=32", "brnn-4-8k@batch=128"]


def one(model: str, planner: str, args, **options) -> dict:
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.zoo import load_zoo

    t0 = time.perf_counter()
    g = load_zoo(f"zoo:{model}")
    p = plan_graph(g, args.mem_limit, args.device, planner=planner, budget_s=args.budget_s, seed=args.seed,
                   pool=args.pool, **options)
    wall = time.perf_counter() - t0
    s = p.search or {}
    hist = s.get("history") or []
    search_s = s.get("search_s") or 0.0
    return {"wall_s": round(wall, 1), "throughput_vs_ideal": p.predicted["throughput_vs_ideal"],
            "generations": s.get("generations"), "evaluations": s.get("evaluations"),
            "search_s": round(search_s, 1),
            "evals_per_s": round(s["evaluations"] / search_s, 3) if search_s and s.get("evaluations") else None,
            "seeds_done_s": hist[0][1] if hist else None, "recomputes": sum(a.kind == "recompute" for a in p.actions),
            "verified": bool(p.verified)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pool", default="arena")
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--mem-limit", default="16GB")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--recompute", default="off,on", help="the search's recompute settings, run side by side")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "plan_60s.json"))
    args = ap.parse_args(argv)
    from tvm_swap.provenance import git_commit
    commit = git_commit()
    settings = [x for x in args.recompute.split(",") if x]
    rows = []
    for m in args.models.split(","):
        r = {"model": m, "first": one(m, "swapadvisor-nosearch", args)}
        for rc in settings:
            r[f"final_recompute_{rc}"] = one(m, "swapadvisor", args, recompute=rc)
        rows.append(r)
        print(json.dumps(r), flush=True)
    record.write(Path(args.out), {"commit": commit, "pool": args.pool, "budget_s": args.budget_s,
                                          "device": args.device, "mem_limit": args.mem_limit, "rows": rows})
    print(f"\n| model | recompute | first verified plan (no search) | final plan ({args.budget_s:g} s search) | "
          f"search: seeds done / generations / evaluations | evaluations / s | recomputes | "
          f"throughput no search / search |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = r["first"]
        for rc in settings:
            z = r[f"final_recompute_{rc}"]
            print(f"| {r['model']} | {rc} | {f['wall_s']} s | {z['wall_s']} s | {z['seeds_done_s']} s / "
                  f"{z['generations']} / {z['evaluations']} | {z['evals_per_s']} | {z['recomputes']} | "
                  f"{f['throughput_vs_ideal']:.3f} / {z['throughput_vs_ideal']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
