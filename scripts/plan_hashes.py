"""Plan JSON hashes for fixed inputs: a before/after check that a refactoring changed no plan.

    python scripts/plan_hashes.py > hashes.txt      # one line per (graph, planner, limit): sha256 of the plan
    python scripts/plan_hashes.py --fuzz 40 --skip-examples --skip-zoo   # scripts/fuzz.py's first 40 cases,
                                                    # every planner and variant it fuzzes, at each case's limit

Every plan is made at a fixed seed and a fixed GA generation count in one process (workers=1), so it is
reproducible. The hash covers the whole plan JSON except the wall-clock fields of `search` (search_s and the
elapsed column of history), which differ from run to run.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

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
    ap.add_argument("--skip-examples", action="store_true")
    ap.add_argument("--fuzz", type=int, default=0, metavar="N",
                    help="also the plans of scripts/fuzz.py's cases 0..N-1 (their own seeds and GA settings)")
    args = ap.parse_args(argv)
    import tvm_swap

    jobs = [] if args.skip_examples else [(n, example_graph, lim) for n in EXAMPLES for lim in ("60%", "35%")]
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
    if args.fuzz:
        fuzz_hashes(args.fuzz)
    return 0


def fuzz_hashes(n: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fuzz
    import tvm_swap

    for seed in range(n):
        case = fuzz.draw_case(seed)
        for planner in fuzz.ALL_PLANNERS:
            try:
                digest = hashlib.sha256(stable_json(fuzz._plan(case, planner, case.limit)).encode()).hexdigest()
            except tvm_swap.TvmSwapError as e:
                digest = "error:" + hashlib.sha256(str(e).encode()).hexdigest()[:16]
            print(f"fuzz:{seed}\t{planner}\t{case.limit}\t{digest}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
