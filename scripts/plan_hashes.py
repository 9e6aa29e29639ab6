"""Plan JSON hashes for fixed inputs: a before/after check that a refactoring changed no plan.

    python scripts/plan_hashes.py > hashes.txt      # one line per (graph, planner, limit): sha256 of the plan

Every plan is made at a fixed seed and a fixed GA generation count in one process (workers=1), so it is
reproducible. The hash covers the whole plan JSON except the wall-clock fields of `search` (search_s and the
elapsed column of history), which differ from run to run.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys

EXAMPLES = ("mlp", "cnn", "mlp-train", "cnn-train")
ZOO = ("zoo:rnn-8-8k@batch=128", "zoo:wresnet-152-10@batch=16")
# Spelled out rather than read from tvm_swap.planner.registry, so the script also runs on trees without it.
PLANNERS = ("swapadvisor", "swapadvisor-nosearch", "odswap", "vdnn", "noswap")


def example_graph(name: str):
    from relay_passes.lower import lower
    from tvm_swap.examples import EXAMPLES as builders
    from tvm_swap.graph import from_relax

    mod, _, _ = builders[name]()
    return from_relax(lower(mod, target="llvm"), name=name)


def zoo_graph(spec: str):
    from tvm_swap.zoo import load_zoo

    return load_zoo(spec)


def stable_json(plan) -> str:
    d = plan.to_dict()
    search = dict(d.get("search") or {})
    search.pop("search_s", None)
    search["history"] = [[h[0], *h[2:]] for h in search.get("history", [])]   # drop elapsed seconds
    d["search"] = search
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generations", type=int, default=4, help="GA generations (fixed for reproducibility)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-zoo", action="store_true")
    args = ap.parse_args(argv)
    import tvm_swap

    jobs = [(n, example_graph, lim) for n in EXAMPLES for lim in ("60%", "35%")]
    if not args.skip_zoo:
        jobs += [(s, zoo_graph, "16GB") for s in ZOO]
    for spec, load, limit in jobs:
        graph = load(spec)
        for planner in PLANNERS:
            lim = "100%" if planner == "noswap" else limit
            try:
                plan = tvm_swap.plan(graph, mem_limit=lim, device="v100-16gb", planner=planner, seed=args.seed,
                                     generations=args.generations, workers=1)
                digest = hashlib.sha256(stable_json(plan).encode()).hexdigest()
            except tvm_swap.InfeasibleLimitError as e:
                digest = "infeasible:" + hashlib.sha256(str(e).encode()).hexdigest()[:16]
            except tvm_swap.TvmSwapError as e:
                digest = "error:" + hashlib.sha256(str(e).encode()).hexdigest()[:16]
            print(f"{spec}\t{planner}\t{lim}\t{digest}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
