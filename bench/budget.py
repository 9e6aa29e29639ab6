#!/usr/bin/env python
"""swapadvisor under a wall-clock budget, as a user runs it: fraction of ideal per run, and what the search reached.

    python -m bench budget --point zoo:nasnet-25@batch=16:16GB:60 --runs 3
    python -m bench budget --point zoo:inception-4@batch=32:16GB:15 --point zoo:bert-large@batch=32:16GB:60
    python -m bench budget --paper --budgets 5,15,60 --json benchmarks/budget_paper.json   # quality vs budget
    python -m bench budget --paper --budgets 5 --only nasnet-25 --json benchmarks/budget_paper.json
    python -m bench budget --render benchmarks/budget_paper.json      # table and picture from the JSON
    python -m bench budget --point zoo:nasnet-25@batch=16:16GB:60 --beside-cpu-hog   # a CPU-bound process

Each point (graph, limit, budget in seconds) is planned `--runs` times in a row with `tvm_swap.planner.plan_graph`
(swapadvisor, the default options and workers, device `--device`, seed `--seed`), the way `tvm-swap plan ...
--budget-s B` plans it. `--paper`: every paper point (bench/paper.py's WORKLOADS but BERT-large, which is
not in the paper) at 16 GB, at each of `--budgets`. A budget run depends on the machine's speed and load (how many
genomes fit in the budget), so the table gives the load average beside each run. Per run: the fraction of the
ideal, generations reached, evaluations, which island's genome won (plan.search's islands), the seed it was when
no generation beat the seeds (plan.search's seed_times), and whether the polish moved it.

The JSON (with the commit, tvm_swap.provenance.git_commit) is rewritten after every run, and a run merges into what
is there (the same graph, limit and budget's rows replaced), so the heavy sweep can run in pieces; with --paper
it also draws benchmarks/<json stem>.png (fraction of ideal against the budget, one line per point, the paper's
figure dashed) and prints the table of all rows.
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent


def parse_point(text: str) -> tuple[str, str, float]:
    graph, limit, budget = text.rsplit(":", 2)
    return graph, limit, float(budget)


def paper_points(budgets: list[float], only: str | None) -> list[tuple[str, str, float]]:
    from bench.paper import PAPER, WORKLOADS

    names = set(only.split(",")) if only else None
    return [(f"zoo:{m}@batch={b}", "16GB", bs) for bs in budgets for m, batches in WORKLOADS for b in batches
            if (m, b) in PAPER and (names is None or m in names)]


def winner(plan) -> tuple[str | None, str | None]:
    """(the island whose genome the plan is, the seed it was when no search genome beat the seeds)."""
    s = plan.search
    t = (s.get("polish") or {}).get("from_s")
    isl = [i for i in s.get("islands") or [] if i.get("best_s") is not None]
    best = min(isl, key=lambda i: i["best_s"]) if isl else None
    t = best["best_s"] if best else t
    seed = next((name for name, st in (s.get("seed_times") or {}).items() if t is not None and st == t), None)
    if seed is None and not s.get("generations"):
        # (no generation ran, so a seed won; seed_times keeps the first island's time of each name, and the
        # hybrid island's seeds share names with the swap-only island's)
        seed = "a seed of that island"
    return (best["name"] if best else None), seed


def run_point(graph_spec: str, limit: str, budget_s: float, device: str, seed: int) -> dict:
    from tvm_swap.planner import plan_graph
    from tvm_swap.zoo import load_zoo

    g = load_zoo(graph_spec)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    plan = plan_graph(g, limit, device=device, budget_s=budget_s, seed=seed)
    s = plan.search
    island, won_seed = winner(plan)
    pol = s.get("polish") or {}
    return {"graph": graph_spec, "limit": limit, "budget_s": budget_s, "wall_s": round(time.perf_counter() - t0, 1),
            "throughput_vs_ideal": plan.predicted["throughput_vs_ideal"], "generations": s.get("generations"),
            "evaluations": s.get("evaluations"), "islands": s.get("islands"), "won_island": island,
            "won_seed": won_seed, "polish_moved": bool(pol) and pol.get("to_s", 0) < pol.get("from_s", 0),
            "load_avg_before": round(load, 1)}


def _hog(stop) -> None:
    """A CPU-bound process beside the planner (the must-show's 'one CPU-bound process running beside it')."""
    x = 0
    while not stop.is_set():
        for _ in range(10**5):
            x = (x * 31 + 7) % 1000003


def paper_fraction(graph_spec: str):
    from bench.paper import PAPER

    name, _, batch = graph_spec.removeprefix("zoo:").partition("@batch=")
    return PAPER.get((name, int(batch)), (None,))[0] if batch.isdigit() else None


def table(rows: list[dict]) -> str:
    out = ["| graph | limit | budget s | of ideal | paper | generations | evaluations | won: island / seed | "
           "polish moved | wall s | load avg |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = paper_fraction(r["graph"])
        out.append(f"| {r['graph']} | {r['limit']} | {r['budget_s']:g} | {r['throughput_vs_ideal']:.3f} | "
                   f"{'-' if p is None else f'{p:.2f}'} | {r['generations']} | {r['evaluations']} | "
                   f"{r.get('won_island')} / {r.get('won_seed') or 'search'} | {r.get('polish_moved')} | "
                   f"{r['wall_s']} | {r['load_avg_before']}{' + hog' if r.get('beside_cpu_hog') else ''} |")
    return "\n".join(out)


def picture(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    graphs = sorted({r["graph"] for r in rows if not r.get("beside_cpu_hog")})
    for k, gname in enumerate(graphs):
        pts = sorted((r["budget_s"], r["throughput_vs_ideal"]) for r in rows
                     if r["graph"] == gname and not r.get("beside_cpu_hog"))
        color = plt.cm.tab20(k % 20)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, label=gname.removeprefix("zoo:"))
        paper = paper_fraction(gname)
        if paper is not None and pts:
            ax.hlines(paper, pts[0][0], pts[-1][0], colors=[color], linestyles="dashed", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("budget (s, 2 cores)")
    ax.set_ylabel("throughput / ideal")
    ax.set_title("swapadvisor: fraction of ideal vs search budget (dashed: the paper)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _key(r: dict) -> tuple:
    return r["graph"], r["limit"], float(r["budget_s"]), bool(r.get("beside_cpu_hog"))


def kept_rows(path: Path, points: list, hog: bool) -> list[dict]:
    """The rows already in the JSON but those of the points this run measures again (they are replaced)."""
    old = json.loads(path.read_text()).get("rows", []) if path.exists() else []
    again = {(g, lim, float(b), hog) for g, lim, b in points}
    return [r for r in old if _key(r) not in again]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--point", action="append", default=[], type=parse_point,
                    help="GRAPH:LIMIT:BUDGET_S, e.g. zoo:nasnet-25@batch=16:16GB:60 (repeatable)")
    ap.add_argument("--paper", action="store_true", help="every paper point at 16 GB, at each of --budgets")
    ap.add_argument("--budgets", default="5,15,60", help="with --paper: budgets in seconds, comma-separated")
    ap.add_argument("--only", help="with --paper: these models only (comma-separated, e.g. nasnet-25,rnn-8-8k)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--beside-cpu-hog", action="store_true", help="one CPU-bound process runs beside each plan")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "budget.json"))
    ap.add_argument("--render", metavar="JSON", help="only print the table and draw the picture of this JSON")
    args = ap.parse_args(argv)
    if args.render:
        rows = json.loads(Path(args.render).read_text())["rows"]
        print(table(rows))
        picture(rows, Path(args.render).with_suffix(".png"))
        print(f"wrote {Path(args.render).with_suffix('.png')}")
        return 0
    points = list(args.point)
    if args.paper:
        points += paper_points([float(b) for b in args.budgets.split(",")], args.only)
    if not points:
        ap.error("give --point GRAPH:LIMIT:BUDGET_S or --paper")
    from tvm_swap.provenance import git_commit

    commit, path, rows = git_commit(), Path(args.json), []
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = kept_rows(path, points, args.beside_cpu_hog)
    print(table([]))
    for graph, limit, budget in points:
        for _ in range(args.runs):
            stop = hog = None
            if args.beside_cpu_hog:
                stop = multiprocessing.Event()
                hog = multiprocessing.Process(target=_hog, args=(stop,), daemon=True)
                hog.start()
            try:
                row = run_point(graph, limit, budget, args.device, args.seed)
            finally:
                if hog is not None:
                    stop.set()
                    hog.join()
            row["beside_cpu_hog"] = bool(args.beside_cpu_hog)
            row["commit"] = commit
            rows.append(row)
            print(table([row]).splitlines()[-1], flush=True)
            record.write(path, {"commit": commit, "device": args.device, "seed": args.seed, "rows": kept + rows},
                         quiet=True)     # after every run: the sweep runs in pieces
    out = json.loads(path.read_text())
    if args.paper:
        print("\nall rows in " + str(path) + ":\n" + table(out["rows"]))
        picture(out["rows"], path.with_suffix(".png"))
        print(f"wrote {path.with_suffix('.png')}")
    print(f"wrote {path}")
    return 0 if all(math.isfinite(r["throughput_vs_ideal"]) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
