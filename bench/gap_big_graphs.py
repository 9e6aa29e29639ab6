#!/usr/bin/env python
"""The big-graph check of a small-graph planner change: swapadvisor's predicted time on BERT-large@32 and
WResNet-152-10@64 under 16 GB (v100-16gb) at a fixed number of GA generations (seed 0, one worker), so a change
that helps bench.gap's 8-20-op graphs can be checked not to hurt these. Run it once per commit (before / after,
one shell) and compare the times; prints a table and writes JSON with the commit.

    python -m bench gap-big-graphs --out /tmp/big_after.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

from tvm_swap.cost.devices import get_device  # noqa: E402
from tvm_swap.planner.api import plan_graph  # noqa: E402
from tvm_swap.provenance import git_commit  # noqa: E402
from tvm_swap.zoo import load_zoo  # noqa: E402

MODELS = ("bert-large@batch=32", "wresnet-152-10@batch=64")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generations", type=int, default=3)
    ap.add_argument("--limit", type=int, default=16_000_000_000, help="bytes")
    ap.add_argument("--out", required=True, help="JSON to write")
    args = ap.parse_args(argv)
    out = {"commit": git_commit(), "generations": args.generations, "limit": args.limit, "rows": []}
    print(f"commit {out['commit']}, {args.generations} generations, limit {args.limit} B, v100-16gb")
    print("| model | predicted time (s) | of ideal | verified | planning wall (s) |\n|---|---|---|---|---|")
    for name in MODELS:
        g = load_zoo(f"zoo:{name}")
        t0 = time.perf_counter()
        p = plan_graph(g, mem_limit=args.limit, device=get_device("v100-16gb"), planner="swapadvisor", seed=0,
                       workers=1, generations=args.generations, progress=False)
        r = {"model": name, "time_s": p.predicted["time_s"], "vs_ideal": p.predicted.get("throughput_vs_ideal"),
             "verified": bool(p.verified), "wall_s": time.perf_counter() - t0}
        out["rows"].append(r)
        print(f"| {name} | {r['time_s']:.4f} | {r['vs_ideal']:.3f} | {r['verified']} | {r['wall_s']:.0f} |", flush=True)
    record.write(Path(args.out), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
