#!/usr/bin/env python
"""Where a planned iteration's time goes: compute busy, compute stalls and what each waits on, link traffic by
tensor kind, next to the tight bound.

For one zoo point and limit it plans the arena seed genomes (no search; or a plan JSON with --plan) on the
default schedule, simulates each and prints:
- time, ideal, compute busy, stalls (compute idle between kernels), split by the action each stall waited on
  last: a swap-in not yet arrived (h2d; by the arriving tensor's kind) or a drop whose swap-out was still on
  the d2h link (by the kind of the tensor copied out);
- bytes and copies each way by tensor kind (param, optimizer_state, activation, gradient, ...);
- stalls per tenth of the schedule.

    python -m bench stall-breakdown zoo:bert-large@batch=16 --mem-limit 16GB
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def breakdown(graph, plan_actions, op_time, device) -> dict:
    """The numbers above for one list of Actions."""
    from tvm_swap.planner.simulator import COMPUTE, DROP, RECOMPUTE, SWAP_IN, SWAP_OUT, pack_actions, simulate_packed

    p = pack_actions(graph, plan_actions, op_time)
    sim = simulate_packed(p, device)
    kind = p.kind
    tb = graph.tensor_bytes()
    tkind = [t.kind for t in graph.tensors]
    indptr, dep = p.dep_indptr, p.dep_indices
    kern = np.flatnonzero((kind == COMPUTE) | (kind == RECOMPUTE))
    stalls: dict = {}
    per_tenth = np.zeros(10)
    prev_end = 0.0
    for j, i in enumerate(kern.tolist()):
        st = float(sim.start[i])
        gap = st - prev_end
        prev_end = float(sim.end[i])
        if gap <= 1e-12:
            continue
        per_tenth[min(9, j * 10 // len(kern))] += gap
        # the dep that ended last (through drops: what the drop waited on)
        best, why = -1.0, "?"
        for d in dep[indptr[i]:indptr[i + 1]].tolist():
            e = float(sim.end[d])
            if e <= best:
                continue
            best = e
            if kind[d] == SWAP_IN:
                why = f"swap-in of {tkind[p.tensor[d]]}"
            elif kind[d] == DROP:
                sub = dep[indptr[d]:indptr[d + 1]].tolist()
                last = max(sub, key=lambda x: sim.end[x]) if sub else -1
                if last >= 0 and kind[last] == SWAP_OUT:
                    why = f"drop waiting on swap-out of {tkind[p.tensor[last]]}"
                else:
                    why = "drop (other)"
            else:
                why = "other"
        stalls[why] = stalls.get(why, 0.0) + gap
    traffic: dict = {}
    for code, name in ((SWAP_OUT, "out"), (SWAP_IN, "in")):
        for i in np.flatnonzero(kind == code).tolist():
            t = int(p.tensor[i])
            k = (name, tkind[t])
            n, b = traffic.get(k, (0, 0))
            traffic[k] = (n + 1, b + int(tb[t]))
    return {"time_s": sim.time_s, "compute_s": sim.stream_busy_s["compute"], "d2h_s": sim.stream_busy_s["d2h"],
            "h2d_s": sim.stream_busy_s["h2d"], "stalls": stalls, "per_tenth": per_tenth.tolist(),
            "traffic": traffic, "recomputes": int((kind == RECOMPUTE).sum())}


def show(name: str, r: dict, ideal: float) -> None:
    gib = 2 ** 30
    print(f"== {name}: {r['time_s']:.3f} s ({ideal / r['time_s']:.3f} of ideal); compute busy {r['compute_s']:.3f} s, "
          f"d2h {r['d2h_s']:.3f} s, h2d {r['h2d_s']:.3f} s, recomputes {r['recomputes']}")
    tot = sum(r["stalls"].values())
    print(f"   stalls {tot:.3f} s:")
    for k, v in sorted(r["stalls"].items(), key=lambda kv: -kv[1]):
        print(f"     {v:8.3f} s  {k}")
    print("   stalls by tenth: " + " ".join(f"{x:.2f}" for x in r["per_tenth"]))
    for (d, k), (n, b) in sorted(r["traffic"].items()):
        print(f"   {d:3s} {k:16s} {n:6d} copies {b / gib:8.2f} GiB")


def main(argv=None) -> int:
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import resolve_op_time
    from tvm_swap.planner.bounds import ideal_time
    from tvm_swap.planner.graphindex import GraphIndex
    from tvm_swap.planner.swapadvisor.arena import ArenaSpace, plan_arena
    from tvm_swap.units import parse_bytes
    from tvm_swap.zoo import load_zoo

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--mem-limit", default="16GB")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--seeds", default="nosearch,recompute-cheap,recompute-memory-bound",
                    help="comma list of ArenaSpace seed names")
    ap.add_argument("--plan", default=None, help="a plan JSON to break down instead")
    args = ap.parse_args(argv)
    graph = load_zoo(args.graph)
    dev = get_device(args.device)
    limit = parse_bytes(args.mem_limit)
    op_time = resolve_op_time(graph, dev, None)
    ideal = ideal_time(graph, op_time)
    if args.plan:
        from tvm_swap.plan import Plan

        show(args.plan, breakdown(graph, Plan.load(args.plan).actions, op_time, dev), ideal)
        return 0
    gi = GraphIndex.build(graph, 256, keep_updated=False)
    space = ArenaSpace(gi, limit, recompute=True, op_time=op_time, device=dev)
    seeds = dict(space.seeds())
    for name in args.seeds.split(","):
        ap_ = plan_arena(gi, gi.default_schedule(), limit, seeds[name], op_time, dev)
        show(name, breakdown(graph, ap_.actions, op_time, dev), ideal)
        print(f"   stats {ap_.stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
