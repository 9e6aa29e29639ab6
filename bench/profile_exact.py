#!/usr/bin/env python
"""Where does the exact stage model (tvm_swap/planner/exact.py) spend its time on one instance?

Per graph (bench_gap.instance_graph, one limit fraction, schedule free, no warm start): seconds to build the
rows in Python, to hand them to CP-SAT, and in CP-SAT's solve; the model's size per family of rows (rows,
nonzeros, and rows left once the fixed-to-zero variables are dropped); the LP relaxation's value (HiGHS)
against the sum of op times and the solver's final bound.

    python -m bench profile-exact --graphs 20 12 --limit-s 30
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
from bench.gap import DEVICE, instance_graph  # noqa: E402
from tvm_swap.cost.devices import get_device  # noqa: E402
from tvm_swap.planner import exact  # noqa: E402
from tvm_swap.planner.bounds import noswap_peak  # noqa: E402
from tvm_swap.planner.feasibility import min_feasible_limit  # noqa: E402
from tvm_swap.testing import random_op_times  # noqa: E402


def lp_value(V, C, lo, hi, stage_cols) -> float:
    """The LP relaxation's optimum (stage seconds only, no copy tie-break), by HiGHS."""
    from scipy.optimize import linprog
    from scipy.sparse import csr_array, vstack

    A = csr_array((C.v, (C.r, C.c)), shape=(len(C.lo), V.n)).tocsr()
    rlo, rhi = np.array(C.lo), np.array(C.hi)
    up, dn = np.isfinite(rhi), np.isfinite(rlo)
    cost = np.zeros(V.n)
    cost[stage_cols] = 1.0
    res = linprog(cost, A_ub=vstack([A[up], -A[dn]]), b_ub=np.concatenate([rhi[up], -rlo[dn]]),
                  bounds=list(zip(lo, hi)), method="highs")
    return float(res.fun) if res.status == 0 else float("nan")


def profile(i: int, frac: float, limit_s: float, workers: int, lp: bool, **kw) -> dict:
    dev = get_device(DEVICE)
    g = instance_graph(i)
    t = random_op_times(g, 0)
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    limit = int(lo + frac * (hi - lo))
    seen = {}
    real = exact._solve_cpsat

    def spy(V, C, lo_, hi_, stage_cols, copy_cols, total, tl, w, hint, *more):
        seen["build_s"] = time.perf_counter() - t0
        seen.update(V=V, C=C, lo=lo_.copy(), hi=hi_.copy(), stage_cols=stage_cols)
        t1 = time.perf_counter()
        out = real(V, C, lo_, hi_, stage_cols, copy_cols, total, tl, w, hint, *more)
        seen["cpsat_total_s"] = time.perf_counter() - t1
        return out

    exact._solve_cpsat = spy
    try:
        t0 = time.perf_counter()
        r = exact.solve_exact(g, t, dev, limit, time_limit_s=limit_s, backend="cpsat", workers=workers, **kw)
    finally:
        exact._solve_cpsat = real
    C, V = seen["C"], seen["V"]
    free_col = seen["hi"] > 0
    row_live = np.zeros(len(C.lo), dtype=bool)
    np.logical_or.at(row_live, np.array(C.r), free_col[np.array(C.c)])
    fams, prev_rows, prev_nnz = [], 0, 0
    for name, rows, nnz in C.sections:
        fams.append((name, rows - prev_rows, nnz - prev_nnz, int(row_live[prev_rows:rows].sum())))
        prev_rows, prev_nnz = rows, nnz
    out = {"graph": g.name, "ops": g.num_ops, "tensors": len(g.used_tensors()), "vars": V.n,
           "vars_free": int(free_col.sum()), "rows": len(C.lo), "nnz": len(C.v), "families": fams,
           "build_s": seen["build_s"], "to_cpsat_s": seen["cpsat_total_s"] - r.solve_s, "solve_s": r.solve_s,
           "status": r.status, "objective_s": r.objective_s, "mip_gap": r.mip_gap, "compute_s": float(np.sum(t))}
    if lp:
        out["lp_s"] = lp_value(V, C, seen["lo"], seen["hi"], seen["stage_cols"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", type=int, nargs="+", default=[20, 12])
    ap.add_argument("--frac", type=float, default=0.4)
    ap.add_argument("--limit-s", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--no-lp", action="store_true", help="skip the LP relaxation")
    args = ap.parse_args(argv)
    for i in args.graphs:
        p = profile(i, args.frac, args.limit_s, args.workers, not args.no_lp)
        print(f"## {p['graph']}: {p['ops']} ops, {p['tensors']} tensors; {p['vars']} vars ({p['vars_free']} not fixed), "
              f"{p['rows']} rows, {p['nnz']} nonzeros")
        gap = "-" if p["mip_gap"] is None else f"{100 * p['mip_gap']:.1f}%"
        print(f"build {p['build_s']:.2f} s, to CP-SAT {p['to_cpsat_s']:.2f} s, solve {p['solve_s']:.1f} s: "
              f"{p['status']}, gap {gap}; "
              f"objective / compute {p['objective_s'] / p['compute_s']:.3f}"
              + (f", LP relaxation / compute {p['lp_s'] / p['compute_s']:.3f}" if "lp_s" in p else ""))
        print("| rows of | rows | nonzeros | rows with a free variable |")
        print("|---|---|---|---|")
        for name, rows, nnz, live in p["families"]:
            print(f"| {name} | {rows} | {nnz} | {live} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
