"""Second compile of the same model: kernel timings and the unlimited build from the disk cache.

    python -m bench second-compile [--models cnn-train resnet50-train] [--out bench_second_compile.json]

Models: any MODEL `tvm-swap compile` takes, or resnet50-train: Gluon's ResNet-50 v1 as a symbol file alone
(scripts/make_resnet50_symbol.py), batch 2, random weights, one SGD training step (`--init random --train`).

Each model is compiled twice with `tvm-swap compile` in a fresh process against an empty cache folder
($TVM_SWAP_CACHE_DIR): the first fills the cache, the second reads it. Prints the wall time of each and the
pipeline's own phase times (cost_s = kernel profiling), and writes them as JSON with the git commit measured.
cpu_s (user + system seconds of the compile process) is the figure to compare on a shared machine, where wall
time mostly measures the other processes.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parents[1]


def compile_once(model: list[str], out: str, cache: str, extra: list[str]) -> dict:
    env = {**os.environ, "TVM_SWAP_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tvm_swap.cli", "compile", *model, "-o", out, "--json", "-q", *extra]
    t0, ru0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    wall, ru1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), **json.loads(r.stdout.strip().splitlines()[-1])}


def model_args(model: str, folder: str) -> list[str]:
    """The `tvm-swap compile` arguments naming MODEL (and its flags) for the models built here."""
    if model == "resnet50-train":
        sys.path.insert(0, str(ROOT / "scripts"))
        from make_resnet50_symbol import write

        return [str(write(folder)), "--shape", "data=2,3,224,224", "--init", "random", "--train"]
    return [model]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["cnn-train"])
    ap.add_argument("--mem-limit", default="50%")
    ap.add_argument("--budget-s", default="5")
    ap.add_argument("--out", default="bench_second_compile.json")
    args = ap.parse_args()
    from tvm_swap.provenance import git_commit
    commit = git_commit(short=False)
    rows = []
    for model in args.models:
        with tempfile.TemporaryDirectory(prefix="tvm_swap_bench_") as d:
            extra = ["--mem-limit", args.mem_limit, "--budget-s", args.budget_s, "--seed", "0"]
            spec = model_args(model, d)
            first = compile_once(spec, f"{d}/a.so", f"{d}/cache", extra)
            second = compile_once(spec, f"{d}/b.so", f"{d}/cache", extra)
        rows.append({"model": model, "first": first, "second": second})
    keys = ("wall_s", "cpu_s", "build_s", "num_ops", "lower_s", "cost_s", "plan_s", "codegen_s", "kernels_timed",
            "kernels_from_cache")
    print(f"{'model':<16} {'compile':<7} " + " ".join(f"{k:>14}" for k in keys))
    for r in rows:
        for which in ("first", "second"):
            print(f"{r['model']:<16} {which:<7} " + " ".join(f"{str(r[which].get(k)):>14}" for k in keys))
    record.write(Path(args.out), {"commit": commit, "load_avg": os.getloadavg(), "rows": rows})
    print(f"wrote {args.out} (commit {commit[:10]}, load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
