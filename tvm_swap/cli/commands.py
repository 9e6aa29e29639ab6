"""The work behind each `tvm-swap` subcommand (argument parsing lives in cli.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..units import format_bytes, format_seconds


def _progress(args) -> bool:
    return not args.quiet and sys.stderr.isatty()


def _say(args, text: str) -> None:
    if not args.quiet:
        print(text, file=sys.stderr)


def print_plan_table(summary: dict, out=None) -> None:
    """out: a stream (default: sys.stdout as it is at the call, not at import: a caller may have replaced it)."""
    from .notes import label

    out = sys.stdout if out is None else out

    rows = [
        ("graph", summary["graph"]),
        ("planner", summary["planner"]),
        ("device", summary["device"]),
        (label("mem_limit_bytes"), format_bytes(summary["mem_limit_bytes"])),
        (label("pool_bytes"), f"{format_bytes(summary['pool_bytes'] or 0)} "
                              f"(in use at most {format_bytes(summary['peak_bytes'] or 0)})"),
    ]
    if summary.get("no_swap_bytes"):
        rows.append((label("no_swap_bytes"), f"{format_bytes(summary['no_swap_bytes'])} (the limit is "
                                             f"{100 * summary['limit_vs_no_swap']:.1f}% of it)"))
    rows += [
        (label("predicted_time_s"), format_seconds(summary["predicted_time_s"])),
        ("ideal (no limit)", format_seconds(summary["ideal_time_s"])),
        ("lower bound", format_seconds(summary["lower_bound_s"])),
        ("throughput vs ideal", f"{summary['throughput_vs_ideal']:.3f}"),
        ("time vs lower bound", f"{summary['time_vs_lower_bound']:.3f}x" if summary["time_vs_lower_bound"] else "-"),
    ]
    if summary.get("time_vs_tight_bound"):
        rows.append(("time vs tight bound", f"{summary['time_vs_tight_bound']:.3f}x (tight bound "
                                            f"{format_seconds(summary['tight_lower_bound_s'])}: what the limit "
                                            "forces across the link)"))
    rows += [
        ("swapped out", f"{format_bytes(summary['swap_out_bytes'])} in {summary['swap_out_count']} copies"),
        ("swapped in", f"{format_bytes(summary['swap_in_bytes'])} in {summary['swap_in_count']} copies"),
    ]
    if summary.get("recompute_count"):
        rows.append(("recomputed", f"{format_bytes(summary['recompute_bytes'])} in {summary['recompute_count']} "
                                   f"kernels, {format_seconds(summary['recompute_s'])} of extra compute"))
    rows += [
        ("verified", "yes" if summary["verified"] else "NO"),
        ("search", f"{format_seconds(summary['search_s'] or 0)}, {summary['generations'] or 0} generations"),
    ]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{w}}  {v}", file=out)


def cmd_plan(args) -> int:
    from ..examples.floors import refuse_below_floor
    from ..frontends.sources import load_graph, parse_shapes
    from ..limits.mem_limit import MemLimit

    mem_limit = MemLimit.of(args.mem_limit)      # parsed once: the floor table and plan_graph read this value
    # a bundled example's limit below its floor: refused from a table before TVM is imported (plan lowers the
    # examples for llvm; plan_graph's refusal, word for word); a file of that name is what load_graph reads
    if not Path(args.graph).exists():
        refuse_below_floor(args.graph, mem_limit, target="llvm", planner=args.planner, pool=args.pool,
                           shapes=parse_shapes(args.shape), params=args.params, tensor_check=False)
    from ..cost.devices import get_device
    from ..planner import plan_graph

    graph = load_graph(args.graph, shapes=parse_shapes(args.shape), params=args.params)
    _say(args, f"graph {graph.summary()}")
    plan = plan_graph(graph, mem_limit=mem_limit, device=get_device(args.device or "v100-16gb"),
                      planner=args.planner, budget_s=args.budget_s, seed=args.seed,
                      generations=args.generations, workers=args.workers, progress=_progress(args),
                      pool=args.pool, executor=getattr(args, "executor", "processes"),
                      ray_address=getattr(args, "ray_address", None), **_recompute_option(args),
                      **({"host_ops": args.host_ops} if getattr(args, "host_ops", None) else {}))
    from ..frontends.graph_ref import graph_reference
    from ..limits.mem_limit import limit_facts

    # so `tvm-swap report plan.json` finds the graph again, from any folder
    plan.search.update(graph_reference(args.graph, parse_shapes(args.shape), args.params))
    from .notes import limit_above_device

    warn = limit_above_device(plan.mem_limit, get_device(args.device or "v100-16gb"))
    if warn:
        print(f"tvm-swap: {warn}", file=sys.stderr)
    summary = {**plan.summary(), **limit_facts(graph, plan.mem_limit)}   # the limit beside what "100%" means
    cut = bool(plan.search.get("interrupted"))
    if cut:
        summary["search_interrupted"] = True
    if args.output:
        plan.save(args.output)
        _say(args, f"wrote {args.output}")
    if cut:       # said even with --quiet: the plan is valid but the search did not run its course
        print(f"tvm-swap: search cut by Ctrl-C after {plan.search.get('generations', 0)} generations; "
              + (f"{args.output} holds" if args.output else "this is")
              + " the best verified plan found so far (plan again for a better one)", file=sys.stderr)
    if args.report:
        from ..planner.breakdown import format_breakdown
        from ..report.breakdown import breakdown_of, write_breakdown
        from ..report.write import write_report

        bd = breakdown_of(graph, plan)      # where the link bytes go, beside the bound's must-move bytes
        summary["breakdown"] = bd
        for path in [*write_report(graph, plan, args.report), *write_breakdown(bd, args.report, plan)]:
            _say(args, f"wrote {path}")
        if not args.json:
            print(format_breakdown(bd))
    if args.json:
        print(json.dumps(summary))
    else:
        print_plan_table(summary)
    return 130 if cut else 0


def cmd_graph(args) -> int:
    """Write the DataflowGraph that `plan` reads: for planning without importing the model again."""
    from ..frontends.sources import load_graph, parse_shapes

    graph = load_graph(args.model, shapes=parse_shapes(args.shape), params=args.params, target=args.target,
                       fuse_max_depth=args.fuse_max_depth)
    graph.save(args.output)
    _say(args, f"graph {graph.summary()}")
    _say(args, f"wrote {args.output} (plan it with `tvm-swap plan {args.output} --mem-limit LIMIT`)")
    return 0


def cmd_zoo(args) -> int:
    from ..zoo import ZOO

    from ..zoo.llm import LLM_MODELS

    for name, info in ZOO.items():
        print(f"{name:<18} {info['description']}  (paper batches: {info['paper_batches']})")
    for name, cfg in LLM_MODELS.items():
        print(f"{name:<18} {cfg.description}  (options: @batch=B,seq=S,layers=L)")
    return 0


def cmd_devices(args) -> int:
    from ..cost.devices import DEVICES

    from ..cost.devices import HOSTS

    for d in DEVICES.values():
        print(f"{d.name:<10} {format_bytes(d.memory_bytes):>11}  {d.peak_flops / 1e12:6.1f} TFLOP/s  "
              f"link {d.h2d_bandwidth / 1e9:.0f} GB/s one way, {d.duplex_bandwidth / 1e9:.0f} GB/s both  {d.description}"
              + (f"; host {d.host}" if d.host else ""))
    for h in HOSTS.values():     # where ops a plan places on the host run (plan --host-ops)
        print(f"host {h.name:<10} {h.cores} cores, {h.peak_flops / 1e12:.1f} TFLOP/s, memory "
              f"{h.mem_bandwidth / 1e9:.0f} GB/s  {h.description}")
    return 0


def cmd_report(args) -> int:
    from ..frontends.graph_ref import graph_of_plan
    from ..plan import Plan
    from ..report.write import write_report_file

    plan = Plan.load(args.plan)
    graph = graph_of_plan(plan, args.graph)
    write_report_file(graph, plan, args.output)
    _say(args, f"wrote {args.output}")
    return 0


def compile_to_library(model: str, output: str, *, target="llvm", mem_limit="50%", shapes=None, params=None,
                       device=None, planner="swapadvisor", budget_s=10.0, seed=0, generations=None,
                       fuse_max_depth=None, progress=False, pool=None, init=None, train=None,
                       refresh_timings=False, recompute=None, micro_batches=None, split_dense=False,
                       host_ops=None, split_ops=False, split_k=None) -> dict:
    """Build MODEL under the limit and write OUTPUT (params inside, and how it was made, so `run
    --compare-unlimited` can build the unlimited reference on demand) and OUTPUT.inputs.npz (example inputs).
    init: "random"/"zeros" for params without a value; train: a train_args.TrainOptions (one training step).
    CUDA on a machine without a GPU: plan with the device spec's costs and export without running (cross_compile).
    Kernel timings come from the disk cache when this model was compiled before (tvm_swap.cost.timing_cache);
    refresh_timings measures them again. micro_batches: inference in that many slices of the batch
    (relay_passes.micro_batch); the recipe stays the unsplit model, so the unlimited reference is its build.
    host_ops: "optimizer" / "auto": the optimizer's updates run on the host (plan_graph's host_ops).
    split_k: "fewest" / "auto" (tvm_swap.limits.split_k; None: its default)."""
    import time

    from ..limits.split_k import check_split_k

    split_k = check_split_k(split_k)       # a bad value: said before anything is loaded

    from ..examples.floors import refuse_below_floor
    from ..limits.mem_limit import MemLimit

    mem_limit = MemLimit.of(mem_limit)   # parsed once; every check on the way reads it (docs/REFUSALS.md)
    # a bundled example's limit below its floor: refused from a table, before TVM is imported
    refuse_below_floor(model, mem_limit, target=target, planner=planner, pool=pool, fuse_max_depth=fuse_max_depth,
                       micro_batches=micro_batches, train=train, shapes=shapes, params=params,
                       split_dense=split_dense or split_ops)
    import tvm_swap

    from ..cost.timing_cache import kernel_timings_for
    from .cross_compile import cross_compile, gpu_missing_for
    from .recipe import make_recipe
    from .run import save_inputs
    from .train_args import prepare_model

    t0 = time.perf_counter()
    mod, prm, example_inputs, notes = prepare_model(model, shapes=shapes, params=params, init=init, seed=seed,
                                                    train=train, mem_limit=mem_limit)   # refusals: before lowering
    notes["recipe"] = make_recipe(model, shapes=shapes, params=params, init=init, seed=seed, train=train,
                                  target=target, fuse_max_depth=fuse_max_depth)   # the unlimited build, on demand
    if micro_batches is not None and int(micro_batches) > 1:
        mod, mem_limit, unsplit = _micro_batched(mod, int(micro_batches), mem_limit, train, target, fuse_max_depth)
        notes.update({"micro_batches": int(micro_batches), "unsplit_no_swap_bytes": unsplit})
    if gpu_missing_for(target):
        info = cross_compile(mod, prm, output, target=target, mem_limit=mem_limit, device=device, planner=planner,
                             budget_s=budget_s, seed=seed, generations=generations, fuse_max_depth=fuse_max_depth,
                             progress=progress, pool=pool, notes=notes, recompute=recompute,
                             split_dense=split_dense, host_ops=host_ops, split_ops=split_ops, split_k=split_k)
        if example_inputs:
            save_inputs(output, dict(example_inputs))
        return {"output": output, "build_s": round(time.perf_counter() - t0, 3),
                "note": f"no CUDA GPU here ({gpu_missing_for(target)}): planned and built for {target!r} without "
                        f"running anything; copy {output} (params inside) to a GPU machine and `tvm-swap run` it",
                **info}
    timings = kernel_timings_for(target, refresh=refresh_timings)
    m = tvm_swap.build(mod, target=target, mem_limit=mem_limit, params=prm, device=device, planner=planner,
                       budget_s=budget_s, seed=seed, generations=generations, fuse_max_depth=fuse_max_depth,
                       progress=progress, pool=pool, cost_cache=timings, split_dense=split_dense, split_ops=split_ops,
                       split_k=split_k,
                       **({} if recompute is None else {"recompute": recompute}),
                       **({} if host_ops is None else {"host_ops": host_ops}))
    m.build_info.update(notes)
    m.export_library(output)
    if example_inputs:
        save_inputs(output, dict(example_inputs))
    from ..limits.mem_limit import limit_facts

    info = {"output": output, "build_s": round(time.perf_counter() - t0, 3), **m.plan_info(),
            **limit_facts(m.compiled.graph, m.plan.mem_limit),
            **({"micro_batches": notes["micro_batches"], "unsplit_no_swap_bytes": notes["unsplit_no_swap_bytes"],
                "limit_vs_unsplit_no_swap": (round(m.plan.mem_limit / notes["unsplit_no_swap_bytes"], 4)
                                             if notes["unsplit_no_swap_bytes"] else None)}
               if "micro_batches" in notes else {}),
            **_split_facts(m.compiled.info, m.plan.mem_limit),
            "kernels_timed": timings.misses, "kernels_from_cache": timings.hits}
    info.pop("recipe", None)
    return info


def _split_facts(info: dict, limit: int) -> dict:
    """The limit as a share of the unsplit model's need, for a build that split ops (the no-swap need beside it
    is the split program's, lower)."""
    need = info.get("unsplit_no_swap_bytes")
    if not need:
        return {}
    return {"unsplit_no_swap_bytes": need, "limit_vs_unsplit_no_swap": round(limit / need, 4),
            **{k: info[k] for k in ("dense_splits", "split_k", "split_regions", "input_splits") if k in info}}


def _micro_batched(mod, k: int, mem_limit, train, target, fuse_max_depth):
    """tvm_swap.pipeline.micro_batched for the command line: a training step is refused by flag."""
    from ..errors import TvmSwapError
    from ..pipeline import micro_batched

    if train is not None:
        raise TvmSwapError("--micro-batches splits an inference batch; a training step sums its gradients over "
                           "the batch (drop --train or --micro-batches)")
    return micro_batched(mod, k, mem_limit, target, fuse_max_depth)


def _recompute_option(args) -> dict:
    """`--recompute on|off` as a planner option; not given: no option, the planner's default
    (swapadvisor.planners.RECOMPUTE_DEFAULT)."""
    v = getattr(args, "recompute", None)
    return {} if v is None else {"recompute": v}


def cmd_compile(args) -> int:
    from ..frontends.sources import parse_shapes
    from .notes import compiled_files, limit_above_device
    from .train_args import train_options

    # the search's bar needs a terminal; piped, say what is happening (a compile takes minutes)
    _say(args, f"compiling {args.model} for {args.target} under {args.mem_limit}: lower, time the kernels (cached "
               f"after the first compile), plan (search up to {args.budget_s:g} s), build ...")
    info = compile_to_library(args.model, args.output, target=args.target, mem_limit=args.mem_limit,
                              shapes=parse_shapes(args.shape), params=args.params, device=args.device,
                              planner=args.planner, budget_s=args.budget_s, seed=args.seed,
                              generations=args.generations, fuse_max_depth=args.fuse_max_depth,
                              progress=_progress(args), pool=args.pool, init=args.init, train=train_options(args),
                              refresh_timings=getattr(args, "refresh_timings", False),
                              recompute=getattr(args, "recompute", None),
                              micro_batches=getattr(args, "micro_batches", None),
                              split_dense=getattr(args, "split_dense", False),
                              host_ops=getattr(args, "host_ops", None),
                              split_ops=getattr(args, "split_ops", False),
                              split_k=getattr(args, "split_k", None))
    from ..cost.devices import get_device

    if "device" in info:
        warn = limit_above_device(info["mem_limit_bytes"], get_device(info["device"]))
        if warn:
            print(f"tvm-swap: {warn}", file=sys.stderr)
    files = compiled_files(args.output)
    info["files"] = [f for f, _ in files]
    if args.json:
        print(json.dumps(info))
    else:
        _print_info({k: v for k, v in info.items() if k != "files"})
    for f, what in files:
        _say(args, f"wrote {f}: {what}")
    return 0


def _print_info(info: dict) -> None:
    from .notes import label

    for k, v in info.items():
        if k.endswith("_bytes") and isinstance(v, (int, float)):
            v = f"{format_bytes(v)} ({v})"
        elif k.endswith("_s") and isinstance(v, (int, float)):
            v = format_seconds(v)
        print(f"{label(k):<30} {v}")


def cmd_demo(args) -> int:
    """The quick start's main job: a bundled CNN training step at half its no-swap peak, next to the unlimited build."""
    import tempfile

    from .run import run_library

    with tempfile.TemporaryDirectory(prefix="tvm_swap_demo_") as d:
        lib = str(Path(d) / "cnn-train.so")
        _say(args, f"compiling the bundled CNN training step for llvm at {args.mem_limit} of what it uses "
                   f"without swapping (TVM's own memory plan) ...")
        built = compile_to_library(args.model, lib, mem_limit=args.mem_limit, budget_s=args.budget_s,
                                   progress=_progress(args))
        _say(args, "running it next to the unlimited build ...")
        info = run_library(lib, compare_unlimited=True, bandwidth=args.bandwidth, repeat=3)
    from ..cost.devices import get_device
    from .notes import demo_emulation, time_gap

    info = {"model": args.model, "planner": built["planner"], "build_s": built["build_s"], **info}
    info.pop("library", None)
    _print_info(info)
    print(demo_emulation(get_device(built["device"]), args.bandwidth), file=sys.stderr)
    gap = time_gap(info.get("time_s"), info.get("predicted_time_s"), args.bandwidth)
    if gap:
        print(gap, file=sys.stderr)
    ok = info["outputs_bitwise_equal"] and info["within_limit"]
    print("OK: outputs bitwise equal to the unlimited build, device peak within the limit" if ok else
          "FAILED: see above", file=sys.stderr)
    return 0 if ok else 1


def cmd_run(args) -> int:
    from .run import run_library

    info = run_library(args.library, inputs=args.input, compare_unlimited=args.compare_unlimited,
                       bandwidth=args.bandwidth, repeat=args.repeat, trace=getattr(args, "trace", None))
    if args.json:
        print(json.dumps(info))
    else:
        _print_info(info)
    return 0 if info.get("outputs_bitwise_equal", True) is not False else 1
