#!/usr/bin/env python
"""Runtime benchmark on llvm: measured time vs the simulator's prediction, and the runtime's own overhead.

For 3 models (an MLP forward pass, an MLP training step, a CNN training step) x 3 limits (100%, 60%, 35% of
the no-swap peak):
1. per-op times measured in situ: a traced no-swap build of the model run on this runtime
   (tvm_swap.cost.profile.InSituProfiler), so the simulator sees what the kernels cost on this CPU;
2. plan with those times for the emulated device whose link is throttled to --bandwidth;
3. run the plan on the emulated backend with the same throttle, each call paired with one traced profiling
   call, so that measurement and op times see the same machine load (the machine may be shared);
   measured = mean of the fastest third of --repeat calls; predicted = the simulator on the same plan with the
   op times of the paired profiling calls (fastest third, per-op median); error = measured / predicted - 1
   (target: within 10%; SwapAdvisor's simulator was -4%..+12%). `predicted_at_plan_s` is the plan's own
   prediction (op times from step 1), reported too.
Overhead: the SwapModule at 100% with the link NOT throttled against the plain relax.build VM of the same
kernels (lower_unlimited_build), both called with device tensors and returning numpy arrays, calls
interleaved; overhead = swap / plain - 1 (target < 3%).

    python -m bench runtime [--bandwidth 100MB/s] [--repeat 30] [--json benchmarks/runtime.json]

Prints a table, then writes the JSON (one record per model x limit, plus the settings and machine load).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench import record

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))   # swap_models: the deep CNN builder shared with the tests


def bench_models():
    """Bigger than the tests' models, so kernels (not Python call overhead) dominate each step."""
    from swap_models import cnn

    from tvm_swap.examples import models

    mlp_kw = dict(batch=64, in_features=256, hidden=(256,) * 6, classes=10)
    return {
        "mlp": lambda: models.mlp(**mlp_kw),
        "mlp-train": lambda: models.mlp_train_step(**mlp_kw),
        "cnn-train": lambda: cnn(train=True, batch=4, channels=32, layers=10, image=8),
    }


def fast_mean(times, frac=1 / 3):
    t = np.sort(np.asarray(times))
    return float(t[:max(1, int(len(t) * frac))].mean())


def plain_vm(mod, inputs, params):
    import tvm
    from tvm import relax

    from relay_passes.lower import lower_unlimited_build

    vm = relax.VirtualMachine(lower_unlimited_build(mod, "llvm"), tvm.cpu())
    args = [tvm.runtime.tensor(np.asarray(a, order="C")) for a in [*inputs.values(), *params.values()]]
    f = vm["main"]

    def call():
        r = f(*args)
        return [r.numpy()] if isinstance(r, tvm.runtime.Tensor) else [x.numpy() for x in r]
    return call


def overhead(mod, params, inputs, op_time, repeat):
    """SwapModule at 100%, link not throttled, against the plain VM; calls interleaved."""
    import tvm

    from runtime_ext.swap_module import SwapModule
    from tvm_swap.pipeline import compile_model

    cm = compile_model(mod, mem_limit="100%", op_time=op_time, planner="swapadvisor", generations=3)
    m = SwapModule(cm.executable, params, plan=cm.plan)
    xs = [tvm.runtime.tensor(v) for v in inputs.values()]
    plain = plain_vm(mod, inputs, params)
    a, b = [], []
    for _ in range(3):
        plain()
        m(*xs)
    for _ in range(repeat):
        t0 = time.perf_counter()
        plain()
        t1 = time.perf_counter()
        m(*xs)
        t2 = time.perf_counter()
        a.append(t1 - t0)
        b.append(t2 - t1)
    m.close()
    return fast_mean(a), fast_mean(b)


def run(args):
    import tvm

    from relay_passes.lower import lower
    from runtime_ext.swap_module import SwapModule
    from tvm_swap.pipeline import compile_model
    from tvm_swap.cost.profile import InSituProfiler
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.planner.simulator import simulate
    from tvm_swap.units import parse_bandwidth

    bw = parse_bandwidth(args.bandwidth)
    records = []
    for name, make in bench_models().items():
        if args.models and name not in args.models:
            continue
        mod, params, inputs = make()
        lowered = lower(mod, "llvm")
        graph = graph_from_relax(lowered)
        prof = InSituProfiler(lowered, graph, params=params, inputs=inputs)
        prof.sample(args.repeat)
        op_time = prof.op_times()
        plain_s, swap100_s = overhead(mod, params, inputs, op_time, args.repeat)
        for lim, pool in [(lim, pool) for lim in args.limits for pool in args.pools]:
            cm = compile_model(mod, mem_limit=lim, op_time=op_time, bandwidth=bw, planner="swapadvisor",
                               generations=args.generations, pool=pool)
            m = SwapModule(cm.executable, params, plan=cm.plan, bandwidth=cm.device)
            xs = [tvm.runtime.tensor(v) for v in inputs.values()]
            for _ in range(3):
                m(*xs)
            prof.reset()
            times = []
            for _ in range(args.repeat):
                prof.sample(1)
                t0 = time.perf_counter()
                m(*xs)
                times.append(time.perf_counter() - t0)
            measured = fast_mean(times)
            paired_op_time = prof.op_times()
            s = m.stats()
            pred = float(simulate(graph, cm.plan.actions, paired_op_time, cm.device).time_s)
            records.append({
                "model": name, "limit": lim, "pool": pool, "mem_limit_bytes": s["mem_limit_bytes"],
                "device_peak_bytes": s["device_peak_bytes"], "bandwidth_bytes_per_s": bw,
                "swap_in_bytes": s["swap_in_bytes"], "swap_out_bytes": s["swap_out_bytes"],
                "swap_in_count": s["swap_in_count"], "swap_out_count": s["swap_out_count"],
                "measured_s": measured, "predicted_s": pred, "error": measured / pred - 1.0,
                "predicted_at_plan_s": float(cm.plan.predicted["time_s"]),
                "error_vs_plan_prediction": measured / float(cm.plan.predicted["time_s"]) - 1.0,
                "compute_sum_s": float(np.sum(paired_op_time)),
                "link_busy_predicted_s": {k: float(v) for k, v in cm.plan.predicted["stream_busy_s"].items()},
                "plain_vm_s": plain_s, "swap_100_unthrottled_s": swap100_s, "overhead": swap100_s / plain_s - 1.0,
            })
            m.close()
            r = records[-1]
            print(f"{name:10s} {lim:>5s} {pool:12s}  measured {r['measured_s'] * 1e3:8.2f} ms  predicted "
                  f"{r['predicted_s'] * 1e3:8.2f} ms  error {100 * r['error']:+6.1f}%   swapped "
                  f"{(r['swap_in_bytes'] + r['swap_out_bytes']) / 1e6:6.2f} MB", flush=True)
        prof.close()
    return records


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bandwidth", default="100MB/s", help="emulated link, one way (both ways: twice)")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--generations", type=int, default=5, help="GA generations per plan (reproducible)")
    ap.add_argument("--limits", nargs="+", default=["100%", "60%", "35%"])
    ap.add_argument("--pools", nargs="+", default=["arena", "size-classes"], help="memory models, side by side")
    ap.add_argument("--models", nargs="*", default=None, help="subset of: mlp mlp-train cnn-train")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "runtime.json"))
    args = ap.parse_args(argv)
    from tvm_swap.provenance import git_commit

    commit = git_commit()        # read first: the tree may move on while the benchmark runs
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    records = run(args)
    print()
    print(f"{'model':10s} {'limit':>5s} {'pool':12s} {'measured':>10s} {'predicted':>10s} {'error':>7s} "
          f"{'plain VM':>10s} {'swap@100%':>10s} {'overhead':>8s}")
    for r in records:
        print(f"{r['model']:10s} {r['limit']:>5s} {r['pool']:12s} {r['measured_s'] * 1e3:8.2f}ms {r['predicted_s'] * 1e3:8.2f}ms "
              f"{100 * r['error']:+6.1f}% {r['plain_vm_s'] * 1e3:8.2f}ms {r['swap_100_unthrottled_s'] * 1e3:8.2f}ms "
              f"{100 * r['overhead']:+7.2f}%")
    errs = [abs(r["error"]) for r in records]
    ovh = {r["model"]: r["overhead"] for r in records}
    summary = {"max_abs_error": max(errs) if errs else None, "mean_abs_error": float(np.mean(errs)) if errs else None,
               "within_10pct": sum(e <= 0.10 for e in errs), "runs": len(errs),
               "max_overhead": max(ovh.values()) if ovh else None}
    print(f"\nerror: max |{100 * summary['max_abs_error']:.1f}%|, mean |{100 * summary['mean_abs_error']:.1f}%|, "
          f"{summary['within_10pct']}/{summary['runs']} within 10%;  overhead at 100%: max "
          f"{100 * summary['max_overhead']:+.2f}%")
    out = {"benchmark": "runtime", "commit": commit, "settings": vars(args), "machine": {"cpus": os.cpu_count(),
           "loadavg_before": load_before, "loadavg_after": os.getloadavg()},
           "wall_s": time.perf_counter() - t0, "summary": summary, "records": records}
    record.write(Path(args.json), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
