#!/usr/bin/env python
"""Planner speed and quality: how good a SwapAdvisor plan is after 10, 30, 60 and 300 s of search.

For each workload (default: the two largest graphs, BERT-large and BRNN-4-8K, at their paper batches on a
V100 at 16 GB) it runs one search of the longest budget and reads the GA's best-so-far history at each
checkpoint, plus one search with a 60 s budget timed end to end (graph load to verified plan), and the
non-search planners side by side with the ideal and the lower bound. Prints a table and writes
benchmarks/planner.json and benchmarks/planner_convergence.png.

    python -m bench planner                          # about 15 minutes on 2 cores
    python -m bench planner --checkpoints 10,30,60 --models bert-large@batch=32
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

from tvm_swap.units import format_bytes  # noqa: E402

DEFAULT_MODELS = ["bert-large@batch=32", "brnn-4-8k@batch=128"]
BASELINES = ["swapadvisor-nosearch", "odswap", "vdnn"]


def best_at(history, t):
    """Best simulated time found by elapsed time t (history rows: generation, elapsed_s, best_time_s)."""
    best = None
    for _, elapsed, value in history:
        if elapsed <= t:
            best = value
    return best


def run_model(spec: str, checkpoints: list[float], mem_limit: int, device: str, seed: int) -> dict:
    from tvm_swap.planner import plan_graph
    from tvm_swap.zoo import load_zoo

    t_load = time.perf_counter()
    graph = load_zoo("zoo:" + spec)
    load_s = time.perf_counter() - t_load
    row = {"model": spec, "ops": graph.num_ops, "tensors": graph.num_tensors, "load_s": load_s}
    for name in BASELINES:
        p = plan_graph(graph, mem_limit, device=device, planner=name, seed=seed)
        row[name] = p.predicted["throughput_vs_ideal"]
    t0 = time.perf_counter()
    p60 = plan_graph(graph, mem_limit, device=device, planner="swapadvisor", budget_s=60.0, seed=seed)
    row["wall_60s_budget_s"] = time.perf_counter() - t0 + load_s
    row["ideal_time_s"] = p60.predicted["ideal_time_s"]
    row["lower_bound_s"] = lb = p60.predicted["lower_bound_s"]
    row["at_60s_budget"] = {"time_s": p60.predicted["time_s"], "vs_lb": p60.predicted["time_s"] / lb,
                            "throughput_vs_ideal": p60.predicted["throughput_vs_ideal"],
                            "generations": p60.search.get("generations")}
    longest = max(checkpoints)
    if longest > 60:
        plong = plan_graph(graph, mem_limit, device=device, planner="swapadvisor", budget_s=longest, seed=seed)
    else:
        plong = p60
    hist = plong.search.get("history", [])
    row["history"] = hist
    row["checkpoints"] = {}
    for t in checkpoints:
        b = best_at(hist, t)
        row["checkpoints"][str(int(t))] = None if b is None else {
            "time_s": b, "vs_lb": b / lb, "throughput_vs_ideal": row["ideal_time_s"] / b}
    return row


def plot(rows, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no convergence plot (pip install tvm_swap[plots])", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for r in rows:
        h = r["history"]
        ax.step([x[1] for x in h], [r["lower_bound_s"] / x[2] for x in h], where="post", label=r["model"])
    ax.axhline(1.0 / 1.15, ls="--", c="grey", lw=1, label="1.15x lower bound")
    ax.set_xscale("log")
    ax.set_xlabel("search time (s, log scale)")
    ax.set_ylabel("lower bound / best simulated time")
    ax.set_title("SwapAdvisor GA convergence (V100, 16 GB)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated zoo specs NAME@batch=B")
    ap.add_argument("--checkpoints", default="10,30,60,300", help="search times to report, seconds")
    ap.add_argument("--mem-limit", default="16GB")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks"))
    args = ap.parse_args(argv)
    from tvm_swap.units import parse_bytes

    limit = parse_bytes(args.mem_limit)
    checkpoints = [float(x) for x in args.checkpoints.split(",")]
    rows = []
    for spec in args.models.split(","):
        print(f"planning {spec} ...", file=sys.stderr, flush=True)
        rows.append(run_model(spec.strip(), checkpoints, limit, args.device, args.seed))
    head = f"{'model':<22} {'ops':>6} " + " ".join(f"{'@' + str(int(t)) + 's':>13}" for t in checkpoints) + \
        f" {'60s wall':>9} " + " ".join(f"{b:>21}" for b in BASELINES)
    print(f"\nSwapAdvisor plan quality vs search time ({args.device}, limit {format_bytes(limit)}): "
          f"time/LB and throughput vs ideal; baselines: throughput vs ideal")
    print(head)
    for r in rows:
        cells = []
        for t in checkpoints:
            c = r["checkpoints"][str(int(t))]
            cells.append(f"{'-':>13}" if c is None else f"{c['vs_lb']:.3f}x/{c['throughput_vs_ideal']:.3f}".rjust(13))
        print(f"{r['model']:<22} {r['ops']:>6} " + " ".join(cells) + f" {r['wall_60s_budget_s']:>8.1f}s " +
              " ".join(f"{r[b]:>21.3f}" for b in BASELINES))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"device": args.device, "mem_limit": limit, "cpus": os.cpu_count(), "python": platform.python_version()}
    record.write((out / "planner.json"), {"meta": meta, "rows": rows})
    plot(rows, out / "planner_convergence.png")
    print(f"\nwrote {out / 'planner.json'} and {out / 'planner_convergence.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
