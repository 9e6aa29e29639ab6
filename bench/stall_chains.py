#!/usr/bin/env python
"""Why a plan's late swap-ins were late: each compute stall traced back through the host-to-device queue to what held up its head.

stall_breakdown names the action each stall waited on last; where that is a swap-in, this says why the swap-in
itself came late: it waited for its bytes (the drop of their previous tenant, and what that drop waited on: the
last reader's kernel or a copy to the host), or it sat behind earlier swap-ins on the link (the h2d stream runs
in issue order), and then what held up the head of that busy stretch of the link. Issue 28: on BRNN-4-8K@64 the
stalls were blamed on fragmentation; this shows whether the bytes (placement) or the link (traffic) held them up.
Then the same actions simulated with some waits for bytes removed (drops not waiting for copies out, swap-ins
not waiting for their bytes, no arrival waiting for its bytes): what each kind of wait costs the plan.

    python -m bench stall-chains zoo:brnn-4-8k@batch=64 --plan plan.json [--windows 14]

--windows N: where in the iteration the stalls are (equal spans of simulated time), beside how busy each link
direction is and how full the arena is there (issue 28: BRNN-4-8K@64 stalled in bursts at its layer boundaries
in the backward pass, with 0.26 s before the first kernels and 0.36 s of copies out after the last one).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

EPS = 1e-12


def _drop_cause(p, sim, tkind, drop: int) -> str:
    """What a drop waited on last: a copy to the host (of which kind of tensor), a kernel, or nothing."""
    from tvm_swap.planner.simulator import COMPUTE, RECOMPUTE, SWAP_OUT

    deps = p.dep_indices[p.dep_indptr[drop]:p.dep_indptr[drop + 1]].tolist()
    if not deps:
        return "nothing"
    last = max(deps, key=lambda x: sim.end[x])
    k = int(p.kind[last])
    if k == SWAP_OUT:
        kind = tkind[p.tensor[last]]
        return f"the copy out of {'an' if kind[0] in 'aeiou' else 'a'} {kind}"
    return {COMPUTE: "its last reader's kernel", RECOMPUTE: "a recompute"}.get(k, "another action")


def _waited_for_bytes(p, sim, a: int, prev_end: float) -> int:
    """The drop that held up swap-in `a` (its latest dep, when that ended at or after the link was free), or -1."""
    deps = p.dep_indices[p.dep_indptr[a]:p.dep_indptr[a + 1]].tolist()
    if not deps:
        return -1
    last = max(deps, key=lambda x: sim.end[x])
    return last if sim.end[last] > 0 and sim.end[last] >= prev_end - EPS else -1


def chains(graph, plan_actions, op_time, device) -> dict:
    """Compute stall seconds by cause: {cause: seconds} (the causes sum to every stall between kernels)."""
    from tvm_swap.planner.simulator import COMPUTE, DROP, RECOMPUTE, SWAP_IN, pack_actions, simulate_packed

    p = pack_actions(graph, plan_actions, op_time)
    sim = simulate_packed(p, device)
    tkind = [t.kind for t in graph.tensors]
    h2d = np.flatnonzero(p.kind == SWAP_IN)          # the link's queue, in issue order
    place = {int(x): k for k, x in enumerate(h2d)}
    out: dict = {}
    prev = 0.0
    for i in np.flatnonzero((p.kind == COMPUTE) | (p.kind == RECOMPUTE)).tolist():
        gap = float(sim.start[i]) - prev
        prev = float(sim.end[i])
        deps = p.dep_indices[p.dep_indptr[i]:p.dep_indptr[i + 1]].tolist()
        if gap <= EPS or not deps:
            continue
        d = max(deps, key=lambda x: sim.end[x])
        if p.kind[d] == DROP:
            why = f"kernel waited for its bytes: drop after {_drop_cause(p, sim, tkind, d)}"
        elif p.kind[d] != SWAP_IN:
            why = "kernel waited on another action"
        else:
            why = _late_swap_in(p, sim, tkind, h2d, place[d])
        out[why] = out.get(why, 0.0) + gap
    return out


def _late_swap_in(p, sim, tkind, h2d, k: int) -> str:
    """Why the k-th swap-in started when it did: its bytes, or the link; for the link, walk back over the copies
    that each started as the one before ended to the head of that busy stretch, and say what held the head up."""
    prev_end = float(sim.end[h2d[k - 1]]) if k > 0 else 0.0
    drop = _waited_for_bytes(p, sim, int(h2d[k]), prev_end)
    if drop >= 0:
        return f"swap-in waited for its bytes: drop after {_drop_cause(p, sim, tkind, drop)}"
    j = k
    while j > 0:
        pe = float(sim.end[h2d[j - 1]])
        if sim.start[h2d[j]] > pe + EPS or _waited_for_bytes(p, sim, int(h2d[j]), pe) >= 0:
            break
        j -= 1
    head_prev = float(sim.end[h2d[j - 1]]) if j > 0 else 0.0
    drop = _waited_for_bytes(p, sim, int(h2d[j]), head_prev)
    if drop < 0:
        return "swap-in behind a link busy from the start of the iteration"
    return f"swap-in behind a busy link whose first copy waited for its bytes: drop after {_drop_cause(p, sim, tkind, drop)}"


def relaxed(graph, plan_actions, op_time, device) -> dict:
    """The plan's simulated seconds with some waits for bytes removed (none is a plan: each says what that wait
    costs): drops not waiting for their copy out (copies to the host never hold bytes), swap-ins not waiting for
    their bytes (prefetch limited by the link alone), and no arrival waiting for its bytes."""
    from tvm_swap.planner.simulator import (COMPUTE, DROP, RECOMPUTE, SWAP_IN, SWAP_OUT, pack_actions, pack_arrays,
                                            simulate_packed)

    p = pack_actions(graph, plan_actions, op_time)
    owner = np.repeat(np.arange(p.num_actions), np.diff(p.dep_indptr))
    dep = p.dep_indices
    cut = {"as planned": np.zeros(len(dep), dtype=bool),
           "drops not waiting for copies out": (p.kind[owner] == DROP) & (p.kind[dep] == SWAP_OUT),
           "swap-ins not waiting for bytes": (p.kind[owner] == SWAP_IN) & (p.kind[dep] == DROP),
           "no arrival waiting for bytes": np.isin(p.kind[owner], (SWAP_IN, COMPUTE, RECOMPUTE)) & (p.kind[dep] == DROP)}
    out = {}
    for name, drop in cut.items():
        keep = ~drop
        indptr = np.concatenate(([0], np.cumsum(np.bincount(owner[keep], minlength=p.num_actions))))
        q = pack_arrays(p.kind, p.work, indptr, dep[keep], p.tensor, p.obj, p.op)
        out[name] = simulate_packed(q, device).time_s
    return out


def windows(plan, graph, op_time, device, n: int) -> list[dict]:
    """The iteration cut into `n` equal spans of simulated time; per span: the compute stalls of the kernels that
    start in it, how busy each copy direction is and the bytes it moves, and the most an arena plan's live objects
    hold after one of those kernels (where in the iteration it stalls, and whether the link or the room is full
    there)."""
    from tvm_swap.planner.arena_usage import held_after_kernels
    from tvm_swap.planner.simulator import COMPUTE, RECOMPUTE, SWAP_IN, SWAP_OUT, pack_actions, simulate_packed

    p = pack_actions(graph, plan.actions, op_time)
    sim = simulate_packed(p, device)
    edges = np.linspace(0.0, sim.time_s, n + 1)
    kern = np.flatnonzero((p.kind == COMPUTE) | (p.kind == RECOMPUTE))
    ks, ke = sim.start[kern], sim.end[kern]
    stall = ks - np.concatenate(([0.0], ke[:-1]))
    held = held_after_kernels(plan) if hasattr(plan.pool, "arena_bytes") else np.zeros(len(kern), dtype=np.int64)
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        row = {"from_s": float(lo), "to_s": float(hi)}
        m = (ks >= lo) & (ks < hi)
        row["stall_s"] = float(stall[m].sum())
        for name, code in (("h2d", SWAP_IN), ("d2h", SWAP_OUT)):
            a = p.kind == code
            s, e = sim.start[a], sim.end[a]
            inside = np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0.0, None)
            row[f"{name}_busy"] = float(inside.sum() / (hi - lo))
            row[f"{name}_gb"] = float((p.work[a] * inside / np.maximum(e - s, 1e-12)).sum() / 1e9)
        row["held_gib"] = float(held[m].max(initial=0) / 2 ** 30)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    from tvm_swap.cost.devices import get_device
    from tvm_swap.plan import Plan
    from tvm_swap.planner.api import resolve_op_time
    from tvm_swap.planner.bounds import ideal_time
    from tvm_swap.zoo import load_zoo

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph", help="zoo:NAME@batch=B (the plan's graph)")
    ap.add_argument("--plan", required=True, help="a plan JSON (tvm-swap plan ... -o plan.json)")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--windows", type=int, default=0, help="also the iteration in this many spans of time: stalls, "
                    "link busy and arena bytes held in each")
    args = ap.parse_args(argv)
    graph = load_zoo(args.graph)
    dev = get_device(args.device)
    op_time = resolve_op_time(graph, dev, None)
    plan = Plan.load(args.plan)
    actions = plan.actions
    got = chains(graph, actions, op_time, dev)
    ideal = ideal_time(graph, op_time)
    print(f"{args.plan}: ideal {ideal:.3f} s, compute stalls {sum(got.values()):.3f} s")
    for why, s in sorted(got.items(), key=lambda kv: -kv[1]):
        print(f"  {s:8.3f} s  {why}")
    print("the same actions with waits for bytes removed (fraction of ideal):")
    for name, t in relaxed(graph, actions, op_time, dev).items():
        print(f"  {ideal / t:.3f}  {name}")
    if args.windows:
        print("| from s | to s | stall s | h2d busy | d2h busy | h2d GB | d2h GB | arena held GiB (most) |")
        print("|---|---|---|---|---|---|---|---|")
        for r in windows(plan, graph, op_time, dev, args.windows):
            print(f"| {r['from_s']:.2f} | {r['to_s']:.2f} | {r['stall_s']:.3f} | {r['h2d_busy']:.0%} | "
                  f"{r['d2h_busy']:.0%} | {r['h2d_gb']:.1f} | {r['d2h_gb']:.1f} | {r['held_gib']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
