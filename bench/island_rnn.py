#!/usr/bin/env python
"""One swapadvisor point in both pools, for the size-class island's guarantee (issue 10): RNN-8-8K@128 at 56% of its
no-swap need (bench.paper's sweep point, 59293301071 bytes, v100-16gb), 3 GA generations, seed 0, one process.
Prints a row per pool (time, throughput vs ideal, updated params kept, renaming cycles, islands' best times) and
writes JSON with the commit of the tvm_swap that planned (run it with PYTHONPATH set to the tree to measure).

    PYTHONPATH=/work/main python -m bench island-rnn --pools arena --out /tmp/main.json
    python -m bench island-rnn --pools size-classes,arena --out benchmarks/kept/island_rnn_arena8.json
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="zoo:rnn-8-8k@batch=128")
    ap.add_argument("--limit", type=int, default=59293301071, help="bytes (default: the 56%% sweep point)")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--pools", default="size-classes,arena")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import tvm_swap
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.zoo import load_zoo

    tree = os.path.dirname(os.path.dirname(tvm_swap.__file__))
    commit = subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    g = load_zoo(args.graph)
    out = {"tree": tree, "commit": commit, "graph": args.graph, "limit": args.limit, "device": args.device,
           "generations": args.generations, "load": os.getloadavg(), "rows": []}
    print(f"tree {tree} at {commit}, {args.graph} at {args.limit} bytes, {args.generations} generations, seed 0")
    for pool in args.pools.split(","):
        t0 = time.perf_counter()
        p = plan_graph(g, args.limit, get_device(args.device), planner="swapadvisor", generations=args.generations,
                       seed=0, workers=1, pool=pool)
        kept = {t for t, _ in p.initial_residents} & set(g.updates.values())
        row = {"pool": pool, "time_s": p.predicted["time_s"],
               "throughput_vs_ideal": p.predicted.get("throughput_vs_ideal"), "verified": p.verified,
               "kept_updated_params": len(kept), "swaps": len(getattr(p.pool, "swaps", []) or []),
               "islands": p.search.get("islands"), "wall_s": round(time.perf_counter() - t0, 1),
               "in_GB": p.predicted.get("swap_in_bytes", 0) / 1e9, "out_GB": p.predicted.get("swap_out_bytes", 0) / 1e9}
        print(json.dumps(row), flush=True)
        out["rows"].append(row)
    if args.out:
        from bench import record
        record.write(args.out, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
