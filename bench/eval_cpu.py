#!/usr/bin/env python
"""CPU seconds per evaluation of one genome on the large graphs, this tree beside another (issue 28).

For each model, each tree (this one and --base) times the same first-generation seed genomes through the GA's
evaluator (Evaluator.time_of, what a worker runs per candidate), in its own process (the tree's package first on
sys.path), the trees taking turns model by model so machine load falls on both alike. The first evaluation is
not timed (numba's compile and load). CPU seconds (process_time), so other processes' load counts less than in
wall-clock time; the predicted time of every genome is printed too: equal in both trees where a change only
made evaluations cheaper.

Writes benchmarks/eval_cpu.json (with the commit) and prints the table.

    python -m bench eval-cpu --base /work/base [--models nasnet-25@batch=16,bert-large@batch=32]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["nasnet-25@batch=16", "bert-large@batch=32"]
GENOMES = ["nosearch", "keep50", "keepall", "hot+keepall", "keepall-evictable", "recompute-cheap",
           "recompute-memory-bound", "free+recompute-memory-bound"]

CHILD = r"""
import json, sys, time
import numpy as np
from tvm_swap.cost.roofline import roofline_times
from tvm_swap.cost.devices import get_device
from tvm_swap.planner.swapadvisor.ga import Evaluator, GeneticSearch
from tvm_swap.units import parse_bytes
from tvm_swap.zoo import load_zoo
spec, mem, device, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
g = load_zoo("zoo:" + spec)
dev = get_device(device)
limit = parse_bytes(mem)
ot = np.asarray(roofline_times(g, dev), dtype=np.float64)
ev = Evaluator(g, ot, dev, limit, 256, pool="arena", recompute=True)
seeds = dict(GeneticSearch(g, ot, dev, limit, 256, 0, evaluator=ev).seed_genomes())
names = [n for n in names if n in seeds]
ev.time_of(seeds[names[0]].schedule, seeds[names[0]].alloc)
rows = []
for n in names:
    t0 = time.process_time()
    t = ev.time_of(seeds[n].schedule, seeds[n].alloc)
    rows.append({"genome": n, "cpu_s": time.process_time() - t0, "time_s": t})
print("RESULT " + json.dumps(rows))
"""


def run_tree(tree: str, model: str, args) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, "-c", CHILD, model, args.mem_limit, args.device, args.genomes],
                         env=env, cwd=tree, capture_output=True, text=True, check=True).stdout
    return json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT "))[7:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="the other tree (a checkout's root)")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--genomes", default=",".join(GENOMES))
    ap.add_argument("--mem-limit", default="16GB")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "eval_cpu.json"))
    args = ap.parse_args(argv)
    from tvm_swap.provenance import git_commit

    rows = []
    for m in args.models.split(","):
        base, new = run_tree(args.base, m, args), run_tree(str(ROOT), m, args)
        for b, n in zip(base, new):
            rows.append({"model": m, "genome": b["genome"], "base_cpu_s": round(b["cpu_s"], 3),
                         "cpu_s": round(n["cpu_s"], 3), "base_time_s": b["time_s"], "time_s": n["time_s"]})
    from bench import record     # here, not at the top: a child runs this file by path
    record.write(Path(args.out), {"commit": git_commit(), "base": args.base, "device": args.device,
                                          "mem_limit": args.mem_limit, "rows": rows})
    print(f"\n| model | genome | CPU s / evaluation, base | this tree | ratio | predicted s equal |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['genome']} | {r['base_cpu_s']:.3f} | {r['cpu_s']:.3f} | "
              f"{r['cpu_s'] / max(r['base_cpu_s'], 1e-9):.2f} | {r['time_s'] == r['base_time_s']} |")
    for m in args.models.split(","):
        mine = [r for r in rows if r["model"] == m]
        b, n = sum(r["base_cpu_s"] for r in mine), sum(r["cpu_s"] for r in mine)
        print(f"| {m} | mean of {len(mine)} | {b / len(mine):.3f} | {n / len(mine):.3f} | {n / max(b, 1e-9):.2f} | "
              f"{all(r['time_s'] == r['base_time_s'] for r in mine)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
