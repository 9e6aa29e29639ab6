"""`tvm-swap run`: run an exported model, optionally next to its unlimited build, and report what happened.

MODEL.so carries its params (runtime_ext.params_bundle) and how it was made (cli/recipe.py: --compare-unlimited
builds the same model with TVM's own memory plan on demand); `tvm-swap compile` also writes beside it
MODEL.so.check.json (size, SHA-256, TVM version) and MODEL.so.inputs.npz (example inputs, so `run` needs no
--input). Only MODEL.so is needed to deploy.
"""
from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from ..errors import TvmSwapError
from .unlimited import UNLIMITED_SUFFIX, _flat, run_unlimited, unlimited_args  # noqa: F401  (re-exported)

INPUTS_SUFFIX = ".inputs.npz"
WEIGHTS = "weights"        # the library's note on params that are not trained weights (runtime_ext.swap_module)


def save_inputs(path: str, inputs: dict[str, np.ndarray]) -> None:
    np.savez(path + INPUTS_SUFFIX, **{k: np.asarray(v) for k, v in inputs.items()})


def _read_inputs(library: str, specs: list[str] | None, names: list[str]) -> dict[str, np.ndarray]:
    inputs: dict[str, np.ndarray] = {}
    side = Path(library + INPUTS_SUFFIX)
    if side.exists():
        with np.load(side) as z:
            inputs.update({k: z[k] for k in z.files})
    for item in specs or []:
        if "=" not in item:
            raise TvmSwapError(f"--input {item!r}: write NAME=file.npy")
        name, file = item.split("=", 1)
        if name not in names:
            raise TvmSwapError(f"--input {name!r}: the model's inputs are {names}")
        try:
            inputs[name] = np.load(file)
        except (OSError, ValueError) as e:
            raise TvmSwapError(f"--input {item!r}: cannot read {file!r} as .npy: {e}") from None
    missing = [n for n in names if n not in inputs]
    if missing:
        raise TvmSwapError(f"no value for inputs {missing}: pass --input NAME=file.npy for each")
    return inputs


def write_run_trace(m, path: str) -> str:
    """The last traced call of SwapModule `m` as PATH: a Chrome trace (.json, tvm_swap.report.trace) or a PyTorch
    memory snapshot (.pickle, tvm_swap.report.snapshot), the formats `tvm-swap report PLAN -o ...` predicts in."""
    from tvm_swap.graph import DataflowGraph
    from tvm_swap.report.timed import measured_timing

    if not m.executor.traces:
        raise TvmSwapError("no traced call to write; run the model at least once")
    timed = measured_timing(DataflowGraph.from_dict(m.manifest.meta["graph_json"]), m.plan, m.executor.traces[-1])
    if str(path).lower().endswith(".pickle"):
        from tvm_swap.report.snapshot import write_memory_snapshot

        return str(write_memory_snapshot(timed, path))
    from tvm_swap.report.trace import write_chrome_trace

    return str(write_chrome_trace(timed, path))


def run_library(library: str, inputs=None, compare_unlimited: bool = False, bandwidth=None, repeat: int = 3,
                trace=None) -> dict:
    """Run LIBRARY `repeat` times; trace: a path or a list of them (.json: Chrome trace; .pickle: PyTorch memory
    snapshot) to write the last call's measured timeline to."""
    import tvm_swap

    if not Path(library).exists():
        raise TvmSwapError(f"library {library!r} does not exist; build one with `tvm-swap compile`")
    traces = [trace] if isinstance(trace, (str, Path)) else list(trace or [])
    for t in traces:
        if not str(t).lower().endswith((".json", ".pickle")):
            raise TvmSwapError(f"--trace {str(t)!r}: name it RUN.trace.json (Chrome trace events, for Perfetto) "
                               f"or RUN.pickle (a PyTorch memory snapshot, for pytorch.org/memory_viz)")
    m = tvm_swap.load(library, bandwidth=bandwidth)
    m.executor.trace = bool(traces)    # stamps every copy and call site (runtime_ext.trace)
    feeds = _read_inputs(library, inputs, m.input_names)
    ordered = [feeds[n] for n in m.input_names]
    initial_params = m.params()
    info: dict = {}
    if m.manifest.updates:        # a training step: each call is the next step (cli/run_steps.py)
        from .run_steps import run_steps

        info = run_steps(m, library, feeds, repeat, compare_unlimited)
        compare_unlimited, repeat = False, 1        # done: every step compared and counted
    else:
        first = _flat(m(*ordered))
    if compare_unlimited:
        uargs = unlimited_args(m.manifest, feeds, initial_params)
        ref, t_unl = run_unlimited(library, uargs, m.manifest.func_name, m.build_info.get("recipe"))
        equal = len(ref) == len(first) and all(
            a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
            for a, b in zip(first, ref))
        info["outputs_bitwise_equal"] = bool(equal)
        times_unl = [t_unl]
    for _ in range(max(0, repeat - 1)):
        m(*ordered)
    st = m.stats()          # the same names for the same numbers as m.stats() and `compile` (README, "The numbers")
    info = {
        "library": library,
        **{k: st[k] for k in ("mem_limit_bytes", "pool_bytes", "device_peak_bytes", "swap_out_count", "swap_in_count",
                              "swap_out_bytes", "swap_in_bytes", "time_s", "predicted_time_s", "calls")},
        **({WEIGHTS: m.build_info[WEIGHTS]} if WEIGHTS in m.build_info else {}),
        **info,
    }
    if compare_unlimited:
        for _ in range(max(0, repeat - 1)):
            times_unl.append(run_unlimited(library, uargs, m.manifest.func_name, m.build_info.get("recipe"))[1])
        info["unlimited_time_s"] = statistics.median(times_unl)
    info["within_limit"] = bool(st["device_peak_bytes"] <= st["mem_limit_bytes"])
    if m.limit_facts():           # (libraries from before the graph travelled inside have none)
        info.update({k: st[k] for k in (*m.limit_facts(), "device_peak_vs_no_swap")})
    if traces:
        info["trace"] = [write_run_trace(m, t) for t in traces]
    return info
