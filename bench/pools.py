#!/usr/bin/env python
"""Arena vs size classes, side by side: the paper's workloads at one limit, same planner, budget and seed.

For each (model, batch) it plans with swapadvisor (and swapadvisor-nosearch) in both pool modes and prints
throughput vs ideal, bytes moved each way and the activation-traffic floor next to them (the bytes that must
cross, from tvm_swap.planner.bounds when it provides it), with the paper's SwapAdvisor figure. One JSON per
model under benchmarks/pools/ (so one model can be refreshed alone), then benchmarks/pools.md from all of
them. Records the git commit measured.

    python -m bench pools                          # every paper point, 30 s searches
    python -m bench pools --only bert-large --budget-s 60
    python -m bench pools --render-only

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

from tvm_swap.units import format_bytes  # noqa: E402

WORKLOADS = [("rnn-8-8k", (128, 256)), ("brnn-4-8k", (64, 128)), ("wresnet-152-10", (16, 32, 64)),
             ("inception-4", (16, 32, 64)), ("bert-large", (8, 16, 32))]
PAPER = {("rnn-8-8k", 128): 0.84, ("rnn-8-8k", 256): 0.76, ("brnn-4-8k", 64): 0.76, ("brnn-4-8k", 128): 0.81,
         ("wresnet-152-10", 16): 0.92, ("wresnet-152-10", 32): 0.95, ("wresnet-152-10", 64): 0.97,
         ("inception-4", 16): 0.98, ("inception-4", 32): 0.99, ("inception-4", 64): 0.70}
POOLS = ("size-classes", "arena")


def git_commit() -> str:
    from tvm_swap.provenance import git_commit

    return git_commit()


def bench_point(name: str, batch: int, args) -> dict:
    from tvm_swap.errors import InfeasibleLimitError
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.zoo import load_zoo

    graph = load_zoo(f"zoo:{name}@batch={batch}")
    row = {"model": name, "batch": batch, "ops": graph.num_ops, "paper": PAPER.get((name, batch))}
    floor = getattr(__import__("tvm_swap.planner.bounds", fromlist=["x"]), "activation_traffic_floor", None)
    if args.floor and floor is not None:
        row["activation_floor_bytes"] = int(floor(graph, args.mem_limit))
    for pool in POOLS:
        for planner in args.planners:
            t0 = time.perf_counter()
            try:
                p = plan_graph(graph, args.mem_limit, args.device, planner=planner, budget_s=args.budget_s,
                               seed=args.seed, workers=args.workers, pool=pool, generations=args.generations)
            except InfeasibleLimitError as e:
                row[f"{planner}/{pool}"] = {"infeasible": True, "min_feasible": e.min_feasible}
                continue
            pr = p.predicted
            row[f"{planner}/{pool}"] = {
                "throughput_vs_ideal": pr["throughput_vs_ideal"], "time_s": pr["time_s"],
                "ideal_time_s": pr["ideal_time_s"], "swap_out_bytes": pr["swap_out_bytes"],
                "swap_in_bytes": pr["swap_in_bytes"], "peak_bytes": pr["peak_bytes"],
                "generations": p.search.get("generations"), "evaluations": p.search.get("evaluations"),
                "wall_s": round(time.perf_counter() - t0, 1)}
            r = row[f"{planner}/{pool}"]
            print(f"  {name}@{batch} {planner:22s} {pool:12s} {r['throughput_vs_ideal']:.3f}  "
                  f"out {format_bytes(r['swap_out_bytes'])} in {format_bytes(r['swap_in_bytes'])}  "
                  f"gens {r['generations']}  {r['wall_s']} s", flush=True)
    return row


def _cell(r) -> str:
    if r is None:
        return "-"
    if r.get("infeasible"):
        return f"infeasible (min {format_bytes(r['min_feasible'])})"
    return f"{r['throughput_vs_ideal']:.3f}"


def _search(meta: dict) -> str:
    g = meta.get("generations")
    return f"{g} GA generations" if g is not None else f"{meta.get('budget_s')} s budget"


def render(rows: list[dict], planners, meta: dict) -> str:
    lines = [f"# Arena vs size classes ({meta.get('device')}, limit {format_bytes(meta.get('mem_limit', 0))})", "",
             f"Same planner, search ({_search(meta)}) and seed per cell; throughput as a fraction "
             f"of ideal; bytes moved each way; the activation floor is what must cross each way in every plan "
             f"(see bench/pools.py). Commit {meta.get('commit')}.", ""]
    head = ["model", "batch", "paper"]
    for pl in planners:
        head += [f"{pl} size-classes", f"{pl} arena"]
    head += ["arena out / in", "size-classes out / in", "activation floor", "evaluations size-classes / arena"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for r in rows:
        cells = [r["model"], str(r["batch"]), "-" if r.get("paper") is None else f"{r['paper']:.2f}"]
        for pl in planners:
            cells += [_cell(r.get(f"{pl}/size-classes")), _cell(r.get(f"{pl}/arena"))]
        main = planners[0]
        for pool in ("arena", "size-classes"):
            x = r.get(f"{main}/{pool}") or {}
            cells.append(f"{format_bytes(x['swap_out_bytes'])} / {format_bytes(x['swap_in_bytes'])}"
                         if "swap_out_bytes" in x else "-")
        fl = r.get("activation_floor_bytes")
        cells.append("-" if fl is None else format_bytes(fl))
        ev = [(r.get(f"{main}/{pool}") or {}).get("evaluations") for pool in POOLS]
        cells.append(" / ".join("-" if e is None else str(e) for e in ev))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from tvm_swap.units import parse_bytes

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=None, help="comma list of models (default: all)")
    ap.add_argument("--batches", default=None, help="comma list of batches (default: the paper's)")
    ap.add_argument("--budget-s", type=float, default=30.0)
    ap.add_argument("--planners", default="swapadvisor,swapadvisor-nosearch")
    ap.add_argument("--mem-limit", default="16GB")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--generations", type=int, default=None,
                    help="exactly this many GA generations per search (budget ignored): equal search for both "
                         "pools however slow each evaluation is on a loaded machine")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--no-floor", dest="floor", action="store_false", help="skip the activation floor")
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks"))
    ap.add_argument("--render-only", action="store_true")
    args = ap.parse_args(argv)
    args.mem_limit = parse_bytes(args.mem_limit)
    args.planners = [p for p in args.planners.split(",") if p]
    out = Path(args.out_dir)
    per_model = out / "pools"
    per_model.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    meta = {"commit": git_commit(), "device": args.device, "mem_limit": args.mem_limit, "budget_s": args.budget_s,
            "seed": args.seed, "generations": args.generations}
    if not args.render_only:
        for name, batches in WORKLOADS:
            if only and name not in only:
                continue
            if args.batches:
                batches = tuple(int(b) for b in args.batches.split(","))
            rows = []
            for b in batches:
                print(f"{name}@batch={b}", flush=True)
                rows.append(bench_point(name, b, args))
            record.write((per_model / f"{name}.json"), {"meta": meta, "rows": rows})
    rows, metas = [], []
    for name, _ in WORKLOADS:
        f = per_model / f"{name}.json"
        if f.exists():
            d = json.loads(f.read_text())
            rows += d["rows"]
            metas.append(d["meta"])
    if not rows:
        print("no results yet")
        return 1
    notes = out / "pools_notes.md"      # measurements beside the table (evaluation speed, analyses), kept by hand
    extra = "\n" + notes.read_text() if notes.exists() else ""
    (out / "pools.md").write_text(render(rows, args.planners, metas[-1]) + extra)
    print((out / "pools.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
