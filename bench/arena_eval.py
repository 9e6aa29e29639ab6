#!/usr/bin/env python
"""CPU seconds per arena genome evaluation (ArenaScorer.time_of: walk, placement, simulation), side by side
for source trees: a refactoring of the arena must not slow the GA's hot loop.

Each tree runs in its own child process (PYTHONPATH=tree), the trees interleaved `--repeat` times so the
machine's load falls on them alike; per genome, the least CPU seconds (process time: the child's own work,
not the waits of a shared machine) over the repeats and `--inner` evaluations in each child. The simulated times must be equal across trees.

    python -m bench arena-eval --trees /work/base,. [--model zoo:nasnet-25@batch=16] [--repeat 3]

Writes benchmarks/arena_eval.json (with the commit) and prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENOMES = ("nosearch", "recompute-cheap", "random-1", "random-2")


def child(args) -> None:
    """In the tree on sys.path: CPU seconds of each genome's evaluation (after one warm-up evaluation)."""
    import time

    import numpy as np

    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import resolve_op_time
    from tvm_swap.planner.graphindex import GraphIndex
    from tvm_swap.planner.swapadvisor.arena import ArenaScorer, ArenaSpace
    from tvm_swap.zoo import load_zoo

    g = load_zoo(args.model)
    dev = get_device(args.device)
    limit = int(float(args.mem_limit))
    gi = GraphIndex.build(g, 256, keep_updated=False)
    ot = resolve_op_time(g, dev, None)
    space = ArenaSpace(gi, limit, recompute=True, op_time=ot, device=dev)
    seeds = dict(space.seeds())
    rng = np.random.default_rng(0)
    genomes = {"nosearch": seeds["nosearch"], "recompute-cheap": seeds.get("recompute-cheap"),
               "random-1": space.random(rng), "random-2": space.random(rng)}
    sched = gi.default_schedule()
    scorer = ArenaScorer(gi, limit, ot, dev)
    scorer.time_of(sched, genomes["nosearch"])          # first-use caches (numba, graph facts) off the clock
    out = {}
    for name in GENOMES:
        gen = genomes.get(name)
        if gen is None:
            continue
        cpu = []
        for _ in range(args.inner):
            _forget_rounds()
            t0 = time.process_time()
            t = scorer.time_of(sched, gen)
            cpu.append(time.process_time() - t0)
        out[name] = {"cpu_s": min(cpu), "time_s": t}
    print("RESULT " + json.dumps({"ops": g.num_ops, "genomes": out}), flush=True)


def _forget_rounds() -> None:
    """Forget the plain genome's remembered rounds (so each evaluation walks): arena.rounds.rounds_memo's, or
    before the split arena._LAST_ROUNDS."""
    import importlib

    try:
        importlib.import_module("tvm_swap.planner.swapadvisor.arena.rounds").forget_rounds()
    except ModuleNotFoundError:
        importlib.import_module("tvm_swap.planner.swapadvisor.arena")._LAST_ROUNDS.clear()


def run_tree(tree: str, args) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
    r = subprocess.run([sys.executable, __file__, "--child", "--model", args.model, "--mem-limit", args.mem_limit,
                        "--device", args.device, "--inner", str(args.inner)], capture_output=True, text=True, env=env,
                       timeout=3600)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode != 0 or not line:
        raise SystemExit(f"the child for {tree} failed:\n{r.stderr[-3000:]}")
    return json.loads(line[0][len("RESULT "):])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", default=str(ROOT), help="comma-separated source trees (the first is the baseline)")
    ap.add_argument("--model", default="zoo:nasnet-25@batch=16")
    ap.add_argument("--mem-limit", default="16e9", help="bytes")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--repeat", type=int, default=3, help="child processes per tree")
    ap.add_argument("--inner", type=int, default=2, help="evaluations per genome in a child (the least counts)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "arena_eval.json"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return 0
    from tvm_swap.provenance import git_commit

    trees = args.trees.split(",")
    runs: dict = {t: [] for t in trees}
    for _ in range(args.repeat):
        for t in trees:
            runs[t].append(run_tree(t, args))
    best = {t: {name: min(r["genomes"][name]["cpu_s"] for r in rs) for name in rs[0]["genomes"]}
            for t, rs in runs.items()}
    same = all(r["genomes"][name]["time_s"] == runs[trees[0]][0]["genomes"][name]["time_s"]
               for rs in runs.values() for r in rs for name in r["genomes"])
    base = trees[0]
    print(f"\n{args.model} ({runs[base][0]['ops']} ops) at {args.mem_limit} on {args.device}: CPU s per evaluation, "
          f"least of {args.repeat} (load average {os.getloadavg()[0]:.1f}); simulated times equal: {same}")
    print("| genome | " + " | ".join(trees) + " | ratio |")
    print("|---|" + "---|" * len(trees) + "---|")
    for name in best[base]:
        cells = " | ".join(f"{best[t][name]:.3f}" for t in trees)
        print(f"| {name} | {cells} | {best[trees[-1]][name] / best[base][name]:.3f} |")
    tot = {t: sum(best[t].values()) for t in trees}
    print("| total | " + " | ".join(f"{tot[t]:.3f}" for t in trees) + f" | {tot[trees[-1]] / tot[base]:.3f} |")
    from bench import record     # here, not at the top: a child runs this file by path
    record.write(Path(args.out), {"commit": git_commit(), "model": args.model, "mem_limit": args.mem_limit,
                                          "device": args.device, "trees": trees, "runs": runs, "best_cpu_s": best,
                                          "same_simulated_times": same, "load_average": os.getloadavg()[0]})
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
