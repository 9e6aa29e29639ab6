"""swapadvisor+host-search on the fuzz's graphs, two checkouts side by side: plan times and CPU per plan.

    python -m bench host-search --n 300 --first-case 7000 --base /work/base36

The cases are scripts/fuzz.py's as its command line draws them (`--splits 0.3`: its graph, op times, device,
alignment, limit and GA settings of fuzz seed k); each is planned as the fuzz's `swapadvisor+host-search`
variant plans it (host_ops="auto", host_generations=1, the case's generations and seed schedules, one worker),
at the case's limit. Each checkout plans in a process of its own (its tree first on sys.path), both at once,
so a loaded machine weighs on both alike; CPU is time.process_time() around plan_graph in the child. Cases on
a device without a host (the variant is then swapadvisor) and cases either checkout refuses are left out.
Prints a table (CPU per plan, plan time new/base: median, worst, how many slower) and writes
benchmarks/host_search.json through bench.record.
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


def child(tree: str) -> None:
    sys.path[:0] = [tree, str(Path(tree) / "scripts")]
    import importlib.util

    spec = importlib.util.spec_from_file_location("fuzz_of_tree", str(Path(tree) / "scripts" / "fuzz.py"))
    fuzz = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_of_tree"] = fuzz        # (its dataclasses look their module up)
    spec.loader.exec_module(fuzz)
    fuzz.SPLIT_PROB = fuzz.CLI_SPLIT_PROB
    from tvm_swap.cost.devices import DEVICES
    from tvm_swap.errors import InfeasibleLimitError

    fuzz.run_case(0, ["swapadvisor", "swapadvisor+host-search"], determinism=False)   # numba's compiles, untimed
    for line in sys.stdin:
        k = int(line)
        case = fuzz.draw_case(k)
        out = {"case": k, "ops": case.graph.num_ops, "limit": case.limit, "device": case.device,
               "split": "batch_split" in case.graph.meta}
        if DEVICES[case.device].host:
            c0 = time.process_time()
            try:
                plan = fuzz._plan(case, "swapadvisor+host-search", case.limit)
                out["time_s"] = plan.predicted["time_s"]
                out["host_ops"] = len(plan.host_ops or ())
            except InfeasibleLimitError:
                out["refused"] = True
            out["cpu_s"] = time.process_time() - c0
        print(json.dumps(out), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="fuzz seeds drawn")
    ap.add_argument("--first-case", type=int, default=7000)
    ap.add_argument("--base", default="/work/base36", help="the checkout to compare against")
    ap.add_argument("--new", default=str(ROOT), help="the checkout measured (default: this one)")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "host_search.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    from bench import record

    run = record.start()
    procs = {side: subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child", tree],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                    env={**os.environ, "PYTHONPATH": tree})
             for side, tree in (("base", args.base), ("new", args.new))}
    rows = []
    try:
        for k in range(args.first_case, args.first_case + args.n):
            got = {}
            for p in procs.values():
                p.stdin.write(f"{k}\n")
                p.stdin.flush()
            for side, p in procs.items():
                line = p.stdout.readline()
                if not line:
                    raise SystemExit(f"the {side} child stopped at case {k}: see its error above")
                got[side] = json.loads(line)
            b, n = got["base"], got["new"]
            if (b["ops"], b["limit"]) != (n["ops"], n["limit"]):
                raise SystemExit(f"case {k}: the two checkouts draw different cases: {b} vs {n}")
            if "time_s" in b and "time_s" in n:
                rows.append({"case": k, "ops": b["ops"], "split": b["split"], "base": b, "new": n})
            if (k - args.first_case + 1) % 25 == 0:
                print(f"{k - args.first_case + 1} seeds, {len(rows)} cases", file=sys.stderr, flush=True)
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()
    return summarize(rows, args, run, record)


def summarize(rows: list, args, run, record) -> int:
    ratio = [r["new"]["time_s"] / r["base"]["time_s"] for r in rows]
    worst = max(range(len(rows)), key=lambda i: ratio[i])
    cpu_b, cpu_n = (sum(r[s]["cpu_s"] for r in rows) for s in ("base", "new"))
    summary = {"cases": len(rows), "base_cpu_per_plan_s": cpu_b / len(rows), "new_cpu_per_plan_s": cpu_n / len(rows),
               "cpu_ratio": cpu_n / cpu_b, "time_ratio_median": statistics.median(ratio),
               "time_ratio_worst": ratio[worst],
               "worst_case": rows[worst]["case"], "slower": sum(x > 1 + 1e-12 for x in ratio),
               "faster": sum(x < 1 - 1e-12 for x in ratio),
               "slower_than_1pct": sum(x > 1.01 for x in ratio)}
    print(f"\n{len(rows)} fuzz cases with a host (seeds {args.first_case}..{args.first_case + args.n - 1}), "
          f"swapadvisor+host-search as the fuzz plans it; base {args.base}, new {args.new}")
    print("| CPU/plan base (s) | CPU/plan new (s) | new/base CPU | plan time new/base: median | worst (case) "
          "| slower | slower > 1% | faster |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {summary['base_cpu_per_plan_s']:.3f} | {summary['new_cpu_per_plan_s']:.3f} | {summary['cpu_ratio']:.3f} "
          f"| {summary['time_ratio_median']:.4f} | {summary['time_ratio_worst']:.4f} ({summary['worst_case']}) "
          f"| {summary['slower']} | {summary['slower_than_1pct']} | {summary['faster']} |")
    record.write(Path(args.json), {"base": args.base, "new": args.new, "summary": summary, "cases": rows}, run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
