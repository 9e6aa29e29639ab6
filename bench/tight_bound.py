#!/usr/bin/env python
"""The tight lower bound on the paper's 13 points: its value, what it adds, how long it takes, and one cheap
planner's (swapadvisor-nosearch, planned now on the current graph) time over it.

    python -m bench tight-bound            # about 3 minutes on 2 cores
Writes benchmarks/tight_bound.{json,md} with the git commit.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

from tvm_swap.cost.devices import get_device  # noqa: E402
from tvm_swap.planner.api import plan_graph, resolve_op_time  # noqa: E402
from tvm_swap.planner.tight_bound import tight_lower_bound_detail  # noqa: E402
from tvm_swap.units import format_bytes  # noqa: E402
from tvm_swap.zoo import load_zoo  # noqa: E402

POINTS = [("rnn-8-8k", 128), ("rnn-8-8k", 256), ("brnn-4-8k", 64), ("brnn-4-8k", 128), ("wresnet-152-10", 16),
          ("wresnet-152-10", 32), ("wresnet-152-10", 64), ("inception-4", 16), ("inception-4", 32),
          ("inception-4", 64), ("bert-large", 8), ("bert-large", 16), ("bert-large", 32)]
LIMIT = 16 * 10**9
DEVICE = "v100-16gb"


def main() -> int:
    dev = get_device(DEVICE)
    from tvm_swap.provenance import git_commit
    commit = git_commit()
    rows = []
    for name, batch in POINTS:
        g = load_zoo(f"{name}@batch={batch}")
        t = resolve_op_time(g, dev, None)
        t0 = time.perf_counter()
        d = tight_lower_bound_detail(g, t, dev, LIMIT)
        bound_s = time.perf_counter() - t0
        plan = plan_graph(g, LIMIT, device=dev, op_time=t, planner="swapadvisor-nosearch", workers=1)
        row = {"model": name, "batch": batch, "ops": g.num_ops, "ideal_s": float(t.sum()),
               "lower_bound_s": d["lower_bound_s"], "tight_lower_bound_s": d["tight_lower_bound_s"],
               "activation_bytes": d["activation_bytes"], "window_s": d["tight_window_s"],
               "bound_compute_s": bound_s, "nosearch_time_s": plan.predicted["time_s"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    lines = [f"# Tight lower bound on the paper's points ({DEVICE}, limit 16 GB, commit {commit})", "",
             "| model | batch | ops | ideal | old LB | tight LB | activations that must cross (each way) | "
             "time-window term | bound computed in | nosearch time / tight LB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['batch']} | {r['ops']} | {r['ideal_s']:.3f} s | "
                     f"{r['lower_bound_s']:.3f} s | {r['tight_lower_bound_s']:.3f} s | "
                     f"{format_bytes(r['activation_bytes'])} | {r['window_s']:.3f} s | {r['bound_compute_s']:.2f} s | "
                     f"{r['nosearch_time_s'] / r['tight_lower_bound_s']:.2f}x |")
    md = "\n".join(lines) + "\n"
    out = ROOT / "benchmarks" / "tight_bound"
    record.write(out.with_suffix(".json"), {"commit": commit, "device": DEVICE, "limit": LIMIT, "rows": rows})
    out.with_suffix(".md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
