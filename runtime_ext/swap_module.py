"""SwapModule: a compiled, swap-planned model you call like a function; `load` reads an exported one back.

    m = tvm_swap.build(mod, mem_limit="60%", params=params)
    y = m(x)                       # numpy in, numpy out (one array, or a tuple when the model returns a tuple)
    y = m.run({"x": x})
    m.stats()                      # pool bytes, device peak, swaps each way, time per call, predicted time
    m.export_library("model.so")   # the .so carries plan, manifest, graph and params: one file deploys
    m2 = tvm_swap.load("model.so")

Params are loaded once: each persistent tensor goes where the plan wants it when a call starts (a pool object,
the host store, or both). For a training step the updated params replace the old ones inside the module, so
calling it again runs the next step; `params()` reads the current values and `export_library` saves those.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tvm_swap.errors import PlanError, TvmSwapError
from tvm_swap.manifest import Manifest
from tvm_swap.input_slices import input_slices_of
from tvm_swap.param_layouts import layouts_of
from tvm_swap.plan import Plan

from . import builtins  # noqa: F401  (registers tvm_swap.* before any VM links the program's calls)

PARAMS_SUFFIX = ".params.npz"
WEIGHTS_NOTE = "weights"     # build_info key: how the params were made when they are not trained weights
RECIPE = "recipe"            # build_info key: how `tvm-swap compile` made the model (rebuilds the unlimited build)
STORED_INFO = (WEIGHTS_NOTE, RECIPE)     # build_info entries the library carries beside its params
PLAN_FUNC = "tvm_swap_plan"
MANIFEST_FUNC = "tvm_swap_manifest"


def make_backend(target_kind: str, bandwidth=None, debug_poison: bool = False):
    """The backend for a target: the emulated CPU backend for llvm (link throttled when `bandwidth` is given),
    the CUDA backend for cuda (runtime_ext.cuda; `bandwidth` only shapes the plan there).

    bandwidth: bytes/s one way (number or '2GB/s', duplex twice that) or a DeviceSpec (its h2d/d2h/duplex rates).
    """
    from .emulated import EmulatedBackend

    if target_kind == "cuda":   # no link throttle on a real GPU: the bus is the bus
        from .cuda import CudaBackend

        return CudaBackend()
    if target_kind != "llvm":
        raise TvmSwapError(f"no tvm_swap runtime backend for target {target_kind!r}; use 'llvm'")
    return EmulatedBackend(link=_link(bandwidth), adversarial=debug_poison)


def _link(bandwidth):
    from tvm_swap.cost.devices import DeviceSpec
    from tvm_swap.units import parse_bandwidth

    from .link import Link

    if bandwidth is None:
        return None
    if isinstance(bandwidth, DeviceSpec):
        return Link(bandwidth.h2d_bandwidth, bandwidth.d2h_bandwidth, bandwidth.duplex_bandwidth)
    try:
        bw = parse_bandwidth(bandwidth)
    except ValueError as e:
        raise TvmSwapError(f"bandwidth {bandwidth!r}: {e}") from None
    return Link(bw, bw, 2 * bw)


class SwapModule:
    def __init__(self, executable, params=None, *, plan: Plan | None = None, manifest: Manifest | None = None,
                 bandwidth=None, debug_poison: bool = False, backend=None, build_info: dict | None = None,
                 trace: bool = False):
        from tvm.runtime.vm import VirtualMachine   # = relax.VirtualMachine; also in a runtime-only TVM

        from .executor import PlanExecutor

        self.executable = executable
        probe = None
        if plan is None or manifest is None:
            import tvm

            probe = VirtualMachine(executable, tvm.cpu())
            plan = plan or _read_plan(probe)
            manifest = manifest or _read_manifest(probe)
        self.plan, self.manifest = plan, manifest
        if debug_poison and not manifest.meta.get("poison_ready", False):
            raise TvmSwapError("this module was built without debug_poison, so its kernels do not wait on drops; "
                               "rebuild it with tvm_swap.build(..., debug_poison=True) to run it poisoned")
        self.debug_poison = bool(debug_poison)
        self.bandwidth = bandwidth
        self.backend = backend or make_backend(manifest.target_kind, bandwidth, debug_poison)
        self.vm = VirtualMachine(executable, self.backend.device)
        self._func = self.vm[manifest.func_name]
        self.executor = PlanExecutor(plan, manifest, self.backend, poison=debug_poison)
        self.executor.error = None
        self.executor.trace = bool(trace)     # stamps per action: runtime_ext.trace reads executor.traces
        self.build_info = dict(build_info or {})
        self._times: list[float] = []
        self._limit_facts: dict | None = None
        # frozen params folded into their compute layout at compile time (relay_passes.param_layout): the
        # user gives and gets them in their own layout, the program holds the folded ones
        self.layouts = layouts_of(manifest.meta)
        self.input_slices = input_slices_of(manifest.meta)     # (relay_passes.split_input_train)
        self.set_params(params if params is not None else {})

    # ---------------------------------------------------------------- params
    @property
    def param_names(self) -> list[str]:
        """The params the user gives and gets (in their own layout, also where the program folded them)."""
        if self.layouts is not None:
            return [n for n, _, _ in self.layouts.user]
        return [p.name for p in self.manifest.persistent]

    @property
    def input_names(self) -> list[str]:
        """The inputs the user gives (an input the program reads in batch slices: whole, by its own name)."""
        return [n for n, _, _ in self._user_inputs()]

    def _user_inputs(self) -> list[tuple]:
        specs = [(p.name, tuple(p.shape), p.dtype) for p in self.manifest.inputs]
        return specs if self.input_slices is None else self.input_slices.user_specs(specs)

    def _user_to_compute(self, params) -> dict:
        """The program's params from the user's (their layout checked first, then folded)."""
        user = self.layouts.user
        if isinstance(params, (list, tuple)):
            if len(params) != len(user):
                raise TvmSwapError(f"got {len(params)} params, the model has {len(user)}: {self.param_names}")
            params = dict(zip(self.param_names, params))
        params = {k: _as_numpy(v) for k, v in dict(params).items()}
        unknown = sorted(set(params) - set(self.param_names))
        if unknown:
            raise TvmSwapError(f"unknown params {unknown}; the model's params are {self.param_names}")
        for name, shape, dtype in user:
            v = params.get(name)
            if v is not None and (tuple(v.shape) != tuple(shape) or str(v.dtype) != dtype):
                raise TvmSwapError(f"param {name!r} must be {tuple(shape)} {dtype}, got {tuple(v.shape)} {v.dtype}")
        return self.layouts.to_compute(params)

    def set_params(self, params) -> None:
        """Load params (name -> array, or a list in parameter order); every used param must be given."""
        specs = self.manifest.persistent
        if self.layouts is not None:
            params = self._user_to_compute(params)
        names = [p.name for p in specs]
        if isinstance(params, (list, tuple)):
            if len(params) != len(specs):
                raise TvmSwapError(f"got {len(params)} params, the model has {len(specs)}: {names}")
            params = dict(zip(names, params))
        params = {k: _as_numpy(v) for k, v in dict(params).items()}
        unknown = sorted(set(params) - set(names))
        if unknown:
            raise TvmSwapError(f"unknown params {unknown}; the model's params are {names}")
        missing = [p.name for p in specs if p.name not in params and p.tensor in self.executor.persistent]
        if missing:
            raise TvmSwapError(f"missing values for params {missing}; pass params={{name: array}} for every "
                               f"parameter of the model")
        for p in specs:
            if p.name in params:
                v = params[p.name]
                if tuple(v.shape) != tuple(p.shape) or str(v.dtype) != p.dtype:
                    raise TvmSwapError(f"param {p.name!r} must be {tuple(p.shape)} {p.dtype}, got "
                                       f"{tuple(v.shape)} {v.dtype}")
        self.executor.load_params({p.tensor: params[p.name] for p in specs if p.tensor in self.executor.persistent})
        self._param_cache = {p.name: params[p.name] for p in specs if p.name in params}

    def params(self) -> dict[str, np.ndarray]:
        """Current param values (after training steps: the updated ones), in the user's layout."""
        out = self.compute_params()
        return out if self.layouts is None else self.layouts.to_user(out)

    def compute_params(self) -> dict[str, np.ndarray]:
        """Current values of the program's own params (frozen ones in their folded compute layout)."""
        out = {}
        for p in self.manifest.persistent:
            if p.tensor in self.executor.persistent:
                out[p.name] = self.executor.param_value(p.tensor)
            elif p.name in self._param_cache:
                out[p.name] = self._param_cache[p.name]
        return out

    # ---------------------------------------------------------------- calling
    def _inputs(self, inputs) -> list:
        import tvm

        specs = self._user_inputs()
        if len(inputs) != len(specs):
            raise TvmSwapError(f"the model takes {len(specs)} inputs {self.input_names}, got {len(inputs)}")
        out = {}
        for (name, want, want_dtype), x in zip(specs, inputs):
            if isinstance(x, tvm.runtime.Tensor):
                shape, dtype = tuple(x.shape), str(x.dtype)
            else:
                x = np.asarray(x, order="C")
                shape, dtype = tuple(x.shape), str(x.dtype)
            if shape != tuple(want) or dtype != want_dtype:
                raise TvmSwapError(f"input {name!r} must be {tuple(want)} {want_dtype}, got {shape} {dtype}")
            out[name] = x
        if self.input_slices is not None:     # (the program reads it in batch slices, each an input of its own)
            out = self.input_slices.cut({n: (x.numpy() if isinstance(x, tvm.runtime.Tensor) and n in
                                             self.input_slices.slices else x) for n, x in out.items()})
        return [out[p.name] if isinstance(out[p.name], tvm.runtime.Tensor) else
                tvm.runtime.tensor(out[p.name], tvm.cpu()) for p in self.manifest.inputs]

    def __call__(self, *inputs):
        return self._call(self._inputs(inputs))

    @property
    def call_times(self) -> list[float]:
        """Wall seconds of every call so far (VM call plus results to numpy)."""
        return list(self._times)

    def run(self, inputs: dict):
        """Call with inputs by name."""
        missing = [n for n in self.input_names if n not in inputs]
        if missing:
            raise TvmSwapError(f"missing inputs {missing}; the model takes {self.input_names}")
        extra = sorted(set(inputs) - set(self.input_names))
        if extra:
            raise TvmSwapError(f"unknown inputs {extra}; the model takes {self.input_names}")
        return self.__call__(*[inputs[n] for n in self.input_names])

    def _call(self, args):
        from .builtins import active

        ex = self.executor
        t0 = time.perf_counter()
        with active(ex):
            try:
                res = self._func(*args)
            except Exception as e:
                err = ex.error or e
                ex.abort()
                if isinstance(err, TvmSwapError):
                    raise err from None
                raise
        outs = [r.numpy() for r in _leaves(res)]
        self._times.append(time.perf_counter() - t0)
        if not self.manifest.return_tuple:
            return outs[0]
        return tuple(outs)

    # ---------------------------------------------------------------- facts
    @property
    def predicted_time_s(self) -> float | None:
        t = self.plan.predicted.get("time_s")
        return None if t is None else float(t)

    def limit_facts(self) -> dict:
        """The limit beside what "100%" means (tvm_swap.limits.mem_limit.limit_facts: no_swap_bytes, liveness_peak_bytes and
        the limit as a fraction of each), from the graph inside the library; {} for a library without one."""
        if self._limit_facts is None:
            from tvm_swap.graph import DataflowGraph
            from tvm_swap.limits.mem_limit import limit_facts

            meta = self.manifest.meta
            self._limit_facts = (limit_facts(DataflowGraph.from_dict(meta["graph_json"]), int(self.plan.mem_limit))
                                 if "graph_json" in meta else {})
        return dict(self._limit_facts)

    def stats(self) -> dict:
        """What the module did, in the words `tvm-swap compile/run/plan` use for the same numbers (README,
        "The numbers"): mem_limit_bytes, pool_bytes (device bytes the plan reserves: arena or size classes plus
        kernel workspace), device_peak_bytes (measured: what the module holds on the device), no_swap_bytes
        (what "100%" is of), time_s (median call after the first), predicted_time_s."""
        ex = self.executor.stats()
        times = self._times
        facts = self.limit_facts()
        ref = facts.get("no_swap_bytes")
        return {
            "mem_limit_bytes": int(self.plan.mem_limit),
            "pool_bytes": int(self.plan.pool.total_bytes()),
            "pool_region_bytes": ex["pool_bytes"], "workspace_bytes": ex["workspace_bytes"],
            "device_peak_bytes": ex["device_peak_bytes"], "pool_in_use_peak_bytes": ex["pool_in_use_peak_bytes"],
            **facts,
            "device_peak_vs_no_swap": round(ex["device_peak_bytes"] / ref, 4) if ref else None,
            "host_bytes": ex["host_bytes"],
            "swap_out_count": ex.get("swap_out_count", 0), "swap_in_count": ex.get("swap_in_count", 0),
            "swap_out_bytes": ex.get("swap_out_bytes", 0), "swap_in_bytes": ex.get("swap_in_bytes", 0),
            "calls": len(times), "time_s": float(np.median(times[1:] or times)) if times else None,
            "last_time_s": times[-1] if times else None,
            "mean_time_s": float(np.mean(times)) if times else None,
            "min_time_s": float(np.min(times)) if times else None,
            "predicted_time_s": self.predicted_time_s,
            "planner": self.plan.planner, "backend": self.backend.stats(),
            "totals": ex["totals"],
        }

    def plan_info(self) -> dict:
        """Plan facts for reports and the CLI (no run needed)."""
        p = self.plan.predicted
        counts = {k: sum(1 for a in self.plan.actions if a.kind == k) for k in ("swap_out", "swap_in")}
        return {"planner": self.plan.planner, "pool": self.plan.pool.kind, "mem_limit_bytes": int(self.plan.mem_limit),
                "pool_bytes": int(self.plan.pool.total_bytes()), "predicted_time_s": self.predicted_time_s,
                "swap_out_count": counts["swap_out"], "swap_in_count": counts["swap_in"],
                "swap_out_bytes": p.get("swap_out_bytes"), "swap_in_bytes": p.get("swap_in_bytes"),
                **({"host_ops": len(self.plan.host_ops)} if self.plan.host_ops else {}),     # ops run on the host
                "target": self.manifest.target_kind, **{k: v for k, v in self.build_info.items()
                                                          if isinstance(v, (int, float, str, bool, type(None)))}}

    # ---------------------------------------------------------------- export
    def export_library(self, path) -> str:
        """Write the library (plan, manifest, graph and the current params inside: runtime_ext.params_bundle)
        and its check file (`path + '.check.json'`: size, SHA-256, TVM version; see runtime_ext.library_check).
        `tvm_swap.load(path)` needs nothing else."""
        from .library_check import write_check
        from .params_bundle import append_params, params_archive

        from tvm_swap.tvm_logs import tvm_logs_filtered

        path = str(path)
        with tvm_logs_filtered():        # TVM logs "Scope Saving:" on every export
            self.executable.export_library(path)
        params = self.compute_params()       # the library ships the program's layout (load converts back)
        names = [p.name for p in self.manifest.persistent if p.name in params]
        info = {k: self.build_info[k] for k in STORED_INFO if k in self.build_info}
        append_params(path, params_archive(names, params, info))
        write_check(path)
        return path

    def close(self) -> None:
        self.backend.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self) -> str:
        from tvm_swap.units import format_bytes

        return (f"SwapModule({self.manifest.func_name}, target={self.manifest.target_kind}, "
                f"limit={format_bytes(self.plan.mem_limit)}, pool={format_bytes(self.plan.pool.total_bytes())}, "
                f"planner={self.plan.planner})")


def _as_numpy(v):
    import tvm

    if isinstance(v, tvm.runtime.Tensor):
        return v.numpy()
    return np.asarray(v, order="C")


def _leaves(res):
    import tvm

    if isinstance(res, tvm.runtime.Tensor):
        return [res]
    return [x for r in res for x in _leaves(r)]


def _read_plan(vm) -> Plan:
    try:
        text = str(vm[PLAN_FUNC]())
    except AttributeError:
        raise PlanError("this library carries no tvm_swap plan (function tvm_swap_plan); it was not built by "
                        "tvm_swap.build") from None
    return Plan.from_json(text)


def _read_manifest(vm) -> Manifest:
    try:
        text = str(vm[MANIFEST_FUNC]())
    except AttributeError:
        raise PlanError("this library carries no tvm_swap manifest; it was not built by tvm_swap.build") from None
    return Manifest.from_json(text)


def _load_with_cuda_runtime(path: str):
    """A library with CUDA code, where TVM did not load its CUDA runtime itself (runtime-only TVM)."""
    import tvm

    from tvm_swap.cuda_env import ensure_runtime

    try:
        ensure_runtime()
    except OSError as e:
        raise TvmSwapError(f"cannot load {path!r}: it contains CUDA code and TVM's CUDA runtime does not load "
                           f"here ({str(e).splitlines()[0]})") from None
    try:
        return tvm.runtime.load_module(path)
    except Exception as e:
        raise TvmSwapError(f"cannot load {path!r}: {str(e).splitlines()[0]}") from None


def load(path, params=None, bandwidth=None, debug_poison: bool = False, _checked: bool = False) -> SwapModule:
    """Load a library written by SwapModule.export_library; params default to those inside it (or, for a
    library exported before they were, the `.params.npz` beside it).

    Loading a library runs its code, as loading any shared library does: load only libraries you trust.
    Before that, the file is checked against damage (runtime_ext.library_check: ELF extents, and the size,
    SHA-256 and TVM version recorded at export); after it, and before the first call, the embedded plan is
    verified against the embedded graph and may name only the module's own tensors and objects."""
    import tvm
    from tvm.runtime.vm import VirtualMachine

    from .library_check import check_before_load, check_embedded, require_program

    path = str(path)
    if not Path(path).exists():
        raise TvmSwapError(f"no library at {path!r}")
    if not _checked:             # (tvm_swap.load checks before importing TVM)
        check_before_load(path)
    from tvm_swap.tvm_logs import tvm_logs_filtered

    with tvm_logs_filtered():            # TVM logs "Scope Loaded:" on every load
        try:
            lib = tvm.runtime.load_module(path)
        except Exception as e:  # TVM raises its own error types for unreadable libraries
            if "load_from_bytes.cuda" not in str(e):
                raise TvmSwapError(f"cannot load {path!r}: {str(e).splitlines()[0]}") from None
            lib = _load_with_cuda_runtime(path)
    require_program(lib, path)
    probe = VirtualMachine(lib, tvm.cpu())
    plan, manifest = _read_plan(probe), _read_manifest(probe)
    check_embedded(plan, manifest, path)
    info = {}
    if params is None:
        from .params_bundle import embedded_params, read_archive

        found = embedded_params(path)
        pfile = Path(path + PARAMS_SUFFIX)
        if found is None and pfile.exists():      # exported before params travelled inside the library
            with np.load(pfile) as z:
                found = read_archive(z)
        params, other = found if found is not None else ({}, {})
        info = {k: v for k, v in other.items() if k in STORED_INFO}
        layouts = layouts_of(manifest.meta)
        if layouts is not None and params:      # shipped in the compute layout; the user's layout again
            params = layouts.to_user(params)
    return SwapModule(lib, params, plan=plan, manifest=manifest, bandwidth=bandwidth, debug_poison=debug_poison,
                      build_info=info)
