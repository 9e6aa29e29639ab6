#!/usr/bin/env python
"""K as a choice (issue 26): a training step's plan with its trainable dense weights in the fewest row chunks
that fit the limit (tvm_swap.limits.split_train, what `split_dense=True` compiles) against 2x and 4x as many.

For each model and limit (shares of the unsplit step's no-swap need, between its split floor and the need):
K = the smallest that fits (scale 1) and every K times 2 and 4; each split step lowered (llvm), its ops timed by
the roofline of an H100 (the device the plan is for; no profiling), planned by SwapAdvisor (arena, a fixed
number of generations, seed 0, one worker: the same search for every row) and verified. The table: the
chunks, the ops, the plan's predicted step time and its share over the compute-only time of the unsplit step
(the ideal), and the bytes the plan moves. Then (--calls) the time of one call of the unsplit and the split
steps on llvm (what the chained dX kernels and the extra slices cost on a CPU). Prints the tables and writes
benchmarks/split_k.{json,md}.

    python -m bench split-k
    python -m bench split-k --models mlp@8 --limits 30,50 --scales 1,2 --generations 4
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["mlp@8", "small_cnn@1", "transformer_encoder@8", "bert2@1"]


def step_of(name: str):
    """A training step (SGD, cross-entropy): `model@batch` of the MXNet fixtures, or `bertN@1` (the
    BERT-base-sized step with N encoder layers, bench.min_limit.bert_step)."""
    from bench.min_limit import bert_step, mxnet_module
    from tvm_swap.training import train_step

    model, batch = name.split("@")
    if model.startswith("bert"):
        import tempfile

        return bert_step(Path(tempfile.mkdtemp(prefix="bert-")), int(model[4:]))
    mod, prm = mxnet_module(model, int(batch))
    return train_step(mod, prm, loss="cross_entropy", optimizer="sgd")[0]


def _lower_graph(m):
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax

    low = lower(m, "llvm")
    return low, graph_from_relax(low, "main", target="llvm")


def plan_row(name: str, share: float, scale: int, step, unsplit, need: int, ideal: float, generations: int):
    from tvm_swap.cost.devices import get_device
    from tvm_swap.cost.roofline import roofline_times
    from relay_passes.split_dense_train import SplitTrainableDense, trainable_splittable
    from tvm_swap.limits.split_train import fits, split_train_to_fit
    from tvm_swap.planner.api import infeasible_floor, plan_graph

    limit = int(need * share)
    _, _, graph, splits = split_train_to_fit(step, limit, _lower_graph, "main", "arena", first=(None, unsplit))
    if not splits and not fits(graph, limit, "arena", 256, infeasible_floor):
        return {"model": name, "share": share, "limit": limit, "scale": scale, "splits": {}, "infeasible": True}
    if scale > 1 and splits:      # every K of the smallest fit, times `scale` (at most the weight's rows)
        rows = trainable_splittable(step["main"])
        splits = {w: min(k * scale, rows[w][0]) for w, k in splits.items()}
        graph = _lower_graph(SplitTrainableDense(splits)(step))[1]
    row = {"model": name, "share": share, "limit": limit, "scale": scale, "splits": splits, "ops": graph.num_ops}
    spec = get_device("h100")
    t = time.process_time()
    plan = plan_graph(graph, limit, device=spec, op_time=roofline_times(graph, spec), planner="swapadvisor",
                      generations=generations, seed=0, workers=1, pool="arena")
    p = plan.predicted
    return {**row, "verified": bool(plan.verified), "time_s": float(p["time_s"]), "over_ideal": p["time_s"] / ideal,
            "moved_bytes": int(p.get("swap_out_bytes", 0)) + int(p.get("swap_in_bytes", 0)),
            "plan_cpu_s": time.process_time() - t}


def auto_row(name: str, share: float, step, unsplit, need: int, ideal: float, generations: int) -> dict:
    """split_k="auto" (tvm_swap.limits.split_k.choose_k, as the pipeline runs it): 1x, 2x and 4x the fewest
    chunks, each lowered and planned with the same search as the rows above unless its lower bound is no faster
    than the best plan so far; the fastest kept. cpu_s: the whole choice (the 2x and 4x lowerings included)."""
    from tvm_swap.cost.devices import get_device
    from tvm_swap.cost.roofline import roofline_times
    from tvm_swap.limits.split_k import candidate_splits, choose_k
    from tvm_swap.limits.split_to_fit import resplit, split_maxima
    from tvm_swap.limits.split_train import fits, split_train_to_fit
    from tvm_swap.planner.api import infeasible_floor, plan_graph
    from tvm_swap.planner.bounds import lower_bound

    limit, spec = int(need * share), get_device("h100")
    _, _, graph, splits = split_train_to_fit(step, limit, _lower_graph, "main", "arena", first=(None, unsplit))
    if not splits:
        return {}
    t = time.process_time()

    def build(ks):
        g = graph if ks == splits else _lower_graph(resplit(step, ks))[1]
        if ks != splits and not fits(g, limit, "arena", 256, infeasible_floor):
            return "its graph does not fit the limit"
        return g

    def plan_one(g, _share):
        return plan_graph(g, limit, device=spec, op_time=roofline_times(g, spec), planner="swapadvisor",
                          generations=generations, seed=0, workers=1, pool="arena")

    best, cands = choose_k(candidate_splits(splits, split_maxima(step)), build,
                           lambda g: lower_bound(g, roofline_times(g, spec), spec, limit), plan_one, 1.0)
    p = best.plan.predicted
    return {"model": name, "share": share, "limit": limit, "scale": "auto", "splits": best.splits,
            "chosen_scale": best.scale, "ops": best.built.num_ops, "verified": bool(best.plan.verified),
            "time_s": float(p["time_s"]), "over_ideal": p["time_s"] / ideal,
            "moved_bytes": int(p.get("swap_out_bytes", 0)) + int(p.get("swap_in_bytes", 0)),
            "plan_cpu_s": time.process_time() - t, "candidates": cands}


def measure(name: str, shares, scales, generations: int, auto: bool = True) -> list[dict]:
    from tvm_swap.cost.devices import get_device
    from tvm_swap.cost.roofline import roofline_times
    from tvm_swap.planner.bounds import noswap_peak

    step = step_of(name)
    _, unsplit = _lower_graph(step)
    need = int(noswap_peak(unsplit))
    ideal = float(sum(roofline_times(unsplit, get_device("h100"))))
    rows = []
    for share in shares:
        for scale in scales:
            r = plan_row(name, share, scale, step, unsplit, need, ideal, generations)
            print(_line(r), flush=True)
            rows.append(r)
            if not r["splits"]:
                break           # (fits unsplit, or nothing fits: no K to scale)
        if auto and rows[-1]["splits"]:
            r = auto_row(name, share, step, unsplit, need, ideal, generations)
            print(_line(r), flush=True)
            rows.append(r)
    return rows


def _line(r: dict) -> str:
    ks = ", ".join(f"{w} x{k}" for w, k in r["splits"].items()) or "none"
    if r.get("infeasible"):
        return f"{r['model']:22s} {r['share']:4.0%} scale {r['scale']}: no split fits"
    if r["scale"] == "auto":
        ks += f" (chose {r['chosen_scale']}x; plan+choice {r['plan_cpu_s']:.1f} CPU s)"
    return (f"{r['model']:22s} {r['share']:4.0%} scale {r['scale']}: {r['ops']:4d} ops, {r['time_s'] * 1e3:9.3f} ms "
            f"({r['over_ideal']:.3f}x ideal), moved {r['moved_bytes'] / 1e6:.2f} MB; {ks}")


def call_seconds(step, repeat: int) -> float:
    """Median seconds of one call of `step` (llvm, TVM's own memory plan; random inputs and params)."""
    import numpy as np
    import tvm
    from tvm import relax

    from relay_passes.lower import build_lowered, lower

    from bench.split_cost import median_call_seconds

    vm = relax.VirtualMachine(build_lowered(lower(step, "llvm"), "llvm"), tvm.cpu())
    rng = np.random.default_rng(0)
    args = []
    for p in step["main"].params:
        shape, dtype = [int(d) for d in p.ty.shape.values], str(p.ty.dtype.dtype)
        a = rng.integers(0, 2, shape) if "int" in dtype else rng.standard_normal(shape) * 0.1
        args.append(tvm.runtime.tensor(a.astype(dtype)))
    return median_call_seconds(vm["main"], args, repeat)


def call_cost(name: str, splits: dict, scales, repeat: int) -> list[dict]:
    """Time per call of the unsplit step and of the split ones (each K of `splits` times each scale)."""
    from relay_passes.split_dense_train import SplitTrainableDense, trainable_splittable

    step = step_of(name)
    rows = trainable_splittable(step["main"])
    base = call_seconds(step, repeat)
    out = []
    for scale in scales:
        ks = {w: min(k * scale, rows[w][0]) for w, k in splits.items()}
        t = call_seconds(SplitTrainableDense(ks)(step), repeat)
        out.append({"model": name, "splits": ks, "unsplit_s": base, "split_s": t, "ratio": t / base})
        print(f"{name:22s} call: unsplit {base * 1e3:.2f} ms, {ks}: {t * 1e3:.2f} ms ({t / base:.2f}x)", flush=True)
    return out


def render_calls(rows: list[dict]) -> str:
    out = ["", "## Time per call, llvm (TVM's own memory plan, median; shared loaded 2-core machine: read the ratios)",
           "", "| model | chunks | unsplit | split | ratio |", "|---|---|---|---|---|"]
    for r in rows:
        ks = ", ".join(f"{w} x{k}" for w, k in r["splits"].items())
        out.append(f"| {r['model']} | {ks} | {r['unsplit_s'] * 1e3:.2f} ms | {r['split_s'] * 1e3:.2f} ms | "
                   f"{r['ratio']:.2f} |")
    return "\n".join(out) + "\n"


def render(rows: list[dict], commit: str) -> str:
    out = ["# K as a choice: the fewest row chunks that fit vs 2x and 4x (training steps)", "",
           f"Commit {commit}. Predicted step time of a verified SwapAdvisor arena plan (H100 roofline op times, the "
           f"same fixed search for every row) over the compute-only time of the unsplit step. `bench/split_k.py`.", "",
           "| model | limit (% of no-swap need) | K scale | ops | predicted step | x ideal | moved | chunks |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("infeasible"):
            out.append(f"| {r['model']} | {r['share']:.0%} | {r['scale']} | | no split fits | | | |")
            continue
        ks = ", ".join(f"{w} x{k}" for w, k in r["splits"].items()) or "none (fits unsplit)"
        out.append(f"| {r['model']} | {r['share']:.0%} | {r['scale']} | {r['ops']} | {r['time_s'] * 1e3:.3f} ms | "
                   f"{r['over_ideal']:.3f} | {r['moved_bytes'] / 1e6:.2f} MB | {ks} |")
    return "\n".join(out) + "\n"


def render_summary(rows: list[dict]) -> str:
    """One line per model and limit: x ideal at each scale, auto's choice, and the CPU seconds of fewest
    (scale 1's plan) and auto (its whole choice)."""
    out = ["", "## auto next to the fixed scales (x ideal; CPU s of planning: fewest = scale 1's plan, auto = "
           "its whole choice, the extra lowerings included)", "",
           "| model | limit | x1 | x2 | x4 | auto (chosen) | CPU s fewest | CPU s auto |", "|---|---|---|---|---|---|---|---|"]
    keys = []
    for r in rows:
        if (r["model"], r["share"]) not in keys:
            keys.append((r["model"], r["share"]))
    for model, share in keys:
        at = {r["scale"]: r for r in rows if r["model"] == model and r["share"] == share and "over_ideal" in r}
        x = [f"{at[s]['over_ideal']:.3f}" if s in at else "" for s in (1, 2, 4)]
        a = at.get("auto")
        auto = f"{a['over_ideal']:.3f} ({a['chosen_scale']}x)" if a else "(no split)"
        cpu = [f"{at[1]['plan_cpu_s']:.1f}" if 1 in at else "", f"{a['plan_cpu_s']:.1f}" if a else ""]
        out.append(f"| {model} | {share:.0%} | {' | '.join(x)} | {auto} | {' | '.join(cpu)} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--limits", default="30,50,70", help="percent of the unsplit step's no-swap need")
    ap.add_argument("--scales", default="1,2,4", help="K times these (1: the smallest K that fits)")
    ap.add_argument("--generations", type=int, default=6)
    ap.add_argument("--calls", default="mlp@8,small_cnn@1,transformer_encoder@8", help="also time one call of "
                    "these steps (llvm) unsplit and split as planned at the lowest limit ('' for none)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-auto", action="store_true", help="skip the split_k='auto' row")
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks"))
    args = ap.parse_args(argv)
    from tvm_swap.provenance import git_commit

    shares = [float(x) / 100 for x in args.limits.split(",") if x]
    scales = [int(x) for x in args.scales.split(",") if x]
    rows = []
    for name in [m for m in args.models.split(",") if m]:
        rows += measure(name, shares, scales, args.generations, auto=not args.no_auto)
    calls = []
    for name in [m for m in args.calls.split(",") if m]:
        planned = [r for r in rows if r["model"] == name and r["scale"] == 1 and r["splits"] and "ops" in r]
        if planned:     # the smallest K at the lowest limit that needed a split
            calls += call_cost(name, min(planned, key=lambda r: r["share"])["splits"], scales, args.repeat)
    commit = git_commit()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    record.write(out / "split_k.json", {"commit": commit, "rows": rows, "calls": calls})
    text = render(rows, commit) + render_summary(rows) + (render_calls(calls) if calls else "")
    (out / "split_k.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
