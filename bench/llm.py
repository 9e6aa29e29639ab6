#!/usr/bin/env python
"""Llama training steps planned on one H200 with the existing planners: throughput vs ideal and bytes moved.

Workloads (tvm_swap.zoo.llm: bf16 weights/activations/grads, fp32 master weights and AdamW state):
Llama-7B at seq 4096 at 141 GB (the whole H200) and 80 GB (an H100's worth), Llama-13B at 141 GB.
For each: the no-swap need (bounds.noswap_peak: every tensor kept, updates next to the values they
replace), then swapadvisor-nosearch, odswap, vdnn, zero-offload (DeepSpeed's ZeRO-Offload: fp32 master
weights and optimizer state on the host, the optimizer run there, gradients out and weights in) and
swapadvisor (GA, --budget seconds, one process),
each plan verified by plan_graph. Prints a table and writes benchmarks/llm.json with the git commit.

    python -m bench llm                      # ~10 minutes on 2 cores
    python -m bench llm --budget 30 --cases llama-7b@batch=4,seq=4096:80GB
    python -m bench llm --generations 2 --planners swapadvisor --pool arena   # a fixed search
    python -m bench llm --host-ops auto      # swapadvisor with the optimizer's updates on the host
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_CASES = ["llama-7b@batch=4,seq=4096:141GB", "llama-7b@batch=4,seq=4096:80GB",
                 "llama-13b@batch=1,seq=4096:141GB"]
PLANNERS = ["swapadvisor-nosearch", "odswap", "vdnn", "zero-offload", "swapadvisor"]


def run_case(case: str, budget: float, device: str, planners=PLANNERS, pool: str | None = None,
             generations: int | None = None, host_ops: str | None = None) -> list[dict]:
    from tvm_swap.errors import InfeasibleLimitError
    from tvm_swap.planner import plan_graph
    from tvm_swap.planner.bounds import noswap_peak
    from tvm_swap.units import parse_limit
    from tvm_swap.zoo import load_zoo

    spec, _, limit_text = case.rpartition(":")
    g = load_zoo("zoo:" + spec)
    limit = int(parse_limit(limit_text))
    need = noswap_peak(g)
    rows = []
    for planner in planners:
        t0 = time.perf_counter()
        row = {"model": spec, "limit": limit_text, "mem_limit_bytes": limit, "need_bytes": need, "planner": planner,
               "ops": g.num_ops, "pool": pool}
        try:
            kw = {"pool": pool} if pool and planner.startswith("swapadvisor") else {}
            if host_ops and planner.startswith("swapadvisor"):
                kw["host_ops"] = host_ops
            p = plan_graph(g, limit, device=device, planner=planner, budget_s=budget, workers=1,
                           generations=generations if planner == "swapadvisor" else None, **kw)
        except InfeasibleLimitError as e:
            row["error"] = str(e)
            rows.append(row)
            continue
        pr = p.predicted
        row.update({"plan_s": time.perf_counter() - t0, "time_s": pr["time_s"], "ideal_time_s": pr["ideal_time_s"],
                    "lower_bound_s": pr["lower_bound_s"], "throughput_vs_ideal": pr["throughput_vs_ideal"],
                    "swap_in_bytes": pr["swap_in_bytes"], "swap_out_bytes": pr["swap_out_bytes"],
                    "peak_bytes": pr["peak_bytes"], "generations": (p.search or {}).get("generations"),
                    "tight_lower_bound_s": pr.get("tight_lower_bound_s"), "host_ops": len(p.host_ops),
                    "host": pr.get("host")})
        rows.append(row)
        print(f"{spec} {limit_text} {planner}: {row['throughput_vs_ideal']:.3f} of ideal", file=sys.stderr, flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=DEFAULT_CASES, help="MODEL@OPTIONS:LIMIT")
    ap.add_argument("--budget", type=float, default=60.0, help="swapadvisor search seconds per case")
    ap.add_argument("--generations", type=int, default=None,
                    help="swapadvisor: exactly this many GA generations instead of --budget (load does not change "
                         "the plan)")
    ap.add_argument("--device", default="h200")
    ap.add_argument("--planners", nargs="+", default=PLANNERS, help="planners to run (default: all)")
    ap.add_argument("--pool", choices=("arena", "size-classes"), default=None,
                    help="the search planners' memory model (default: theirs)")
    ap.add_argument("--host-ops", choices=("optimizer", "auto"), default=None,
                    help="swapadvisor planners: run the optimizer's updates on the host (all, or the placement "
                         "the search finds from the policy's candidates; tvm_swap/planner/host_policy.py)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "llm.json"))
    args = ap.parse_args(argv)
    rows = [r for case in args.cases
            for r in run_case(case, args.budget, args.device, args.planners, args.pool, args.generations,
                              args.host_ops)]
    from tvm_swap.cost.devices import get_device

    dev = get_device(args.device)
    if dev.host:
        from tvm_swap.cost.devices import HOSTS

        print(f"\nhost (ops placed on it): {HOSTS[dev.host].description}")
    print(f"\n{'model':<28} {'limit':>6} {'need GB':>8} {'planner':<21} {'time s':>8} {'ideal s':>8} "
          f"{'vs ideal':>9} {'in GB':>7} {'out GB':>7} {'peak GB':>8} {'bound s':>8} {'/bound':>7} {'host ops':>8}")
    for r in rows:
        head = f"{r['model']:<28} {r['limit']:>6} {r['need_bytes'] / 1e9:>8.1f} {r['planner']:<21}"
        if "error" in r:
            print(f"{head} infeasible: {r['error'][:60]}")
            continue
        tb = r.get("tight_lower_bound_s")
        print(f"{head} {r['time_s']:>8.2f} {r['ideal_time_s']:>8.2f} {r['throughput_vs_ideal']:>9.3f} "
              f"{r['swap_in_bytes'] / 1e9:>7.1f} {r['swap_out_bytes'] / 1e9:>7.1f} {r['peak_bytes'] / 1e9:>8.1f} "
              + (f"{tb:>8.3f} {r['time_s'] / tb:>7.2f}" if tb else f"{'-':>8} {'-':>7}")
              + f" {r.get('host_ops', 0):>8}")
    from tvm_swap.provenance import git_commit
    commit = git_commit(short=False)
    doc = {"benchmark": "bench_llm", "git_commit": commit, "machine": platform.platform(), "cpus": os.cpu_count(),
           "device": args.device, "budget_s": args.budget, "generations": args.generations, "host_ops": args.host_ops,
           "host": dev.host or None, "rows": rows}
    record.write(Path(args.out), doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
