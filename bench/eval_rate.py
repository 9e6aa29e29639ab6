#!/usr/bin/env python
"""How fast the arena GA evaluates genomes with recompute off and on (issue 12, with the packed fast path).

Two measurements per model, in one process, side by side:

1. The search: swapadvisor (arena pool) with a fixed number of generations, in-process (workers=1, so the
   load of other processes on the machine is shared alike), recompute off then on: evaluations, the
   search's seconds, evaluations per second, and the plan's throughput.
2. One genome: the recompute seed genomes (recompute-cheap, recompute-all on the default schedule) and the
   swap-only no-search genome, each scored through the GA's packed fast path (ArenaScorer.time_of) and, for
   the recompute ones, the way they were scored before (plan_arena's Action objects packed with
   pack_actions, then simulated): seconds per evaluation, best of `--repeat`, and whether both give the
   same time.

Writes benchmarks/eval_rate.json (with the commit) and prints both tables.

    python -m bench eval-rate [--generations 2] [--models bert-large@batch=32,brnn-4-8k@batch=128]
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


def search_rate(graph, args, recompute: str) -> dict:
    from tvm_swap.planner.api import plan_graph

    t0 = time.perf_counter()
    p = plan_graph(graph, args.mem_limit, args.device, planner="swapadvisor", pool="arena", seed=args.seed,
                   generations=args.generations, workers=1, recompute=recompute)
    s = p.search
    return {"evaluations": s["evaluations"], "search_s": round(s["search_s"], 2),
            "evals_per_s": round(s["evaluations"] / s["search_s"], 3), "wall_s": round(time.perf_counter() - t0, 1),
            "throughput_vs_ideal": p.predicted["throughput_vs_ideal"],
            "recomputes": sum(a.kind == "recompute" for a in p.actions)}


def genome_costs(graph, args) -> list[dict]:
    import numpy as np

    from tvm_swap.cost.roofline import roofline_times
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.simulator import pack_actions, simulate_time
    from tvm_swap.planner.swapadvisor.arena import plan_arena
    from tvm_swap.planner.swapadvisor.ga import Evaluator, GeneticSearch
    from tvm_swap.units import parse_bytes

    dev = get_device(args.device)
    limit = parse_bytes(args.mem_limit)
    ot = np.asarray(roofline_times(graph, dev), dtype=np.float64)
    ev = Evaluator(graph, ot, dev, limit, 256, pool="arena", recompute=True)
    seeds = dict(GeneticSearch(graph, ot, dev, limit, 256, args.seed, evaluator=ev).seed_genomes())
    rows = []
    for name in ("nosearch", "recompute-cheap", "recompute-all"):
        g = seeds.get(name)
        if g is None:
            continue
        packed, t_packed = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            t_packed = ev.time_of(g.schedule, g.alloc)
            packed.append(time.perf_counter() - t0)
        row = {"genome": name, "packed_s": round(min(packed), 3), "time_s": t_packed}
        if g.alloc.recomputes():
            built = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                p = plan_arena(ev.gi, g.schedule, limit, g.alloc, ot, dev)
                t_actions = float(simulate_time(pack_actions(graph, p.actions, ot), dev))
                built.append(time.perf_counter() - t0)
            row.update(actions_s=round(min(built), 3), same_time=t_actions == t_packed,
                       recomputes=sum(a.kind == "recompute" for a in p.actions))
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--generations", type=int, default=2)
    ap.add_argument("--mem-limit", default="16GB")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "eval_rate.json"))
    args = ap.parse_args(argv)
    from tvm_swap.provenance import git_commit
    from tvm_swap.zoo import load_zoo

    rows = []
    for m in args.models.split(","):
        g = load_zoo(f"zoo:{m}")
        r = {"model": m, "search": {rc: search_rate(g, args, rc) for rc in ("off", "on")},
             "genomes": genome_costs(g, args)}
        rows.append(r)
        print(json.dumps(r), flush=True)
    record.write(Path(args.out), {"commit": git_commit(), "device": args.device, "mem_limit": args.mem_limit,
                                          "generations": args.generations, "rows": rows})
    print(f"\n| model | recompute | evaluations ({args.generations} generations, 1 worker) | search s | "
          f"evaluations / s | recomputes in plan | throughput |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        for rc, z in r["search"].items():
            print(f"| {r['model']} | {rc} | {z['evaluations']} | {z['search_s']} | {z['evals_per_s']} | "
                  f"{z['recomputes']} | {z['throughput_vs_ideal']:.3f} |")
    print("\n| model | genome | packed fast path s | via Action objects s (before) | same time |")
    print("|---|---|---|---|---|")
    for r in rows:
        for z in r["genomes"]:
            print(f"| {r['model']} | {z['genome']} | {z['packed_s']} | {z.get('actions_s', '-')} | "
                  f"{z.get('same_time', '-')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
