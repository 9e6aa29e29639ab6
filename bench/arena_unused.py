#!/usr/bin/env python
"""How much of the arena a searched plan leaves unused, beside its fraction of ideal and time / tight bound, for two trees side by side.

Issue 28: BRNN-4-8K@64 was 0.786 of ideal at 1.27x the swap-only tight bound, blamed on fragmentation. For each
point and tree it plans with `tvm-swap plan zoo:POINT --mem-limit 16GB --device v100-16gb --generations G --seed 0`
in a subprocess (cwd and PYTHONPATH = the tree, so `/work/base` measures the code before a change), then reads the
plan with tvm_swap.planner.arena_usage: the bytes unused at the fullest kernel (arena less the most its live
objects hold), the mean unused over the kernels, and the bytes no object ever covers. Generation-based, so the
plans do not depend on the machine's load; the CPU seconds do.

    python -m bench arena-unused --trees before=/work/base,after=. --out benchmarks/arena_unused.json
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POINTS = "brnn-4-8k@batch=64,brnn-4-8k@batch=128,bert-large@batch=32"
GIB = 2 ** 30


def plan_point(tree: Path, point: str, args) -> dict:
    """One plan of `point` made by `tree`'s code: the CLI's JSON result, its CPU seconds and the unused bytes."""
    from tvm_swap.plan import Plan
    from tvm_swap.planner.arena_usage import unused_summary

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.plans or tmp) / f"{tree.name}-{point.replace('@', '_').replace('=', '')}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "tvm_swap.cli", "plan", f"zoo:{point}", "--mem-limit", args.mem_limit,
               "--device", args.device, "--generations", str(args.generations), "--seed", "0",
               "--workers", str(args.workers), "--json", "--quiet", "-o", str(out)]
        env = dict(os.environ, PYTHONPATH=str(tree))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{tree}: {' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
        res = json.loads(done.stdout.strip().splitlines()[-1])
        usage = unused_summary(Plan.load(out))
        search = json.loads(out.read_text()).get("search") or {}
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"point": point, "throughput_vs_ideal": res["throughput_vs_ideal"],
            "time_vs_tight_bound": res["time_vs_lower_bound"], "time_s": res["time_s"], "cpu_s": round(cpu, 1),
            "islands": search.get("islands"), **usage}


def show(rows: list[dict], trees: list[str]) -> None:
    head = "| point | " + " | ".join(f"{t}: of ideal | {t}: time / tight bound | {t}: unused at fullest GiB | "
                                     f"{t}: mean unused GiB | {t}: CPU s" for t in trees) + " |"
    print(head)
    print("|" + "---|" * (1 + 5 * len(trees)))
    for point in dict.fromkeys(r["point"] for r in rows):
        cells = []
        for t in trees:
            r = next((r for r in rows if r["point"] == point and r["tree"] == t), None)
            cells += ["-"] * 5 if r is None else [
                f"{r['throughput_vs_ideal']:.3f}", f"{r['time_vs_tight_bound']:.2f}x",
                f"{r['unused_at_fullest_bytes'] / GIB:.2f}", f"{r['mean_unused_bytes'] / GIB:.2f}", f"{r['cpu_s']:.0f}"]
        print(f"| {point} | " + " | ".join(cells) + " |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", default=POINTS, help=f"comma list of zoo points (default {POINTS})")
    ap.add_argument("--trees", default="after=.", help="comma list of NAME=PATH (default after=.)")
    ap.add_argument("--mem-limit", default="16GB")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default=None, help="JSON result (through bench.record)")
    ap.add_argument("--plans", default=None, help="keep the plans in this folder (for bench stall-chains)")
    args = ap.parse_args(argv)
    trees = [kv.split("=", 1) for kv in args.trees.split(",")]
    rows = []
    for point in args.points.split(","):
        for name, path in trees:
            row = {"tree": name, "path": str(Path(path).resolve()), **plan_point(Path(path).resolve(), point, args)}
            print(json.dumps({k: v for k, v in row.items() if k != "islands"}), flush=True)
            rows.append(row)
    show(rows, [n for n, _ in trees])
    if args.out:
        from bench import record

        record.write(args.out, {"generations": args.generations, "mem_limit": args.mem_limit, "device": args.device,
                                "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
