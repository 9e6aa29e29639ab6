"""The plain TVM build of a model run on a device: the bitwise reference a swap-planned build is checked
against, with its time per call and (on CUDA) the device memory it really took.

    ref = PlainRunner(executable_or_path, "cuda")
    outs = ref(args)               # numpy in (main's parameter order), list of numpy out (flattened)
    ref.stats()                    # call seconds, measured device bytes (CUDA)

Arguments are copied to the device once per distinct list (so timing measures the program, not the
upload). Memory: cudaMemGetInfo before the arguments are uploaded and after every call (TVM's pooled
allocator keeps what the program allocated, so the end of a call sees its peak).
"""
from __future__ import annotations

import time

import numpy as np


def _flat(res) -> list:
    import tvm

    if isinstance(res, tvm.runtime.Tensor):
        return [res]
    return [x for r in res for x in _flat(r)]


class PlainRunner:
    def __init__(self, executable, device_kind: str = "llvm", func_name: str = "main"):
        import tvm
        from tvm.runtime.vm import VirtualMachine

        if isinstance(executable, str):
            executable = tvm.runtime.load_module(executable)
        self.cuda = device_kind == "cuda"
        self.dev = tvm.cuda(0) if self.cuda else tvm.cpu(0)
        self._rt = None
        if self.cuda:
            from cuda.bindings import runtime as rt

            from .cuda import _check, release_cached_device_memory

            self._rt, self._check = rt, _check
            release_cached_device_memory()
            self.baseline_free_bytes = self._free()
        self.vm = VirtualMachine(executable, self.dev)
        self._func = self.vm[func_name]
        self._args_key = None
        self._args: list = []
        self.times: list[float] = []
        self.measured_peak_bytes = 0
        self.args_bytes = 0

    def _free(self) -> int:
        free, _ = self._check(self._rt, self._rt.cudaMemGetInfo(), "cudaMemGetInfo")
        return int(free)

    def _sample(self) -> None:
        if self.cuda:
            self.measured_peak_bytes = max(self.measured_peak_bytes, self.baseline_free_bytes - self._free())

    def _device_args(self, args) -> list:
        import tvm

        key = tuple(id(a) for a in args)
        if key != self._args_key:
            self._args = [tvm.runtime.tensor(np.asarray(a, order="C"), self.dev) for a in args]
            self.args_bytes = int(sum(np.asarray(a).nbytes for a in args))
            self._args_key = key
            self._sample()
        return self._args

    def __call__(self, args) -> list:
        dev_args = self._device_args(args)
        if self.cuda:   # the legacy stream: numpy() below copies on it, so it must follow the kernels
            self.dev.set_raw_stream(0)
        t0 = time.perf_counter()
        res = self._func(*dev_args)
        outs = [r.numpy() for r in _flat(res)]       # numpy() synchronises the device
        self.times.append(time.perf_counter() - t0)
        self._sample()
        return outs

    def stats(self) -> dict:
        t = self.times
        return {"calls": len(t), "min_time_s": min(t) if t else None,
                "mean_time_s": float(np.mean(t)) if t else None, "args_bytes": self.args_bytes,
                "measured_peak_bytes": self.measured_peak_bytes if self.cuda else None}

    def close(self) -> None:
        self._args = []
        self._func = None
        self.vm = None
        if self.cuda:
            from .cuda import release_cached_device_memory

            release_cached_device_memory()
