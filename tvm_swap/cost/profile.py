"""Measured per-op time on the target (TVM), and the cache that keeps it between runs.

    profile_times(lowered_mod_or_executable, graph, "llvm", number=1, repeat=3, cache=CostTable())
    insitu_op_times(lowered, graph)        # each kernel timed inside a traced run of the real runtime

profile_times times each distinct kernel (by name, argument shapes and structural hash) once with TVM's
time_evaluator on initialised random arguments (garbage memory holds denormals that make CPU kernels
2x slower, notes/tvm-0.27.md §7), and gives every op calling it that time. Ops that are not PrimFunc
kernels (packed library calls) get the roofline time of `fallback_device` (tvm_swap.cost.roofline).

InSituProfiler runs a traced no-swap build of the lowered program on this runtime and reads each kernel's
time from the traces: what the simulator must match when the plan runs here.
"""
from __future__ import annotations

import numpy as np

from .roofline import roofline_times
from .devices import DeviceSpec, get_device
from ..errors import TvmSwapError
from ..graph import DataflowGraph
from .table import CostTable  # noqa: F401  (re-exported: profile_times takes one)


def _default_fallback_device(target) -> DeviceSpec:
    return get_device("cpu" if target.kind.name == "llvm" else "h100")


def _random_args(signature, dev, rng):
    """Initialised tensors for a kernel's parameters: floats in [0.5, 1), integers 0 (valid indices)."""
    import tvm

    args = []
    for a in signature["args"]:
        if a is None:
            raise TvmSwapError("a kernel takes a scalar parameter; profiling supports tensor parameters only")
        shape, dtype = tuple(a[0]), a[1]
        if dtype.startswith("float") or dtype.startswith("bfloat"):
            data = (0.5 + 0.5 * rng.random(shape)).astype("float32").astype(dtype)
        else:
            data = np.zeros(shape, dtype=dtype)
        args.append(tvm.runtime.tensor(data, dev))
    return args


def _kernel_library(executable):
    """The runtime module whose functions are the kernels of a built VM executable."""
    mod = getattr(executable, "mod", executable)
    libs = list(mod.imports)
    if not libs:
        raise TvmSwapError("the executable has no kernel library; build it with relax.build first")
    return libs


def profile_times(executable_or_mod, graph: DataflowGraph, target="llvm", dev=None, number: int = 1,
                  repeat: int = 3, min_repeat_ms: int = 5, cache: CostTable | None = None,
                  fallback_device: str | DeviceSpec | None = None) -> np.ndarray:
    """Seconds per op (indexed by op id), timing each distinct kernel on `dev`.

    executable_or_mod: the lowered IRModule the graph came from (it is finalized and built here) or a
    relax.build executable of it (same kernel names). The graph must come from tvm_swap.graph.from_relax,
    whose meta["kernels"] gives each kernel's argument shapes. `cache` is read and filled.
    """
    import tvm

    from relay_passes.lower import as_target, build_lowered

    target = as_target(target)
    kernels = graph.meta.get("kernels")
    if kernels is None:
        raise TvmSwapError("the graph has no kernel signatures (meta['kernels']); profile a graph made by "
                           "tvm_swap.graph.from_relax, or use roofline_times")
    if dev is None:
        dev = tvm.cpu(0) if target.kind.name == "llvm" else tvm.device(target.kind.name, 0)
    if not dev.exist:
        raise TvmSwapError(f"device {dev} is not present on this machine; profile on a machine that has it, "
                           f"or use roofline_times")
    cache = cache if cache is not None else CostTable()
    fallback = roofline_times(graph, fallback_device or _default_fallback_device(target))
    target_key = str(target.kind.name) + ":" + str(dev)
    measured: dict[str, float] = {}
    for name in dict.fromkeys(op.kernel for op in graph.ops if op.kernel in kernels):
        t = cache.get(CostTable.key(target_key, name, kernels[name]))    # each distinct kernel asked once
        if t is not None:
            measured[name] = t
    # with every kernel in the cache nothing is built or run
    missing = {op.kernel for op in graph.ops if op.kernel in kernels and op.kernel not in measured}
    if missing:
        if isinstance(executable_or_mod, tvm.IRModule):
            executable_or_mod = build_lowered(executable_or_mod, target)
        libs = _kernel_library(executable_or_mod)
        rng = np.random.default_rng(0)
        for op in graph.ops:         # in op order, so the random arguments are as without a cache
            if op.kernel in missing and op.kernel not in measured:
                sig = kernels[op.kernel]
                t = _time_kernel(libs, op.kernel, sig, dev, rng, number, repeat, min_repeat_ms)
                cache.put(CostTable.key(target_key, op.kernel, sig), t)
                measured[op.kernel] = t
    out = np.empty(graph.num_ops, dtype=np.float64)
    for op in graph.ops:
        # a packed library call is not a kernel of ours: the fallback device's roofline
        out[op.id] = measured[op.kernel] if op.kernel in measured else fallback[op.id]
    return out


def _time_kernel(libs, name, sig, dev, rng, number, repeat, min_repeat_ms) -> float:
    lib = next((m for m in libs if m.implements_function(name)), None)
    if lib is None:
        raise TvmSwapError(f"kernel {name!r} is not in the executable; pass the executable built from the "
                           f"same lowered module as the graph")
    args = _random_args(sig, dev, rng)
    timer = lib.time_evaluator(name, dev, number=number, repeat=repeat, min_repeat_ms=int(min_repeat_ms))
    res = timer(*args)
    return max(float(np.median(list(res.results))), 1e-9)


def _random_value(shape, dtype, rng):
    import numpy as np

    if "float" in dtype:
        return (0.5 + 0.5 * rng.random(shape)).astype(dtype)   # no denormals (they slow CPU kernels down)
    return np.zeros(shape, dtype=dtype)


class InSituProfiler:
    """Times each kernel where it really runs: a traced no-swap build of `lowered` on this runtime.

    `sample(n)` makes n traced calls; `op_times()` turns the traces so far into seconds per op
    (runtime_ext.trace.op_times: fastest third of the calls, per-op median). llvm only. Missing params /
    inputs are random data in [0.5, 1). Benchmarks interleave `sample` with the runs they predict, so both
    see the same machine load.
    """

    def __init__(self, lowered, graph, target="llvm", params=None, inputs=None, func_name: str = "main",
                 warmup: int = 5):
        import numpy as np

        from relay_passes.apply import apply_plan
        from relay_passes.lower import as_target, build_lowered
        from runtime_ext.swap_module import SwapModule

        from ..planner.api import plan_graph
        from ..planner.baselines.noswap import noswap_need

        target = as_target(target)
        if target.kind.name != "llvm":
            raise TvmSwapError("in-situ profiling runs the model, so it needs target llvm here; use "
                               "profile=False (roofline) for other targets")
        self.graph = graph
        self.plan = plan_graph(graph, noswap_need(graph, 256), device="cpu",
                               op_time=np.full(graph.num_ops, 1e-5), planner="noswap")
        lib = build_lowered(apply_plan(lowered, graph, self.plan, func_name, target="llvm", trace=True), target)
        rng = np.random.default_rng(0)
        self.module = m = SwapModule(lib, _fill_params(lib, params, rng), plan=self.plan, trace=True)
        if isinstance(inputs, (list, tuple)):
            inputs = {p.name: x for p, x in zip(m.manifest.inputs, inputs)}
        inputs = dict(inputs or {})
        self.inputs = [inputs[p.name] if p.name in inputs else _random_value(p.shape, p.dtype, rng)
                       for p in m.manifest.inputs]
        for _ in range(warmup):
            m(*self.inputs)
        self.reset()

    def reset(self) -> None:
        self.module._times.clear()
        self.module.executor.traces.clear()

    def sample(self, n: int = 1) -> None:
        m = self.module
        m.executor.keep_traces = max(m.executor.keep_traces, len(m.executor.traces) + n)
        for _ in range(n):
            m(*self.inputs)

    def op_times(self):
        from runtime_ext.trace import op_times

        m = self.module
        return op_times(m.executor.traces, m.call_times, self.plan, self.graph.num_ops)

    def close(self) -> None:
        self.module.close()


def insitu_op_times(lowered, graph, target="llvm", params=None, inputs=None, func_name: str = "main",
                    repeat: int = 30, warmup: int = 5):
    """Seconds per op measured where the kernels really run (see InSituProfiler)."""
    prof = InSituProfiler(lowered, graph, target, params, inputs, func_name, warmup)
    prof.sample(repeat)
    times = prof.op_times()
    prof.close()
    return times


def _fill_params(lib, params, rng):
    """params as given, completed with random values for the ones missing (read from the library)."""
    import tvm
    from tvm import relax

    from runtime_ext.swap_module import _read_manifest

    man = _read_manifest(relax.VirtualMachine(lib, tvm.cpu()))
    given = dict(params or {})
    return {p.name: given[p.name] if p.name in given else _random_value(p.shape, p.dtype, rng)
            for p in man.persistent}


def per_op_times(lowered, graph, target, spec, profile, cost_cache, params=None, inputs=None, func_name="main"):
    """(seconds per op, how they were found) as tvm_swap.build's `profile` argument asks: "insitu",
    True (kernels timed alone, llvm only) or False (the roofline of `spec`).

    cost_cache: a CostTable to read and fill; None: the kernel timings cached on disk for this target
    (tvm_swap.cost.timing_cache; written back here), so a second compile of the same model times nothing."""
    if profile == "insitu":
        return insitu_op_times(lowered, graph, target, params, inputs, func_name), "insitu"
    if profile and target.kind.name == "llvm":
        if cost_cache is None:
            from .timing_cache import kernel_timings_for

            cost_cache = kernel_timings_for(target)
        times = profile_times(lowered, graph, target, cache=cost_cache)
        flush = getattr(cost_cache, "flush", None)
        if flush is not None:
            flush()
        return times, "profiled"
    return roofline_times(graph, spec), "roofline"
