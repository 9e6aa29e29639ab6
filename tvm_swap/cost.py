"""Per-op time: a roofline model from a DeviceSpec, or kernels profiled on the target.

    roofline_times(graph, "v100-16gb")                 # no TVM needed: planners and the zoo use this
    profile_times(lowered_mod_or_executable, graph, "llvm", number=1, repeat=3, cache=CostTable())

This module must not import TVM at import time (the planner imports it); profiling imports it lazily.

Roofline: time(op) = max(flops / (peak_flops * compute_efficiency), bytes / mem_bandwidth) + launch_overhead
(peak_flops: the device's tensor_flops for an op with a bf16/fp16 output, where the device has them),
where bytes = each distinct input and output once, plus the kernel's workspace written and read once.

Profiling times each distinct kernel (by name, argument shapes and structural hash) once with TVM's
time_evaluator on initialised random arguments (garbage memory holds denormals that make CPU kernels
2x slower, notes/tvm-0.27.md §7), and gives every op calling it that time. Ops that are not PrimFunc
kernels (packed library calls) get the roofline time of `fallback_device`.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .devices import DeviceSpec, get_device
from .errors import TvmSwapError
from .graph import DataflowGraph

COST_TABLE_FORMAT = "tvm_swap.cost_table"
COST_TABLE_VERSION = 1


def op_bytes(graph: DataflowGraph) -> np.ndarray:
    """Bytes each op moves through device memory: distinct inputs + outputs, plus 2x its workspace."""
    nb = graph.tensor_bytes()
    out = np.empty(graph.num_ops, dtype=np.float64)
    for op in graph.ops:
        touched = set(op.inputs) | set(op.outputs)
        out[op.id] = float(sum(int(nb[t]) for t in touched)) + 2.0 * op.workspace
    return out


def op_peak_flops(graph: DataflowGraph, dev: DeviceSpec) -> np.ndarray:
    """Peak FLOP/s per op: the tensor-core rate for an op whose first output is bf16/fp16, else fp32."""
    if not dev.tensor_flops:
        return np.full(graph.num_ops, dev.peak_flops)
    return np.array([dev.flops_for(graph.tensors[op.outputs[0]].dtype) if op.outputs else dev.peak_flops
                     for op in graph.ops], dtype=np.float64)


def roofline_times(graph: DataflowGraph, device: str | DeviceSpec) -> np.ndarray:
    """Seconds per op (indexed by op id) on `device` by the roofline model above."""
    dev = get_device(device)
    flops = np.array([op.flops for op in graph.ops], dtype=np.float64)
    compute = flops / (op_peak_flops(graph, dev) * dev.compute_efficiency)
    memory = op_bytes(graph) / dev.mem_bandwidth
    return np.maximum(compute, memory) + dev.launch_overhead_s


class CostTable:
    """Measured kernel times, keyed by target + kernel name + argument signature + structural hash.

    Survives between runs as JSON so a model is profiled once per machine.
    """

    def __init__(self, entries: dict | None = None):
        self.entries: dict[str, float] = dict(entries or {})

    @staticmethod
    def key(target: str, kernel: str, signature: dict) -> str:
        args = json.dumps(signature.get("args"), separators=(",", ":"))
        return f"{target}|{kernel}|{args}|{signature.get('hash', '')}"

    def get(self, key: str) -> float | None:
        return self.entries.get(key)

    def put(self, key: str, seconds: float) -> None:
        self.entries[key] = float(seconds)

    def __len__(self) -> int:
        return len(self.entries)

    def to_dict(self) -> dict:
        return {"format": COST_TABLE_FORMAT, "version": COST_TABLE_VERSION, "entries": self.entries}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1, sort_keys=True))

    @classmethod
    def load(cls, path: str | Path) -> "CostTable":
        path = Path(path)
        try:
            d = json.loads(path.read_text())
        except FileNotFoundError:
            raise TvmSwapError(f"cost table {str(path)!r} does not exist") from None
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise TvmSwapError(f"cannot read cost table {str(path)!r}: {e}") from None
        if not isinstance(d, dict) or d.get("format") != COST_TABLE_FORMAT or d.get("version") != COST_TABLE_VERSION:
            raise TvmSwapError(f"{str(path)!r} is not a tvm_swap cost table (version {COST_TABLE_VERSION})")
        return cls({str(k): float(v) for k, v in d["entries"].items()})


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
    if isinstance(executable_or_mod, tvm.IRModule):
        executable_or_mod = build_lowered(executable_or_mod, target)
    libs = _kernel_library(executable_or_mod)
    if dev is None:
        dev = tvm.cpu(0) if target.kind.name == "llvm" else tvm.device(target.kind.name, 0)
    if not dev.exist:
        raise TvmSwapError(f"device {dev} is not present on this machine; profile on a machine that has it, "
                           f"or use roofline_times")
    cache = cache if cache is not None else CostTable()
    fallback = roofline_times(graph, fallback_device or _default_fallback_device(target))
    target_key = str(target.kind.name) + ":" + str(dev)
    rng = np.random.default_rng(0)
    measured: dict[str, float] = {}
    out = np.empty(graph.num_ops, dtype=np.float64)
    for op in graph.ops:
        sig = kernels.get(op.kernel)
        if sig is None:          # a packed library call: not a kernel of ours
            out[op.id] = fallback[op.id]
            continue
        if op.kernel not in measured:
            key = CostTable.key(target_key, op.kernel, sig)
            t = cache.get(key)
            if t is None:
                t = _time_kernel(libs, op.kernel, sig, dev, rng, number, repeat, min_repeat_ms)
                cache.put(key, t)
            measured[op.kernel] = t
        out[op.id] = measured[op.kernel]
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
