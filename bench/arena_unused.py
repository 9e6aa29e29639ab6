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
    return {"point": point, "throughput_vs_ideal": res["throughput_vs_ideal"], "time_s": res["time_s"],
            "cpu_s": round(cpu, 1),
            "islands": search.get("islands"), **usage}


def tight_bound_s(point: str, args) -> float:
    """The activation-aware lower bound of `point` under the limit (planner.tight_bound), by this tree's code."""
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import resolve_op_time
    from tvm_swap.planner.tight_bound import tight_lower_bound
    from tvm_swap.units import parse_bytes
    from tvm_swap.zoo import load_zoo

    graph = load_zoo(f"zoo:{point}")
    dev = get_device(args.device)
    return tight_lower_bound(graph, resolve_op_time(graph, dev, None), dev, parse_bytes(args.mem_limit))


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
    ap.add_argument("--render-from", default=None,
                    help="an earlier result of this benchmark: its rows again, with the tight bound computed now")
    args = ap.parse_args(argv)
    measured = None
    if args.render_from:
        earlier = json.loads(Path(args.render_from).read_text())
        rows, measured = earlier["rows"], earlier.get("measured") or earlier.get("provenance")
        names = list(dict.fromkeys(r["tree"] for r in rows))
    else:
        trees = [kv.split("=", 1) for kv in args.trees.split(",")]
        names = [n for n, _ in trees]
        rows = []
        for point in args.points.split(","):
            for name, path in trees:
                row = {"tree": name, "path": str(Path(path).resolve()), **plan_point(Path(path).resolve(), point, args)}
                print(json.dumps({k: v for k, v in row.items() if k != "islands"}), flush=True)
                rows.append(row)
    tight = {p: tight_bound_s(p, args) for p in dict.fromkeys(r["point"] for r in rows)}
    for r in rows:
        r["tight_lower_bound_s"] = tight[r["point"]]
        r["time_vs_tight_bound"] = r["time_s"] / tight[r["point"]]
    show(rows, names)
    if args.out:
        from bench import record

        doc = {"generations": args.generations, "mem_limit": args.mem_limit, "device": args.device, "rows": rows}
        if measured is not None:
            doc["measured"] = measured          # the provenance of the run that planned (--render-from)
        record.write(args.out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
