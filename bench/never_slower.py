#!/usr/bin/env python
"""Recompute on vs off vs on-before, same seed and generations (issue 12: "the hybrid is never slower than
swap-only").

    off         swapadvisor, arena pool, recompute off (the swap-only search)
    on          swapadvisor, arena pool, recompute on: this checkout (two islands, islands.py)
    on-before   the same, planned by the code at --before (default: the commit before the islands), run from
                a `git archive` of that commit in a subprocess, in the same run

On random training graphs (tvm_swap.testing.random_training_graph, 8-12 layers) at two limits and 1/3/10
generations, and on BERT-large@32 (v100-16gb, 16 GB) at 3 generations. Every plan verifies (plan_graph). Prints
and writes a table of time ratios (min, median, max; "slower" counts ratios above 1) and of the cost
(evaluations; wall seconds on a shared machine, indicative only), with the commits measured:
benchmarks/never_slower.json and .md.

    python -m bench never-slower                       # everything (about 15 min on one loaded core)
    python -m bench never-slower --graphs 4 --generations 1 --no-bert
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
BEFORE = "45ad910"         # main before the islands
FRACS = ("60%", "75%")
BERT = ("zoo:bert-large@batch=32", "v100-16gb", "16GB", 3)


def cases(n_graphs: int, generations: list[int], bert: bool, bert_budget: float | None = None) -> list[dict]:
    out = [{"kind": "random", "seed": s, "limit": f, "generations": g}
           for g in generations for s in range(n_graphs) for f in FRACS]
    model, device, limit, gens = BERT
    if bert:
        out.append({"kind": "zoo", "model": model, "device": device, "limit": limit, "generations": gens})
    if bert_budget:          # a wall-clock budget: the islands share it (islands.py), so no guarantee is expected
        out.append({"kind": "zoo", "model": model, "device": device, "limit": limit, "generations": None,
                    "budget_s": bert_budget})
    return out


def case_id(c: dict) -> str:
    if c["kind"] == "random":
        return f"random{c['seed']}@{c['limit']}/g{c['generations']}"
    how = f"g{c['generations']}" if c.get("generations") is not None else f"{c['budget_s']:g}s"
    return f"{c['model'][4:]}-{c['device']}-{c['limit']}/{how}"


# ---------------------------------------------------------------- worker: plans in whatever tree is on sys.path
def run_worker(spec: dict) -> None:
    """Plan every case with each of spec["variants"] ("off"/"on"); one JSON line per plan on stdout."""
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.provenance import git_commit
    from tvm_swap.testing import random_op_times, random_training_graph
    from tvm_swap.units import parse_bytes

    commit = spec.get("commit") or git_commit()       # an archive (on-before) is no checkout: its commit is given
    warm = random_training_graph(99, n_layers=4)          # compile the jitted helpers before anything is timed
    for v in spec["variants"]:
        plan_graph(warm, "70%", "v100-16gb", random_op_times(warm, 99), planner="swapadvisor", pool="arena",
                   recompute=v, generations=1, workers=1, seed=0)
    graphs: dict = {}
    for c in spec["cases"]:
        if c["kind"] == "random":
            key = ("random", c["seed"])
            if key not in graphs:
                g = random_training_graph(c["seed"], n_layers=8 + c["seed"] % 5, momentum=c["seed"] % 2 == 1)
                graphs[key] = (g, random_op_times(g, c["seed"]), "v100-16gb")
            limit = c["limit"]
        else:
            from tvm_swap.zoo import load_zoo

            key = ("zoo", c["model"])
            if key not in graphs:
                graphs.clear()                 # one large graph at a time
                graphs[key] = (load_zoo(c["model"]), None, c["device"])
            limit = parse_bytes(c["limit"])
        g, t, device = graphs[key]
        for v in spec["variants"]:
            t0 = time.perf_counter()
            p = plan_graph(g, limit, device, t, planner="swapadvisor", pool="arena", recompute=v,
                           generations=c.get("generations"), budget_s=c.get("budget_s", 60.0),
                           workers=spec["workers"], seed=spec["seed"])
            assert p.verified
            row = {"id": case_id(c), "variant": v, "time_s": p.predicted["time_s"],
                   "throughput_vs_ideal": p.predicted["ideal_time_s"] / p.predicted["time_s"],
                   "evaluations": p.search["evaluations"], "wall_s": round(time.perf_counter() - t0, 2),
                   "generations": p.search.get("generations"), "islands": p.search.get("islands"),
                   "recompute_count": p.predicted.get("recompute_count", 0), "commit": commit}
            print(json.dumps(row), flush=True)


def spawn(tree: Path, variants: list[str], todo: list[dict], args, label: str) -> dict:
    spec = {"cases": todo, "variants": variants, "workers": args.workers, "seed": args.seed,
            "commit": args.before if label == "before" else None}
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = ["nice", "-n", "5", sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
    out: dict = {}
    with subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            r = json.loads(line)
            name = "on-before" if label == "before" and r["variant"] == "on" else r["variant"]
            out[(r["id"], name)] = r
            print(f"  {r['id']:34s} {name:9s} {r['time_s']:.6g} s  {r['evaluations']:5d} evals  "
                  f"{r['wall_s']:6.1f} s wall", flush=True)
    if proc.returncode:
        raise SystemExit(f"{label} worker failed ({proc.returncode})")
    return out


# ---------------------------------------------------------------- the table
def _stats(xs: list[float]) -> str:
    return f"{min(xs):.4f} / {statistics.median(xs):.4f} / {max(xs):.4f}"


def summarize(rows: dict, todo: list[dict]) -> list[dict]:
    groups: dict = {}
    for c in todo:
        grp = ("random training graphs" if c["kind"] == "random" else case_id(c).split("/")[0],
               c["generations"] if c.get("generations") is not None else f"{c['budget_s']:g} s budget")
        groups.setdefault(grp, []).append(case_id(c))
    out = []
    for (what, gens), ids in groups.items():
        r = {v: [rows[(i, v)] for i in ids] for v in ("off", "on", "on-before")}
        on_off = [a["time_s"] / b["time_s"] for a, b in zip(r["on"], r["off"])]
        before_off = [a["time_s"] / b["time_s"] for a, b in zip(r["on-before"], r["off"])]
        on_before = [a["time_s"] / b["time_s"] for a, b in zip(r["on"], r["on-before"])]
        ev = {v: sum(x["evaluations"] for x in r[v]) for v in r}
        wall = {v: sum(x["wall_s"] for x in r[v]) for v in r}
        out.append({"what": what, "generations": gens, "cases": len(ids),
                    "on_off": on_off, "before_off": before_off, "on_before": on_before,
                    "on_slower": sum(x > 1 for x in on_off), "before_slower": sum(x > 1 for x in before_off),
                    "on_faster": sum(x < 1 for x in on_off), "before_faster": sum(x < 1 for x in before_off),
                    "evaluations": ev, "wall_s": wall,
                    "generations_reached": {v: [x.get("generations") for x in r[v]] for v in r},
                    "islands": [x.get("islands") for x in r["on"]],
                    "throughput_vs_ideal": {v: [x.get("throughput_vs_ideal") for x in r[v]] for v in r}})
    return out


def render(summary: list[dict], meta: dict) -> str:
    lines = ["# Recompute on is never slower than off (issue 12)", "",
             f"bench/never_slower.py; on = commit {meta['commit']} (two islands: "
             "tvm_swap/planner/swapadvisor/islands.py), on-before = commit "
             f"{meta['before']} (one population), off = recompute off; same seed ({meta['seed']}) and "
             f"generations (or budget), workers={meta['workers']}. "
             + (f"Random training graphs: seeds 0-{meta['graphs'] - 1} (8-12 layers, momentum on odd seeds, "
                "random_op_times) at 60% and 75% of no_swap_bytes (tvm_swap.limits.mem_limit). "
                if any(s["what"] == "random training graphs" for s in summary) else "")
             + "Ratios are simulated "
             "iteration times (below 1: faster than the denominator), min / median / max over the cases; slower "
             "/ faster count the cases above / below 1. Cost: evaluations summed over the cases (deterministic); "
             "wall seconds summed, on a shared 2-core machine (indicative).", "",
             "| graphs | gens | cases | on / off | on slower | on faster | on-before / off | on-before slower "
             "| on-before faster | on / on-before | evals off | evals on | evals on-before | on / off evals "
             "| wall off | wall on | wall on-before |",
             "|" + "---|" * 17]
    for s in summary:
        e, w = s["evaluations"], s["wall_s"]
        lines.append("| " + " | ".join([
            s["what"], str(s["generations"]), str(s["cases"]), _stats(s["on_off"]), str(s["on_slower"]),
            str(s["on_faster"]), _stats(s["before_off"]), str(s["before_slower"]), str(s["before_faster"]),
            _stats(s["on_before"]), str(e["off"]), str(e["on"]), str(e["on-before"]),
            f"{e['on'] / e['off']:.2f}x", f"{w['off']:.0f} s", f"{w['on']:.0f} s", f"{w['on-before']:.0f} s"])
            + " |")
    for s in summary:
        if s["what"] != "random training graphs":
            tp = s["throughput_vs_ideal"]
            lines += ["", f"{s['what']} ({s['generations']}{'' if isinstance(s['generations'], str) else ' gens'}): "
                          f"throughput vs ideal off {tp['off'][0]:.3f}, on {tp['on'][0]:.3f}, "
                          f"on-before {tp['on-before'][0]:.3f}."]
        if isinstance(s["generations"], str):        # a wall-clock budget: what each search reached
            g = s["generations_reached"]
            isl = "; ".join(f"{i['name']} island {i['evaluations']} evals" for i in (s["islands"][0] or []))
            lines += ["", f"{s['what']} at a {s['generations']}: generations reached: off {g['off'][0]}, "
                          f"on {g['on'][0]} ({isl}), on-before {g['on-before'][0]}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--graphs", type=int, default=20, help="random training graphs (seeds 0..N-1)")
    ap.add_argument("--generations", default="1,3,10", help="comma list, for the random graphs")
    ap.add_argument("--no-bert", action="store_true", help="skip BERT-large@32 16 GB at 3 generations")
    ap.add_argument("--bert-budget", type=float, default=None,
                    help="also BERT-large@32 16 GB with this wall-clock budget (seconds) instead of generations")
    ap.add_argument("--before", default=BEFORE, help="the commit whose hybrid search is on-before")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "never_slower"), help="path without extension")
    ap.add_argument("--render-only", action="store_true", help="rebuild the .md (and summary) from the .json's rows")
    args = ap.parse_args(argv)
    if args.worker is not None:
        run_worker(json.loads(args.worker))
        return 0
    from tvm_swap.provenance import git_commit

    gens = [int(x) for x in args.generations.split(",") if x]
    todo = cases(args.graphs if gens else 0, gens, not args.no_bert, args.bert_budget)
    out = Path(args.out)
    if args.render_only:
        old = json.loads(out.with_suffix(".json").read_text())
        rows = {(r["id"], r["name"]): r for r in old["rows"]}
        todo = [c for c in todo if (case_id(c), "off") in rows]
        meta = {k: old[k] for k in ("commit", "before", "seed", "workers", "graphs")}
        return _write(out, rows, todo, meta)
    with tempfile.TemporaryDirectory(prefix="never_before_") as tmp:
        archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        rows: dict = {}
        # the random graphs in one process per tree, then each zoo case (one large graph at a time)
        batches = [[c for c in todo if c["kind"] == "random"]] + [[c] for c in todo if c["kind"] != "random"]
        for batch in filter(None, batches):
            rows.update(spawn(ROOT, ["off", "on"], batch, args, "this"))
            rows.update(spawn(Path(tmp), ["on"], batch, args, "before"))
    meta = {"commit": git_commit(), "before": args.before, "seed": args.seed, "workers": args.workers,
            "graphs": args.graphs}
    return _write(out, rows, todo, meta)


def _write(out: Path, rows: dict, todo: list[dict], meta: dict) -> int:
    summary = summarize(rows, todo)
    table = render(summary, meta)
    from bench import record     # here, not at the top: the worker runs this file by path
    record.write(out.with_suffix(".json"), {**meta, "summary": summary,
                                                    "rows": [dict(r, name=k[1]) for k, r in rows.items()]})
    out.with_suffix(".md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
