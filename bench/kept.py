#!/usr/bin/env python
"""Kept updated params in the arena (issues 10 and 15): swapadvisor's plans at a fixed search, for one checkout.

Each case plans one graph under one limit with swapadvisor (seed 0, `--generations` GA generations, one
process) in the arena pool, and, where asked, in the size-class pool, and prints throughput vs ideal, bytes
copied each way, the longest renaming cycle of the arena (2: ping-pong pairs only; more: a rotation) and the
planning time. `--tree PATH` plans with another checkout's tvm_swap (e.g. main), so two trees can be run
side by side under the same load; the JSON records that tree's commit.

    python -m bench kept --generations 3                       # this tree, the default cases
    python -m bench kept --generations 3 --tree /work/main --out /tmp/main.json
    python -m bench kept --cases "example:mlp-train:100%:v100-16gb:arena"
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

# SOURCE:LIMIT:DEVICE:POOLS (pools joined by +)
DEFAULT_CASES = ["example:mlp-train:100%:v100-16gb:arena",
                 "zoo:llama-7b@batch=4,seq=4096:141GB:h200:arena+size-classes",
                 "zoo:llama-7b@batch=4,seq=4096:80GB:h200:arena+size-classes",
                 "zoo:llama-13b@batch=1,seq=4096:141GB:h200:arena+size-classes",
                 "zoo:bert-large@batch=32:16GB:v100-16gb:arena",
                 "zoo:wresnet-152-10@batch=64:16GB:v100-16gb:arena"]


def load_graph(source: str):
    if source.startswith("example:"):
        from relay_passes.lower import lower
        from tvm_swap.examples import EXAMPLES
        from tvm_swap.graph import from_relax

        name = source.split(":", 1)[1]
        return from_relax(lower(EXAMPLES[name]().mod, target="llvm"), name=name)
    from tvm_swap.zoo import load_zoo

    return load_zoo(source)


def run_case(case: str, generations: int) -> list[dict]:
    from tvm_swap.planner import plan_graph
    from tvm_swap.planner.bounds import noswap_peak
    from tvm_swap.units import parse_limit

    source, limit_text, device, pools = case.rsplit(":", 3)
    g = load_graph(source)
    need = noswap_peak(g)
    limit = limit_text if limit_text.endswith("%") else int(parse_limit(limit_text))   # %: plan_graph's rule
    rows = []
    for pool in pools.split("+"):
        t0 = time.perf_counter()
        p = plan_graph(g, limit, device=device, planner="swapadvisor", generations=generations, workers=1, pool=pool)
        pr = p.predicted
        swaps = getattr(p.pool, "swaps", [])
        rows.append({"case": source, "limit": limit_text, "mem_limit_bytes": int(p.mem_limit), "need_bytes": need,
                     "device": device, "pool": pool, "plan_s": round(time.perf_counter() - t0, 2),
                     "time_s": pr["time_s"], "throughput_vs_ideal": pr["throughput_vs_ideal"],
                     "swap_in_bytes": pr["swap_in_bytes"], "swap_out_bytes": pr["swap_out_bytes"],
                     "longest_cycle": max(map(len, swaps), default=0), "cycles": len(swaps),
                     "evaluations": (p.search or {}).get("evaluations"), "ops": g.num_ops,
                     "search_s": (p.search or {}).get("search_s"), "verified": p.verified})
        r = rows[-1]
        print(f"{source:<36} {limit_text:>6} {pool:<12} {r['throughput_vs_ideal']:>7.3f} {r['time_s'] * 1e3:>10.4f} ms "
              f"in {r['swap_in_bytes'] / 1e6:>10.3f} MB out {r['swap_out_bytes'] / 1e6:>10.3f} MB "
              f"cycle {r['longest_cycle']:>4} plan {r['plan_s']:>7.1f}s ({r['evaluations']} evaluations, "
              f"{g.num_ops} ops)", flush=True)
    return rows


def per_eval(case: str, repeat: int) -> list[dict]:
    """Seconds per evaluation of the GA's fitness (ArenaScorer.time_of: walk, placement, packed simulation) for
    the arena seeds on the default schedule that do or do not keep updated params, best of `repeat`."""
    from tvm_swap.cost.devices import get_device
    from tvm_swap.cost.roofline import roofline_times
    from tvm_swap.planner.graphindex import GraphIndex
    from tvm_swap.planner.swapadvisor.arena import ArenaScorer, ArenaSpace
    from tvm_swap.units import parse_limit

    source, limit_text, device_name = case.rsplit(":", 2)
    g = load_graph(source)
    dev = get_device(device_name)
    limit = int(parse_limit(limit_text))
    gi = GraphIndex.build(g, 256, keep_updated=False)
    op_time = roofline_times(g, dev)
    scorer = ArenaScorer(gi, limit, op_time, dev)
    space = ArenaSpace(gi, limit, op_time=op_time, device=dev)
    sched = gi.default_schedule()
    rows = []
    for name, genes in space.seeds():
        if name not in ("nosearch", "keep50", "keepall", "keepall-evictable"):
            continue
        best, t = float("inf"), None
        for _ in range(repeat):
            t0 = time.perf_counter()
            t = scorer.time_of(sched, genes)
            best = min(best, time.perf_counter() - t0)
        rows.append({"case": source, "limit": limit_text, "ops": g.num_ops, "seed_genome": name,
                     "eval_s": round(best, 4), "simulated_s": t})
        print(f"{source:<36} {limit_text:>6} {g.num_ops:>6} ops  {name:<18} {best:>8.3f} s per evaluation "
              f"(simulated {t:.4f} s)", flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="*", default=DEFAULT_CASES, help="SOURCE:LIMIT:DEVICE:POOLS (none: skip)")
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--tree", default=str(ROOT), help="the checkout whose tvm_swap plans (default: this one)")
    ap.add_argument("--out", default=None, help="JSON output (default: print only)")
    ap.add_argument("--per-eval", nargs="*", default=[], metavar="SOURCE:LIMIT:DEVICE",
                    help="also time one fitness evaluation of the arena seeds on these (e.g. zoo:nasnet-25@batch=16:"
                         "16GB:v100-16gb, 12k ops)")
    ap.add_argument("--repeat", type=int, default=3, help="per-eval: best of this many")
    args = ap.parse_args(argv)
    tree = str(Path(args.tree).resolve())
    sys.path.insert(0, tree)
    import tvm_swap

    if not str(Path(tvm_swap.__file__).resolve()).startswith(tree):
        raise SystemExit(f"tvm_swap comes from {tvm_swap.__file__}, not {tree}: clear PYTHONPATH")
    commit = subprocess.run(["git", "-C", tree, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"tree {tree} at {commit[:10]}, {args.generations} generations, seed 0", flush=True)
    rows = [r for case in args.cases for r in run_case(case, args.generations)]
    evals = [r for case in args.per_eval for r in per_eval(case, args.repeat)]
    if args.out:
        doc = {"benchmark": "bench_kept", "tree": tree, "git_commit": commit, "generations": args.generations,
               "machine": platform.platform(), "cpus": os.cpu_count(), "load": os.getloadavg(), "rows": rows,
               "per_eval": evals}
        record.write(Path(args.out), doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
