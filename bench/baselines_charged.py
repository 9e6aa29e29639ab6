#!/usr/bin/env python
"""odswap and vdnn with every copy charged: what reading a kept param back from the host costs them.

An updated param kept on the device between iterations has an old value on the host unless its update (or
the param, before it is read back) is copied out. The verifier refuses a swap-in from such a stale copy and the
runtime no longer refreshes one behind the plan's back. The baselines' on-demand walker copies a kept updated
param out when it evicts it (`OnDemandWalker.stale_host`). For each point this prints, side by side in one run:

- charged: the baseline as it plans (the copy-outs in its plan and in its simulated time), with the bytes of
  the copy-outs of kept updated params, the swap-ins that read a kept param back, the stale host reads the
  verifier finds (must be 0) and the bytes the old runtime would have refreshed uncharged at the end of a call
  (its rule: a kept param first used from the host, its update never copied out; must be 0);
- flattered: the same walker told that a kept param's host copy is always current (no copy-out on eviction),
  the plan the loophole let through: its simulated time, and what the verifier and the old runtime rule say.

    python -m bench baselines-charged
    python -m bench baselines-charged --points bert-large@batch=16 --mem-limit 16GB
Writes benchmarks/baselines_charged.json (with the commit measured) and prints a markdown table.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

POINTS = ("wresnet-152-10@batch=32", "rnn-8-8k@batch=128", "bert-large@batch=16")
PLANNERS = ("odswap", "vdnn")


@contextlib.contextmanager
def flattered():
    """Walkers that believe every param's host copy is current (the loophole: no copy-out on eviction)."""
    from tvm_swap.planner.baselines.walker import OnDemandWalker

    init = OnDemandWalker.__init__

    def patched(self, *a, **k):
        init(self, *a, **k)
        self.stale_host = set()

    OnDemandWalker.__init__ = patched
    try:
        yield
    finally:
        OnDemandWalker.__init__ = init


def old_runtime_refresh_bytes(graph, plan) -> int:
    """Bytes the runtime before this change copied device->host at the end of every call, outside the plan: a
    kept updated param whose first host use is a swap-in and whose update is never copied out."""
    upd_of = {old: new for new, old in graph.updates.items()}
    init = {t for t, _ in plan.initial_residents}
    first: dict[int, str] = {}
    outs = set()
    for a in plan.actions:
        if a.kind == "swap_out":
            first.setdefault(a.tensor, "out")
            outs.add(a.tensor)
        elif a.kind == "swap_in":
            first.setdefault(a.tensor, "in")
    return sum(graph.tensors[p].nbytes for p in init
               if p in upd_of and first.get(p) == "in" and upd_of[p] not in outs)


def facts(graph, plan, op_time, device) -> dict:
    from tvm_swap.planner.api import predict
    from tvm_swap.verify import verify_plan

    pred = predict(graph, plan, op_time, device)
    upd_of = {old: new for new, old in graph.updates.items()}
    kept = {t for t, _ in plan.initial_residents if t in upd_of}
    v = verify_plan(graph, plan)
    nb = lambda ts: sum(graph.tensors[t].nbytes for t in ts)  # noqa: E731
    return {
        "time_s": pred["time_s"], "vs_ideal": pred["throughput_vs_ideal"],
        "d2h_bytes": nb(a.tensor for a in plan.actions if a.kind == "swap_out"),
        "kept_param_copy_out_bytes": nb(a.tensor for a in plan.actions if a.kind == "swap_out" and a.tensor in kept),
        "kept_param_reads_back": sum(1 for a in plan.actions if a.kind == "swap_in" and a.tensor in kept),
        "stale_host_reads": sum(1 for x in v if "stale host copy" in x),
        "other_violations": sum(1 for x in v if "stale host copy" not in x),
        "old_runtime_refresh_bytes": old_runtime_refresh_bytes(graph, plan),
    }


def bench_point(spec: str, planner: str, args) -> dict:
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner import PLANNERS as REGISTRY
    from tvm_swap.planner.api import plan_graph, resolve_limit, resolve_op_time
    from tvm_swap.planner.context import PlanningContext
    from tvm_swap.zoo import load_zoo

    g = load_zoo(f"zoo:{spec}")
    dev = get_device(args.device)
    times = resolve_op_time(g, dev, None)
    limit = resolve_limit(g, args.mem_limit)
    row = {"point": spec, "planner": planner, "ops": g.num_ops, "limit_bytes": limit}
    t0 = time.perf_counter()
    plan = plan_graph(g, limit, dev, planner=planner, seed=args.seed, workers=1)
    row["charged"] = facts(g, plan, times, dev)
    row["plan_s"] = round(time.perf_counter() - t0, 2)
    with flattered():
        ctx = PlanningContext(g, times, dev, limit, 256, args.seed, 60.0, None, 1, False, {}, "size-classes")
        row["flattered"] = facts(g, REGISTRY[planner](ctx), times, dev)
    return row


def render(rows: list[dict], commit: str, mem_limit: str) -> str:
    gb = lambda b: f"{b / 1e9:.2f}"  # noqa: E731
    out = [f"odswap and vdnn at {mem_limit} on v100-16gb, commit {commit}. charged: the plan as the baseline makes it "
           f"(verified); flattered: the same walker with no copy-out of an evicted kept param (what the loophole "
           f"let through). GB = 1e9 bytes.", "",
           "| point | planner | charged time s (vs ideal) | flattered time s (vs ideal) | kept-param copy-outs GB "
           "| kept params read back | stale host reads: charged / flattered | old runtime's uncharged refresh GB: "
           "charged / flattered |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c, f = r["charged"], r["flattered"]
        out.append(f"| {r['point']} | {r['planner']} | {c['time_s']:.3f} ({c['vs_ideal']:.3f}) | "
                   f"{f['time_s']:.3f} ({f['vs_ideal']:.3f}) | {gb(c['kept_param_copy_out_bytes'])} | "
                   f"{c['kept_param_reads_back']} | {c['stale_host_reads']} / {f['stale_host_reads']} | "
                   f"{gb(c['old_runtime_refresh_bytes'])} / {gb(f['old_runtime_refresh_bytes'])} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", default=",".join(POINTS), help="comma list NAME@batch=B")
    ap.add_argument("--planners", default=",".join(PLANNERS))
    ap.add_argument("--mem-limit", default=str(16 * 10**9), help="bytes or 16GB (default 16e9, as bench.paper)")
    ap.add_argument("--device", default="v100-16gb")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "baselines_charged.json"))
    args = ap.parse_args(argv)
    from tvm_swap.provenance import git_commit

    commit = git_commit()
    rows = []
    for spec in args.points.split(","):
        for planner in args.planners.split(","):
            rows.append(bench_point(spec, planner, args))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    record.write(Path(args.json), {"commit": commit, "mem_limit": args.mem_limit, "device": args.device,
                                           "rows": rows})
    print(render(rows, commit, args.mem_limit))
    bad = [r for r in rows if r["charged"]["stale_host_reads"] or r["charged"]["other_violations"]
           or r["charged"]["old_runtime_refresh_bytes"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
