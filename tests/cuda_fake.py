"""A fake of cuda.bindings.runtime for driving runtime_ext.cuda.CudaBackend on the CPU.

Host memory stands in for the device; every stream operation runs eagerly in issue order (a valid order
for a plan, whose program issues actions in plan order), and every call is logged as
(name, stream, args...) so tests can check what the backend asked CUDA to do. `fail_on` makes the n-th
call of a name fail with an error code, to test error paths. It does not model concurrency: the emulated
backend's poisoning tests cover missing waits; this covers the CUDA backend's own bookkeeping.
"""
from __future__ import annotations

import ctypes
import enum


class cudaError_t(enum.IntEnum):
    cudaSuccess = 0
    cudaErrorInvalidValue = 1
    cudaErrorLaunchFailure = 719


class cudaMemcpyKind(enum.IntEnum):
    cudaMemcpyDefault = 4


class _Handle:
    def __init__(self, kind: str, n: int):
        self.kind, self.n = kind, n

    def __int__(self) -> int:
        return 0x1000 + self.n

    def __repr__(self) -> str:
        return f"{self.kind}{self.n}"


class FakeRuntime:
    cudaError_t = cudaError_t
    cudaMemcpyKind = cudaMemcpyKind
    cudaStreamNonBlocking = 1
    cudaEventDisableTiming = 2
    cudaHostAllocDefault = 0

    def __init__(self, total: int = 1 << 34, fail_on: dict | None = None):
        self.log: list[tuple] = []
        self.total = total
        self.used = 0
        self.fail_on = dict(fail_on or {})      # name -> which call (1-based) fails
        self._counts: dict = {}
        self._n = 0
        self._host: dict[int, object] = {}
        self.recorded: dict = {}                # event -> how many times recorded

    def _call(self, name, *args):
        self.log.append((name, *args))
        k = self._counts[name] = self._counts.get(name, 0) + 1
        if self.fail_on.get(name) == k:
            return cudaError_t.cudaErrorLaunchFailure
        return cudaError_t.cudaSuccess

    def _new(self, kind):
        self._n += 1
        return _Handle(kind, self._n)

    # ---- errors, device
    def cudaGetErrorName(self, err):
        return cudaError_t.cudaSuccess, cudaError_t(err).name.encode()

    def cudaGetErrorString(self, err):
        return cudaError_t.cudaSuccess, b"fake failure"

    def cudaGetDeviceCount(self):
        return cudaError_t.cudaSuccess, 1

    def cudaSetDevice(self, i):
        return (self._call("cudaSetDevice", i),)

    def cudaFree(self, p):
        return (self._call("cudaFree", p),)

    def cudaMemGetInfo(self):
        return self._call("cudaMemGetInfo"), self.total - self.used, self.total

    # ---- streams and events
    def cudaStreamCreateWithFlags(self, flags):
        return self._call("cudaStreamCreateWithFlags", flags), self._new("stream")

    def cudaStreamDestroy(self, s):
        return (self._call("cudaStreamDestroy", s),)

    def cudaStreamSynchronize(self, s):
        self.recorded.clear()     # a wait after this must be on an event recorded after it
        return (self._call("cudaStreamSynchronize", s),)

    def cudaEventCreateWithFlags(self, flags):
        return self._call("cudaEventCreateWithFlags", flags), self._new("event")

    def cudaEventDestroy(self, e):
        return (self._call("cudaEventDestroy", e),)

    def cudaEventRecord(self, e, s):
        self.recorded[e] = self.recorded.get(e, 0) + 1
        return (self._call("cudaEventRecord", s, e),)

    def cudaStreamWaitEvent(self, s, e, flags):
        # CUDA: waiting on an event not recorded (since the streams last drained) orders nothing at all
        assert e in self.recorded, f"waited on {e} before it was recorded: CUDA would not wait"
        return (self._call("cudaStreamWaitEvent", s, e),)

    def cudaEventSynchronize(self, e):
        return (self._call("cudaEventSynchronize", e),)

    # ---- memory
    def cudaMemcpyAsync(self, dst, src, n, kind, s):
        err = self._call("cudaMemcpyAsync", s, int(n))
        if err == cudaError_t.cudaSuccess:
            ctypes.memmove(int(dst), int(src), int(n))
        return (err,)

    def cudaMemcpy(self, dst, src, n, kind):
        err = self._call("cudaMemcpy", None, int(n))
        if err == cudaError_t.cudaSuccess:
            ctypes.memmove(int(dst), int(src), int(n))
        return (err,)

    def cudaMemsetAsync(self, p, value, n, s):
        err = self._call("cudaMemsetAsync", s, int(n))
        if err == cudaError_t.cudaSuccess:
            ctypes.memset(int(p), int(value), int(n))
        return (err,)

    def cudaHostAlloc(self, n, flags):
        buf = ctypes.create_string_buffer(int(n) + 256)
        ptr = (ctypes.addressof(buf) + 255) // 256 * 256      # page-aligned, as cudaHostAlloc's memory is
        self._host[ptr] = buf
        return self._call("cudaHostAlloc", None, int(n)), ptr

    def cudaFreeHost(self, p):
        self._host.pop(int(p), None)
        return (self._call("cudaFreeHost", None),)

    def calls(self, name: str) -> list[tuple]:
        return [c for c in self.log if c[0] == name]
