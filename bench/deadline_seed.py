#!/usr/bin/env python
"""Each seed genome of a zoo point timed on the graph order and on its update-deadline order (no search), and a plan's genome on both.

Issue 28: BRNN-4-8K@64 stalled at its backward layer boundaries, where both directions' transposed weights and
gradient accumulators held the arena while their updates' copies and the next layer's weights crossed the link.
The deadline order (tvm_swap/planner/swapadvisor/deadline_order.py) runs each update's chain to the end before
the next (the polish moves the search's best genome onto it: polish_schedule.py): this shows what that order is
worth for each memory seed of the search (the arena islands' and the size-class island's), and, with --plan, for
a plan's own pool (a size-class plan's classes and counts, plain and on the wrap index) on its own schedule, the
graph order and the deadline order of both.

    python -m bench deadline-seed zoo:brnn-4-8k@batch=64 [--plan plan.json] [--out benchmarks/deadline_seed.json]
"""
from __future__ import annotations

import argparse
import json
import time
from collections import Counter

import numpy as np


def _plan_rows(graph, ev, plan_path: str) -> list[dict]:
    """A size-class plan's pool (its arena objects' sizes and counts), plain and over the wrap index, on the plan's
    schedule, the graph order and the deadline orders of both."""
    from tvm_swap.planner.swapadvisor.deadline_order import deadline_schedule
    from tvm_swap.planner.swapadvisor.encoding import Allocation, WrapAllocation

    doc = json.loads(open(plan_path).read())
    sizes = Counter(s for _, s in doc["pool"]["objects"])
    cb = np.array(sorted(sizes))
    cnt = np.array([sizes[s] for s in cb], dtype=np.int64)
    gi = ev.gi
    cls = np.searchsorted(cb, gi.ts, side="left").astype(np.int64)
    own = np.asarray(doc["schedule"], dtype=np.int64)
    rows = []
    for kind in (Allocation, WrapAllocation):
        for name, sched in (("its schedule", own), ("graph order", gi.default_schedule()),
                            ("deadline order of its schedule", deadline_schedule(gi, own)),
                            ("deadline order of the graph order", deadline_schedule(gi, gi.default_schedule()))):
            rows.append({"seed": f"plan's pool ({kind.__name__}), {name}", "time_s": ev.time_of(sched, kind(cls, cnt))})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graph", help="zoo:NAME@batch=B")
    ap.add_argument("--mem-limit", default="16GB")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--plan", default=None, help="a size-class plan (tvm-swap plan -o) whose pool to time too")
    ap.add_argument("--out", default=None, help="JSON result (through bench.record)")
    args = ap.parse_args(argv)

    from tvm_swap.cost.devices import get_device
    from tvm_swap.frontends.sources import load_graph
    from tvm_swap.planner.api import resolve_op_time
    from tvm_swap.planner.bounds import ideal_time
    from tvm_swap.planner.swapadvisor.deadline_order import deadline_schedule
    from tvm_swap.planner.swapadvisor.encoding import AllocationSpace
    from tvm_swap.planner.swapadvisor.ga import Evaluator, GeneticSearch
    from tvm_swap.units import parse_bytes

    graph = load_graph(args.graph)
    dev = get_device(args.device)
    op_time = resolve_op_time(graph, dev, None)
    limit = parse_bytes(args.mem_limit)
    ideal = float(ideal_time(graph, op_time))
    t0 = time.process_time()
    ev = Evaluator(graph, op_time, dev, limit, 256, pool="arena", recompute=True)
    searches = [("arena", GeneticSearch(graph, op_time, dev, limit, 256, evaluator=ev)),
                ("size classes", GeneticSearch(graph, op_time, dev, limit, 256, evaluator=ev,
                                               space=AllocationSpace(ev.gi, limit)))]
    rows = []
    for where, gs in searches:
        for name, g in gs.seed_genomes():
            if "+" in name:                     # (the seeds on the graph order only)
                continue
            rows.append({"seed": f"{where}: {name}", "graph_order_s": ev.time_of(g.schedule, g.alloc),
                         "deadline_s": ev.time_of(deadline_schedule(ev.gi, g.schedule), g.alloc)})
    plan_rows = _plan_rows(graph, ev, args.plan) if args.plan else []
    cpu = time.process_time() - t0
    print(f"{args.graph} at {args.mem_limit} on {args.device}: ideal {ideal:.3f} s ({cpu:.0f} CPU s)")
    print("| seed | graph order s | of ideal | deadline order s | of ideal |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['seed']} | {r['graph_order_s']:.3f} | {ideal / r['graph_order_s']:.3f} | "
              f"{r['deadline_s']:.3f} | {ideal / r['deadline_s']:.3f} |")
    for r in plan_rows:
        print(f"| {r['seed']} | {r['time_s']:.3f} | {ideal / r['time_s']:.3f} | | |")
    if args.out:
        from bench import record

        record.write(args.out, {"graph": args.graph, "mem_limit": args.mem_limit, "device": args.device,
                                "ideal_time_s": ideal, "cpu_s": round(cpu, 1), "seeds": rows, "plan": plan_rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
