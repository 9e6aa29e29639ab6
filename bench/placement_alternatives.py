#!/usr/bin/env python
"""The arena's placements side by side on one walk's decisions: bytes each needs and the simulated fraction of ideal where it fits, at several walk capacities.

Issue 28 blamed BRNN-4-8K@64's gap on fragmentation (the decide/place rounds lower the walk's capacity until the
sweep fits). For one zoo point, one seed genome of the arena search (ArenaSpace.seeds) and the default schedule,
it walks at each capacity (a fraction of the arena) and places the same decisions with: the sweep
(placement.place_stays), greedy by size (place_by_size), clean-first (place_stays_clean with cooling.cooled_lasts),
the sweep and greedy by size with every swapped-out stay kept until its copy ends (cooled), and every stay in bytes
of its own (no reuse: not a placement, it ignores the arena's size; what the decisions would take with no
arrival ever waiting for a previous tenant). Each column: bytes needed in GiB, `=fraction of ideal` where it fits.

    python -m bench placement-alternatives zoo:brnn-4-8k@batch=64 --seed-genome nosearch --out benchmarks/placement_alternatives.json
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

GIB = 2 ** 30
CAPACITIES = "1.0,0.97,0.9,0.85,0.82,0.8,0.75"


def placements(walk, d, arena_bytes: int) -> dict:
    """name -> (offsets, bytes needed) for one walk's decisions."""
    from tvm_swap.planner.swapadvisor.arena.cooling import cooled_lasts
    from tvm_swap.planner.swapadvisor.arena.decisions import floored_firsts
    from tvm_swap.planner.swapadvisor.placement import place_by_size, place_stays, place_stays_clean

    first, last = floored_firsts(d), d.stay_last
    size = [walk.size[t] for t in d.stay_t]
    cool = cooled_lasts(walk, d)
    own = np.concatenate(([0], np.cumsum(size)[:-1])).tolist() if size else []
    return {"sweep": place_stays(first, last, size), "greedy by size": place_by_size(first, last, size),
            "clean-first": place_stays_clean(first, last, cool, size, arena_bytes),
            "cooled sweep": place_stays(first, cool, size), "cooled by size": place_by_size(first, cool, size),
            "no reuse": (own, -1)}


def main(argv=None) -> int:
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import resolve_op_time
    from tvm_swap.planner.bounds import ideal_time
    from tvm_swap.planner.graphindex import GraphIndex
    from tvm_swap.planner.swapadvisor.arena import ArenaSpace
    from tvm_swap.planner.swapadvisor.arena.capacity import arena_bytes_for
    from tvm_swap.planner.swapadvisor.arena.decide import make_judge
    from tvm_swap.planner.swapadvisor.arena.decisions import WalkInputs
    from tvm_swap.planner.swapadvisor.arena.walk import ArenaWalk
    from tvm_swap.units import parse_bytes
    from tvm_swap.zoo import load_zoo

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--mem-limit", default="16GB")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--seed-genome", default="nosearch", help="an ArenaSpace seed name")
    ap.add_argument("--capacities", default=CAPACITIES, help="walk capacities as fractions of the arena")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    graph = load_zoo(args.graph)
    dev = get_device(args.device)
    limit = parse_bytes(args.mem_limit)
    op_time = resolve_op_time(graph, dev, None)
    ideal = ideal_time(graph, op_time)
    gi = GraphIndex.build(graph, 256, keep_updated=False)
    sched = gi.default_schedule()
    arena = arena_bytes_for(gi, limit)
    genes = dict(ArenaSpace(gi, limit, recompute=True, op_time=op_time, device=dev).seeds())[args.seed_genome]
    walk = ArenaWalk(gi, sched)
    walk.set_timing(op_time, dev.d2h_bandwidth)
    judge = make_judge(gi, sched, op_time, dev)
    rows = []
    print(f"{args.graph} under {args.mem_limit} ({arena / GIB:.2f} GiB arena), seed genome {args.seed_genome}, "
          f"default schedule")
    for frac in (float(x) for x in args.capacities.split(",")):
        cap = int(arena * frac) // gi.alignment * gi.alignment
        d = WalkInputs(genes.bias.tolist(), (), [], genes).run(walk, cap)
        size = [walk.size[t] for t in d.stay_t]
        row = {"capacity_bytes": cap, "evictions": d.evicted, "recomputes": len(d.recomputes), "placements": {}}
        cells = []
        for name, (off, need) in placements(walk, d, arena).items():
            fits = need <= arena
            frac_ideal = ideal / judge(d, off, size) if fits else None
            row["placements"][name] = {"need_bytes": int(need), "throughput_vs_ideal": frac_ideal}
            cells.append(f"{name} " + ("" if need < 0 else f"{need / GIB:.2f}")
                         + ("" if frac_ideal is None else f"={frac_ideal:.3f}"))
        rows.append(row)
        print(f"capacity {cap / GIB:.2f} GiB, {d.evicted} evictions: " + ", ".join(cells), flush=True)
    if args.out:
        from bench import record

        record.write(args.out, {"graph": args.graph, "mem_limit": args.mem_limit, "device": args.device,
                                "seed_genome": args.seed_genome, "arena_bytes": arena, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
