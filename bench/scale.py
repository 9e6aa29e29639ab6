#!/usr/bin/env python
"""Planner cost at 10^3, 10^4 and 10^5 ops: seconds per candidate evaluation, planner memory, and the time
to the first verified plan (graph generation + swapadvisor-nosearch + the independent verifier).

The graphs are zoo:gpt-deep (tvm_swap.zoo.llm) at 24, 256 and 2560 layers (batch 8, seq 1024) on `h200`
at 50% of each graph's no-swap peak. Each size runs in its own subprocess so its peak RSS is its own.
A candidate evaluation is what the genetic search does per genome: swap-plan + simulate one (schedule,
allocation), measured on the search's seed genomes. Prints a table and writes benchmarks/scale.json with
the git commit measured.

    python -m bench scale                    # ~5 minutes on 2 cores
    python -m bench scale --layers 24 256    # skip the 10^5 graph
    python -m bench scale --profile 2560     # cProfile of the first verified plan at 10^5 ops
    python -m bench scale --layers 24 --throughput   # + evaluations/s: 1/2 processes, 1/2 Ray workers
                                                     # (interleaved rounds, medians, CPU s per evaluation)
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path


import numpy as np

ROOT = Path(__file__).resolve().parent.parent

DEFAULT_LAYERS = [24, 256, 2560]
LIMIT = "50%"
DEVICE = "h200"


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0      # Linux: KiB


def measure(layers: int, evaluations: int) -> dict:
    """One size, in this process."""
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner import plan_graph
    from tvm_swap.planner.api import resolve_limit, resolve_op_time
    from tvm_swap.planner.swapadvisor.ga import Evaluator, GeneticSearch
    from tvm_swap.zoo import load_zoo

    rss0 = _rss_mb()
    c0 = time.process_time()        # CPU seconds: what an idle machine's wall time would be (this one is shared)
    t0 = time.perf_counter()
    g = load_zoo(f"zoo:gpt-deep@layers={layers},batch=8,seq=1024")
    load_s = time.perf_counter() - t0
    dev = get_device(DEVICE)
    limit = resolve_limit(g, LIMIT)
    plan = plan_graph(g, limit, device=dev, planner="swapadvisor-nosearch")      # verified inside
    first_s = time.perf_counter() - t0
    first_cpu = time.process_time() - c0
    rss_plan = _rss_mb()
    times = resolve_op_time(g, dev, None)
    t1 = time.perf_counter()
    ev = Evaluator(g, times, dev, limit, 256)
    seeds = GeneticSearch(g, times, dev, limit, 256, 0, evaluator=ev).seed_genomes()
    setup_s = time.perf_counter() - t1
    genomes = [gen for _, gen in seeds][:evaluations]
    t2, c2 = time.perf_counter(), time.process_time()
    for gen in genomes:
        ev.time_of(gen.schedule, gen.alloc)
    per_eval = (time.perf_counter() - t2) / len(genomes)
    per_eval_cpu = (time.process_time() - c2) / len(genomes)
    return {"layers": layers, "ops": g.num_ops, "tensors": g.num_tensors, "mem_limit_bytes": int(limit),
            "load_s": load_s, "first_verified_plan_s": first_s,
            "first_verified_plan_cpu_s": first_cpu, "eval_cpu_s": per_eval_cpu, "search_setup_s": setup_s,
            "eval_s": per_eval, "evaluations": len(genomes), "rss_before_mb": rss0, "rss_after_plan_mb": rss_plan,
            "rss_peak_mb": _rss_mb(), "planner_mem_mb": _rss_mb() - rss0,
            "nosearch_throughput_vs_ideal": plan.predicted["throughput_vs_ideal"]}


def _cpu_s(pids) -> float:
    """User + system CPU seconds of processes `pids` so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])          # utime, stime (fields 14 and 15 of stat)
    return total / tick


def _worker_pids(pool) -> list:
    """The processes that evaluate for `pool` (this one for an in-process pool)."""
    if getattr(pool, "actors", None):
        return [pool.ray.get(a.pid.remote()) for a in pool.actors]
    if getattr(pool, "exe", None) is not None:
        return list(pool.exe._processes)
    return [os.getpid()]


def throughput(layers: int, n_genomes: int, configs, rounds: int, pool_kind: str) -> tuple[list[dict], list[dict]]:
    """Candidate evaluations/s of each (executor, workers) on the same random genomes. Every pool is started
    first (with one warm-up batch per worker, untimed); then `rounds` rounds each time every pool once, in
    turn, so a change of the machine's load hits every configuration alike. Per timed batch: wall seconds,
    the workers' CPU seconds (from /proc: what evaluating cost, whatever the load) and the driver's, and the
    load average. Returns (per-round rows, per-configuration medians)."""
    from tvm_swap.cost.devices import get_device
    from tvm_swap.planner.api import resolve_limit, resolve_op_time
    from tvm_swap.planner.swapadvisor.executors import make_pool
    from tvm_swap.planner.swapadvisor.ga import Evaluator, GeneticSearch
    from tvm_swap.zoo import load_zoo

    g = load_zoo(f"zoo:gpt-deep@layers={layers},batch=8,seq=1024")
    dev = get_device(DEVICE)
    limit = resolve_limit(g, LIMIT)
    times = resolve_op_time(g, dev, None)
    ev = Evaluator(g, times, dev, limit, 256, pool=pool_kind)
    search = GeneticSearch(g, times, dev, limit, 256, 0, evaluator=ev)
    genomes = [search.random_genome() for _ in range(n_genomes)]
    if any(ex == "ray" for ex, _ in configs):
        import ray

        # one local Ray for every Ray pool at once (each actor reserves a CPU): the pools live side by side
        ray.init(num_cpus=sum(w for ex, w in configs if ex == "ray"), include_dashboard=False, log_to_driver=False)
    pools = {}
    rows = []
    try:
        for executor, workers in configs:
            pool = make_pool(ev, executor, workers)
            pools[(executor, workers)] = pool
            for f in pool.submit_many(genomes[:workers]):          # warm-up: workers have their evaluator
                f.result()
        gc.disable()                      # as in the search (ga.GeneticSearch.run and every worker)
        for rnd in range(rounds):
            for (executor, workers), pool in pools.items():
                pids = _worker_pids(pool)
                load = os.getloadavg()[0]
                w0, d0 = _cpu_s(pids), time.process_time()
                t0 = time.perf_counter()
                values = [f.result() for f in pool.submit_many(genomes)]
                dt = time.perf_counter() - t0
                driver = time.process_time() - d0
                worker = _cpu_s(pids) - w0      # (in-process: the driver's own time, evaluations included)
                rows.append({"round": rnd, "executor": executor, "workers": workers, "ops": g.num_ops,
                             "genomes": len(genomes), "seconds": dt, "evals_per_s": len(genomes) / dt,
                             "worker_cpu_s_per_eval": worker / len(genomes),
                             "driver_cpu_s_per_eval": driver / len(genomes),
                             "cpu_share": worker / (dt * workers), "load_avg_1min": load,
                             "checksum": float(sum(values))})
                print(f"round {rnd} {executor} x{workers}: {len(genomes) / dt:.2f} evaluations/s, "
                      f"{worker / len(genomes):.3f} worker CPU s/eval, load {load:.1f}", file=sys.stderr, flush=True)
    finally:
        gc.enable()
        for pool in pools.values():
            pool.close()
        if any(ex == "ray" for ex, _ in configs):
            import ray

            ray.shutdown()
    if len({r["checksum"] for r in rows}) != 1:
        raise RuntimeError("the executors disagree on the genomes' times")
    summary = []
    for executor, workers in configs:
        mine = [r for r in rows if (r["executor"], r["workers"]) == (executor, workers)]
        summary.append({"executor": executor, "workers": workers, "rounds": len(mine),
                        **{k: float(np.median([r[k] for r in mine])) for k in
                           ("evals_per_s", "worker_cpu_s_per_eval", "driver_cpu_s_per_eval", "cpu_share",
                            "load_avg_1min")}})
    return rows, summary


def _git_commit() -> str:
    from tvm_swap.provenance import git_commit

    return git_commit()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, nargs="+", default=DEFAULT_LAYERS)
    ap.add_argument("--evaluations", type=int, default=3, help="seed genomes evaluated per size")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "scale.json"))
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)            # child: measure one size, print JSON
    ap.add_argument("--profile", type=int, metavar="LAYERS", help="cProfile the first verified plan instead")
    ap.add_argument("--throughput", type=int, metavar="LAYERS", nargs="?", const=256,
                    help="also measure evaluations/s with 1 and 2 local processes and 1 and 2 Ray workers "
                         "(default graph: 256 layers, ~10^4 ops)")
    ap.add_argument("--genomes", type=int, default=16, help="genomes per throughput measurement")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved throughput rounds (medians reported)")
    ap.add_argument("--pool", default="arena", choices=("arena", "size-classes"),
                    help="the memory model of the throughput genomes (the search's default: arena)")
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one, args.evaluations)))
        return 0
    if args.profile is not None:
        import cProfile
        import pstats

        pr = cProfile.Profile()
        pr.runcall(measure, args.profile, 1)
        pstats.Stats(pr).sort_stats("tottime").print_stats(30)
        return 0
    rows = []
    for layers in args.layers:
        out = subprocess.run([sys.executable, __file__, "--one", str(layers), "--evaluations", str(args.evaluations)],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            return 1
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"{r['ops']:>8} ops done: first plan {r['first_verified_plan_s']:.1f} s", file=sys.stderr)
    print(f"\n{'ops':>8} {'tensors':>8} {'load s':>7} {'first verified plan s (CPU s)':>30} "
          f"{'s/eval (CPU s)':>16} {'planner MB':>11} {'peak RSS MB':>12}")
    for r in rows:
        first = f"{r['first_verified_plan_s']:.2f} ({r['first_verified_plan_cpu_s']:.2f})"
        ev = f"{r['eval_s']:.2f} ({r['eval_cpu_s']:.2f})"
        print(f"{r['ops']:>8} {r['tensors']:>8} {r['load_s']:>7.2f} {first:>30} {ev:>16} "
              f"{r['planner_mem_mb']:>11.0f} {r['rss_peak_mb']:>12.0f}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall times are inflated by it)")
    tput, tput_rows = [], []
    if args.throughput:
        configs = [("processes", 1), ("processes", 2)]
        if importlib.util.find_spec("ray") is not None:
            configs += [("ray", 1), ("ray", 2)]
        else:
            print("ray is not installed: no Ray rows", file=sys.stderr)
        tput_rows, tput = throughput(args.throughput, args.genomes, configs, args.rounds, args.pool)
        print(f"\nmedians of {args.rounds} interleaved rounds, {args.genomes} genomes each ({args.pool} pool); "
              "worker CPU s/eval is what an evaluation costs whatever the load; CPU share = worker CPU / "
              "(wall x workers): below 1, the workers waited (for a core or for work)")
        print(f"{'executor':<10} {'workers':>7} {'evals/s':>8} {'vs 1 process':>13} {'worker CPU s/eval':>18} "
              f"{'driver CPU s/eval':>18} {'CPU share':>10} {'load':>5}")
        base = tput[0]["evals_per_s"]
        for r in tput:
            print(f"{r['executor']:<10} {r['workers']:>7} {r['evals_per_s']:>8.2f} {r['evals_per_s'] / base:>13.2f} "
                  f"{r['worker_cpu_s_per_eval']:>18.3f} {r['driver_cpu_s_per_eval']:>18.4f} {r['cpu_share']:>10.2f} "
                  f"{r['load_avg_1min']:>5.1f}")
    doc = {"benchmark": "bench_scale", "git_commit": _git_commit(), "machine": platform.platform(),
           "cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg(), "device": DEVICE, "mem_limit": LIMIT,
           "graph": "zoo:gpt-deep@layers=L,batch=8,seq=1024", "rows": rows, "throughput": tput,
           "throughput_rounds": tput_rows, "throughput_pool": args.pool if args.throughput else None}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    from bench import record     # here, not at the top: the worker runs this file by path
    record.write(Path(args.out), doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
