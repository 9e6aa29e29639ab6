#!/usr/bin/env python
"""A zoo graph refused at a limit, planned once the ops that set its floor run as K slices of the batch (issue 26).

For each point (default: WResNet-152-10 at batch 256 under 16 GB, the paper's device): the graph as stored
(each kernel's workspace a one-op tensor) and with `,split=K` (tvm_swap/zoo/batch_split.py): ops, the no-swap
need and its ratio to the limit, the arena floor, and, where the floor is under the limit, the SwapAdvisor plan
(verified by plan_graph) with its predicted time and throughput as a fraction of the ideal: the split graph's
own ideal and the unsplit graph's (the same model with unlimited memory and no split; the roofline sums of op
times, v100-16gb). Prints a table and writes benchmarks/zoo_split.json.

    python -m bench zoo-split
    python -m bench zoo-split --points wresnet-152-10@batch=256 --splits 1,2,4 --budget-s 60
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent


def row(point: str, k: int, limit: int, budget_s: float, device: str, base_ideal: float | None) -> dict:
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import feasible_floor, plan_graph, resolve_op_time
    from tvm_swap.planner.bounds import ideal_time, noswap_peak
    from tvm_swap.zoo import load_zoo

    g = load_zoo(f"zoo:{point}" + (f",split={k}" if k > 1 else ""))
    need = noswap_peak(g)
    floor, _ = feasible_floor(g, "arena")
    ideal = ideal_time(g, resolve_op_time(g, get_device(device), None))
    out = {"point": point, "split": k, "ops": g.num_ops, "need_bytes": int(need), "need_vs_limit": need / limit,
           "floor_bytes": int(floor), "ideal_s": ideal, "unsplit_ideal_s": base_ideal if base_ideal else ideal}
    if floor > limit:
        out["status"] = "refused (floor over the limit)"
        return out
    t0, c0 = time.time(), time.process_time()
    plan = plan_graph(g, limit, device=device, planner="swapadvisor", pool="arena", budget_s=budget_s, workers=1)
    p = plan.predicted
    out.update({"status": "ok", "time_s": p["time_s"], "peak_bytes": p["peak_bytes"],
                "vs_ideal": p["ideal_time_s"] / p["time_s"], "vs_unsplit_ideal": out["unsplit_ideal_s"] / p["time_s"],
                "plan_wall_s": round(time.time() - t0, 1), "plan_cpu_s": round(time.process_time() - c0, 1)})
    return out


def render(rows: list[dict], limit: int) -> str:
    from tvm_swap.units import format_bytes

    head = ["point", "K", "ops", "need/limit", "floor", "status", "time", "vs ideal", "vs unsplit ideal", "plan CPU s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ok = r["status"] == "ok"
        cells = [r["point"], str(r["split"]), str(r["ops"]), f"{r['need_vs_limit']:.1f}x", format_bytes(r["floor_bytes"]),
                 r["status"], f"{r['time_s']:.2f} s" if ok else "-", f"{r['vs_ideal']:.3f}" if ok else "-",
                 f"{r['vs_unsplit_ideal']:.3f}" if ok else "-", str(r["plan_cpu_s"]) if ok else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return f"limit {format_bytes(limit)} ({limit} bytes)\n\n" + "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", default="wresnet-152-10@batch=256", help="comma list NAME@batch=B")
    ap.add_argument("--splits", default="1,2,4", help="comma list of K (1: as stored)")
    ap.add_argument("--mem-limit", default="16GB")
    ap.add_argument("--budget-s", type=float, default=60.0, help="search wall-clock budget per plan")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks"))
    args = ap.parse_args(argv)
    from tvm_swap.units import parse_bytes

    run = record.start()
    limit = int(parse_bytes(args.mem_limit))
    rows = []
    for point in [p for p in args.points.split(",") if p]:
        base_ideal = None
        for k in (int(x) for x in args.splits.split(",") if x):
            r = row(point, k, limit, args.budget_s, args.device, base_ideal)
            base_ideal = base_ideal or (r["ideal_s"] if k == 1 else None)
            rows.append(r)
            print(r, flush=True)
    print(render(rows, limit))
    record.write(Path(args.out_dir) / "zoo_split.json", {"mem_limit": limit, "rows": rows}, run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
