#!/usr/bin/env python
"""Swap-only vs hybrid (swap or recompute) vs recompute-only, at the same limit, budget and seed (issue 12).

    swap-only        swapadvisor, arena pool, recompute off (SwapAdvisor)
    hybrid           swapadvisor, arena pool, recompute on: the search picks swap or drop + recompute per tensor
    recompute-only   the baseline: evicted activations dropped and recomputed, params swapped (size classes)
    recompute-first  swapadvisor-nosearch, arena, recompute on: every eviction that may be recomputed is, on
                     the default schedule (the others are copied): recompute-heavy without search, in the arena

For each point it prints throughput as a fraction of ideal, the extra compute seconds spent recomputing, the
bytes crossing the link and the link bytes saved against swap-only, and the hybrid's speed-up over
swap-only, with the issue's two checks: hybrid never slower than swap-only, and >= 1.3x where swap-only is
below 0.6 of ideal. One JSON per point under benchmarks/recompute/ (so a point can be refreshed alone, in
pieces with --only), then benchmarks/recompute.md from all of them. Records the git commit measured.

    python -m bench recompute                               # every point, 60 s searches
    python -m bench recompute --only rnn-8-8k --generations 2
    python -m bench recompute --render-only
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

from tvm_swap.units import format_bytes, parse_bytes  # noqa: E402

# (model, batch, device, limit): the points
POINTS = [("bert-large", 32, "v100-16gb", "16GB"), ("bert-large", 32, "v100-16gb", "8GB"),
          ("wresnet-152-10", 64, "v100-16gb", "16GB"), ("wresnet-152-10", 64, "v100-16gb", "8GB"),
          ("rnn-8-8k", 256, "v100-16gb", "16GB"), ("brnn-4-8k", 128, "v100-16gb", "16GB"),
          ("bert-large", 32, "h200", "24GB")]
VARIANTS = {"swap-only": ("swapadvisor", {"pool": "arena", "recompute": "off"}),
            "hybrid": ("swapadvisor", {"pool": "arena", "recompute": "on"}),
            "recompute-only": ("recompute-only", {}),
            "recompute-first": ("swapadvisor-nosearch", {"pool": "arena", "recompute": "on"})}
OUT_DIR = ROOT / "benchmarks" / "recompute"


def point_id(model, batch, device, limit) -> str:
    return f"{model}@{batch}-{device}-{limit}"


def git_commit() -> str:
    from tvm_swap.provenance import git_commit

    return git_commit()


def bench_point(model, batch, device, limit, args) -> dict:
    from tvm_swap.errors import InfeasibleLimitError, TvmSwapError
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.zoo import load_zoo

    graph = load_zoo(f"zoo:{model}@batch={batch}")
    row = {"id": point_id(model, batch, device, limit), "model": model, "batch": batch, "device": device,
           "limit": limit, "ops": graph.num_ops, "seed": args.seed, "budget_s": args.budget_s,
           "generations": args.generations, "commit": git_commit()}
    for name, (planner, opts) in VARIANTS.items():
        t0 = time.perf_counter()
        try:
            p = plan_graph(graph, parse_bytes(limit), device, planner=planner, budget_s=args.budget_s,
                           generations=args.generations, seed=args.seed, workers=args.workers, **opts)
        except InfeasibleLimitError as e:
            row[name] = {"infeasible": True, "min_feasible": int(e.min_feasible)}
            print(f"  {row['id']} {name:15s} infeasible (min {format_bytes(e.min_feasible)})", flush=True)
            continue
        except TvmSwapError as e:
            row[name] = {"error": str(e)}
            print(f"  {row['id']} {name:15s} error: {e}", flush=True)
            continue
        s = p.summary()
        row[name] = {k: s[k] for k in ("throughput_vs_ideal", "time_s", "ideal_time_s", "swap_out_bytes",
                                       "swap_in_bytes", "recompute_count", "recompute_bytes", "recompute_s",
                                       "peak_bytes")}
        row[name]["link_bytes"] = int(s["swap_out_bytes"] + s["swap_in_bytes"])
        row[name]["generations"] = p.search.get("generations")
        row[name]["wall_s"] = round(time.perf_counter() - t0, 1)
        r = row[name]
        print(f"  {row['id']} {name:15s} {r['throughput_vs_ideal']:.3f} of ideal  link {format_bytes(r['link_bytes'])}"
              f"  recomputed {r['recompute_count']} ({r['recompute_s'] * 1e3:.1f} ms)  gens {r['generations']}"
              f"  {r['wall_s']} s", flush=True)
    sw, hy = row.get("swap-only", {}), row.get("hybrid", {})
    if "time_s" in sw and "time_s" in hy:
        row["hybrid_speedup"] = sw["time_s"] / hy["time_s"]
        row["hybrid_not_slower"] = hy["time_s"] <= sw["time_s"] * (1 + 1e-9)
        row["target_1_3x"] = None if sw["throughput_vs_ideal"] >= 0.6 else row["hybrid_speedup"] >= 1.3
    return row


def _cell(r, key, fmt) -> str:
    if not r:
        return "-"
    if r.get("infeasible"):
        return f"infeasible (min {format_bytes(r['min_feasible'])})"
    if "error" in r:
        return "error"
    return fmt(r[key])


def render(rows: list[dict]) -> str:
    lines = ["# Swap-only vs hybrid vs recompute-only", "",
             "Same limit, seed and search budget per row (bench/recompute.py); throughput as a fraction "
             "of ideal; extra compute = seconds of recomputed kernels per iteration; link = bytes copied each "
             "iteration (both ways); saved = swap-only's link bytes minus the variant's. Since the hybrid search runs "
             "swap-only's own search as one of its two islands (tvm_swap/planner/swapadvisor/islands.py), at the "
             "same seed and generations it is never slower than swap-only by construction (rows measured before "
             "that, at older commits, were two independent searches); the checks column says SLOWER where it "
             "lost.", "",
             "| point | commit | budget | swap-only | hybrid | recompute-only | recompute-first | hybrid / swap-only "
             "| hybrid extra compute | hybrid link saved | recompute-only extra compute | recompute-only link saved "
             "| recompute-first extra compute | recompute-first link saved | checks |",
             "|" + "---|" * 15]
    for r in rows:
        sw, hy, ro = r.get("swap-only") or {}, r.get("hybrid") or {}, r.get("recompute-only") or {}
        rf = r.get("recompute-first") or {}
        tput = lambda x: f"{x:.3f}"                     # noqa: E731
        ms = lambda x: f"{x * 1e3:.1f} ms"              # noqa: E731

        def saved(v):
            if "link_bytes" not in v or "link_bytes" not in sw:
                return "-"
            d = sw["link_bytes"] - v["link_bytes"]
            return ("" if d >= 0 else "-") + format_bytes(abs(d))
        budget = f"{r['generations']} gens" if r.get("generations") is not None else f"{r.get('budget_s')} s"
        checks = []
        if "hybrid_not_slower" in r:
            checks.append("not slower" if r["hybrid_not_slower"] else "SLOWER")
        if r.get("target_1_3x") is not None:
            checks.append(">=1.3x" if r["target_1_3x"] else "below 1.3x")
        lines.append("| " + " | ".join([
            r["id"], r.get("commit", "?"), budget, _cell(sw, "throughput_vs_ideal", tput),
            _cell(hy, "throughput_vs_ideal", tput), _cell(ro, "throughput_vs_ideal", tput),
            _cell(rf, "throughput_vs_ideal", tput),
            f"{r['hybrid_speedup']:.3f}x" if "hybrid_speedup" in r else "-",
            _cell(hy, "recompute_s", ms), saved(hy), _cell(ro, "recompute_s", ms), saved(ro),
            _cell(rf, "recompute_s", ms), saved(rf),
            ", ".join(checks) or "-"]) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=None, help="comma list of substrings of point ids (e.g. rnn-8-8k,h200)")
    ap.add_argument("--budget-s", type=float, default=60.0, help="search budget per plan (ignored with --generations)")
    ap.add_argument("--generations", type=int, default=None, help="exactly this many GA generations (reproducible)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--render-only", action="store_true", help="only rebuild benchmarks/recompute.md")
    args = ap.parse_args(argv)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    if not args.render_only:
        wanted = [p for p in POINTS if not args.only
                  or any(s in point_id(*p) for s in args.only.split(","))]
        for p in wanted:
            print(f"{point_id(*p)}:", flush=True)
            row = bench_point(*p, args)
            record.write((OUT_DIR / f"{row['id']}.json"), row)
    rows = []
    for p in POINTS:
        f = OUT_DIR / f"{point_id(*p)}.json"
        if f.exists():
            rows.append(json.loads(f.read_text()))
    table = render(rows)
    (OUT_DIR.parent / "recompute.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
