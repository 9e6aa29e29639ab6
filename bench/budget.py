#!/usr/bin/env python
"""swapadvisor under a wall-clock budget, as a user runs it: fraction of ideal per run, and what the search reached.

    python -m bench budget --point zoo:nasnet-25@batch=16:16GB:60 --runs 3
    python -m bench budget --point zoo:inception-4@batch=32:16GB:15 --point zoo:bert-large@batch=32:16GB:60

Each point (graph, limit, budget in seconds) is planned `--runs` times in a row with `tvm_swap.planner.plan_graph`
(swapadvisor, the default options and workers, device `--device`, seed `--seed`), the way `tvm-swap plan ...
--budget-s B` plans it. A budget run depends on the machine's speed and load (how many genomes fit in the
budget), so the table gives the load average beside each run. Prints a table and writes benchmarks/budget.json
with the commit (tvm_swap.provenance.git_commit).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent


def parse_point(text: str) -> tuple[str, str, float]:
    graph, limit, budget = text.rsplit(":", 2)
    return graph, limit, float(budget)


def run_point(graph_spec: str, limit: str, budget_s: float, device: str, seed: int) -> dict:
    from tvm_swap.planner import plan_graph
    from tvm_swap.zoo import load_zoo

    g = load_zoo(graph_spec)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    plan = plan_graph(g, limit, device=device, budget_s=budget_s, seed=seed)
    s = plan.search
    return {"graph": graph_spec, "limit": limit, "budget_s": budget_s, "wall_s": round(time.perf_counter() - t0, 1),
            "throughput_vs_ideal": plan.predicted["throughput_vs_ideal"], "generations": s.get("generations"),
            "evaluations": s.get("evaluations"), "islands": s.get("islands"), "load_avg_before": round(load, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--point", action="append", required=True, type=parse_point,
                    help="GRAPH:LIMIT:BUDGET_S, e.g. zoo:nasnet-25@batch=16:16GB:60 (repeatable)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "budget.json"))
    args = ap.parse_args(argv)
    from tvm_swap.provenance import git_commit

    rows = []
    print("| graph | limit | budget s | run | of ideal | generations | evaluations | wall s | load avg |")
    print("|---|---|---|---|---|---|---|---|---|")
    for graph, limit, budget in args.point:
        for r in range(args.runs):
            row = run_point(graph, limit, budget, args.device, args.seed)
            rows.append(row)
            print(f"| {graph} | {limit} | {budget:g} | {r + 1} | {row['throughput_vs_ideal']:.3f} | "
                  f"{row['generations']} | {row['evaluations']} | {row['wall_s']} | {row['load_avg_before']} |",
                  flush=True)
    out = {"commit": git_commit(), "device": args.device, "seed": args.seed, "rows": rows}
    record.write(Path(args.json), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
