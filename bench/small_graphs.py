#!/usr/bin/env python
"""swapadvisor on small graphs, two checkouts side by side: CPU seconds per plan and plan times.

    python -m bench small-graphs --n 300                       # this checkout vs /work/base
    python -m bench small-graphs --n 60 --base /work/base --new-options '{"polish": "off"}'

The cases are scripts/fuzz.py's (its graph, op times, device, alignment and limit of fuzz seed k), keeping the
graphs of 3-60 ops, the first `--n` of them; each is planned by `swapadvisor` with the default settings at a
fixed number of generations (`--generations`, default 3), one worker (in-process), GA seed `--seed`. Each
checkout plans in a process of its own (its tree first on sys.path, so it imports its own tvm_swap and its own
fuzz generator); the driver sends each case to both at once and waits for both, so a loaded machine weighs on
both alike. CPU is time.process_time() around plan_graph in the child, not wall time. A case one checkout refuses
(the arena floor above the fuzz's limit) is left out of both.

Prints a table (CPU per plan, the ratio, plan time new/base: median, worst, how many slower) and writes
benchmarks/small_graphs.json (per case: ops, both times and CPU, the island that won and what the polish
did), with the commit (tvm_swap.provenance.git_commit).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- the child: one checkout, planning cases
def child(tree: str, options: dict, generations: int, seed: int) -> None:
    sys.path[:0] = [tree, str(Path(tree) / "scripts")]
    import importlib.util

    spec = importlib.util.spec_from_file_location("fuzz_of_tree", str(Path(tree) / "scripts" / "fuzz.py"))
    fuzz = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_of_tree"] = fuzz        # (its dataclasses look their module up)
    spec.loader.exec_module(fuzz)
    from tvm_swap.errors import InfeasibleLimitError
    from tvm_swap.planner import plan_graph

    warm = fuzz.draw_case(1)     # untimed: numba compiles (or loads) the placement kernels on a first plan
    plan_graph(warm.graph, warm.limit, device=warm.device, op_time=warm.op_time, planner="swapadvisor", seed=seed,
               generations=0, workers=1, alignment=warm.alignment, **options)
    for line in sys.stdin:
        k = int(line)
        case = fuzz.draw_case(k)
        out = {"case": k, "ops": case.graph.num_ops, "limit": case.limit}
        if 3 <= case.graph.num_ops <= 60:
            c0 = time.process_time()
            try:
                plan = plan_graph(case.graph, case.limit, device=case.device, op_time=case.op_time,
                                  planner="swapadvisor", seed=seed, generations=generations, workers=1,
                                  alignment=case.alignment, **options)
                out["time_s"] = plan.predicted["time_s"]
                out["lower_bound_s"] = plan.predicted["lower_bound_s"]
                s = plan.search or {}
                isl = s.get("islands") or []
                won = min(isl, key=lambda d: d["best_s"] if d["best_s"] is not None else float("inf"),
                          default=None)
                out["island"] = won["name"] if won else "-"
                out["islands"] = isl
                out["polish"] = s.get("polish")
                out["evaluations"] = s.get("evaluations")
            except InfeasibleLimitError:
                out["refused"] = True
            out["cpu_s"] = time.process_time() - c0
        print(json.dumps(out), flush=True)


# ---------------------------------------------------------------- the driver
def start(tree: str, options: dict, args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": tree}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", tree, "--child-options", json.dumps(options),
           "--generations", str(args.generations), "--seed", str(args.seed)]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def ask(procs: dict, k: int) -> dict:
    """Case k to every child at once (they plan it side by side, a core each where there are two), then
    their answers."""
    for p in procs.values():
        p.stdin.write(f"{k}\n")
        p.stdin.flush()
    got = {}
    for side, p in procs.items():
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"the {side} child stopped at case {k}: see its error above")
        got[side] = json.loads(line)
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="cases of 3-60 ops")
    ap.add_argument("--base", default="/work/base", help="the checkout to compare against")
    ap.add_argument("--new", default=str(ROOT), help="the checkout measured (default: this one)")
    ap.add_argument("--base-options", default="{}", help="planner options (JSON) for base")
    ap.add_argument("--new-options", default="{}", help="planner options (JSON) for new")
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0, help="the GA's seed")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "small_graphs.json"))
    ap.add_argument("--resume", help="a .partial.jsonl of an earlier run (same checkouts and settings): its cases "
                    "are kept and the run goes on after them")
    ap.add_argument("--first-case", type=int, default=0, help="the first fuzz seed drawn (to split a run in two)")
    ap.add_argument("--merge", nargs="+", help="only summarize: the .partial.jsonl files of runs split by "
                    "--first-case (same checkouts and settings)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-options", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, json.loads(args.child_options), args.generations, args.seed)
        return 0
    from tvm_swap.provenance import git_commit

    if args.merge:
        rows = [json.loads(line) for f in args.merge for line in Path(f).read_text().splitlines() if line.strip()]
        rows = sorted({r["case"]: r for r in rows}.values(), key=lambda r: r["case"])[:args.n]
        return summarize(rows, args, git_commit())
    procs = {"base": start(args.base, json.loads(args.base_options), args),
             "new": start(args.new, json.loads(args.new_options), args)}
    rows, k = [], 0
    partial = Path(args.json).with_suffix(".partial.jsonl")     # each case as it comes (a long run, read early)
    partial.parent.mkdir(parents=True, exist_ok=True)
    k = args.first_case
    if args.resume:         # the cases a cut-short run of the same checkouts and settings finished
        rows = [json.loads(line) for line in Path(args.resume).read_text().splitlines() if line.strip()]
        k = max((r["case"] for r in rows), default=-1) + 1
    log = partial.open("w")
    for r in rows:
        log.write(json.dumps(r) + "\n")
    try:
        while len(rows) < args.n:
            got = ask(procs, k)
            k += 1
            b, n = got["base"], got["new"]
            if (b["ops"], b["limit"]) != (n["ops"], n["limit"]):
                raise SystemExit(f"case {k - 1}: the two checkouts draw different cases: {b} vs {n}")
            if "cpu_s" not in b or b.get("refused") or n.get("refused"):
                continue
            rows.append({"case": b["case"], "ops": b["ops"], "base": b, "new": n})
            log.write(json.dumps(rows[-1]) + "\n")
            log.flush()
            if len(rows) % 20 == 0:
                print(f"{len(rows)} cases ({k} drawn)", file=sys.stderr, flush=True)
    finally:
        log.close()
        for p in procs.values():
            p.stdin.close()
            p.wait()
    return summarize(rows, args, git_commit())


def summarize(rows: list, args, commit: str) -> int:
    """Print the table and write the JSON."""
    cpu_b = sum(r["base"]["cpu_s"] for r in rows)
    cpu_n = sum(r["new"]["cpu_s"] for r in rows)
    ratio = [r["new"]["time_s"] / r["base"]["time_s"] for r in rows]
    worst = max(range(len(rows)), key=lambda i: ratio[i])
    summary = {
        "cases": len(rows), "generations": args.generations, "seed": args.seed,
        "base_cpu_per_plan_s": cpu_b / len(rows), "new_cpu_per_plan_s": cpu_n / len(rows), "cpu_ratio": cpu_n / cpu_b,
        "time_ratio_median": statistics.median(ratio), "time_ratio_worst": ratio[worst], "worst_case": rows[worst]["case"],
        "slower": sum(x > 1 + 1e-12 for x in ratio), "faster": sum(x < 1 - 1e-12 for x in ratio),
    }
    print(f"\n{len(rows)} fuzz graphs of 3-60 ops, swapadvisor, {args.generations} generations, 1 worker, seed {args.seed}")
    print(f"base {args.base} {json.loads(args.base_options) or ''}  new {args.new} {json.loads(args.new_options) or ''}")
    print(f"| CPU/plan base (s) | CPU/plan new (s) | new/base CPU | plan time new/base: median | worst (case) "
          f"| slower | faster |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {summary['base_cpu_per_plan_s']:.3f} | {summary['new_cpu_per_plan_s']:.3f} | {summary['cpu_ratio']:.3f} "
          f"| {summary['time_ratio_median']:.4f} | {summary['time_ratio_worst']:.4f} ({summary['worst_case']}) "
          f"| {summary['slower']} | {summary['faster']} |")
    out = {"commit": commit, "base": args.base, "new": args.new, "base_options": json.loads(args.base_options),
           "new_options": json.loads(args.new_options), "summary": summary, "cases": rows}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    from bench import record     # here, not at the top: the worker runs this file by path
    record.write(Path(args.json), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
