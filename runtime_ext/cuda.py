"""CUDA backend: the plan's streams, events and async copies on a real GPU, through NVIDIA's cuda-bindings.

TVM 0.27 has no Python API for copies on a stream or for events (notes/tvm-0.27.md §6), so this backend
drives the CUDA runtime directly on the raw pointers of TVM tensors (`Tensor.data_ptr()`):

    device            tvm.cuda(i); kernels launch on TVM's current stream, which `begin_call` sets to the
                      compute stream on the calling thread (Device.set_raw_stream; TVM's current stream is
                      thread-local)
    streams           compute, d2h, h2d, aux: cudaStreamCreateWithFlags(cudaStreamNonBlocking), so none of
                      them waits on the legacy default stream or on each other except through events
    alloc_device      one cudaMalloc per pool object (tvm.runtime.empty on the GPU), allocated once
    alloc_host        cudaHostAlloc (pinned, so cudaMemcpyAsync really is asynchronous), seen by TVM as a
                      CPU tensor (zero-copy DLPack view); freed when the last view of it is gone
    new_event         cudaEventCreateWithFlags(cudaEventDisableTiming), one per action another stream waits
                      on, re-recorded in place every call
    record / wait     cudaEventRecord / cudaStreamWaitEvent (a wait on compute does not block the host: the
                      kernels queued after it wait on the GPU)
    copy              waits, cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream), record
    fill              cudaMemsetAsync (debug poisoning)
    host_callback     an event recorded on the stream and a watcher thread that runs fn once it completes
    synchronize       cudaStreamSynchronize on every stream; CUDA errors become CudaError

Device memory is *measured*, not assumed: cudaMemGetInfo when the backend starts (the baseline), after the
pool's allocations, and at the start and end of every call. TVM's VM allocator is pooled (it never frees
during a run), so anything the program allocates besides the pool is still held at the end of the call,
where it is sampled. stats() reports the measured figures next to the pool's own books.

Everything that needs a GPU sits behind `gpu_available()` (tvm_swap.cuda_env, the one switch; `why_no_gpu()` says why not):
cuda-bindings importable, a driver and a device, TVM's CUDA runtime loaded (tvm_swap.cuda_env loads it
by hand for a runtime-only TVM), and TVM seeing the device. A stand-in driver (relay_passes.cuda_offline)
fails the first check that reaches the driver, so builds on a GPU-less machine never think they have one.
"""
from __future__ import annotations

import math
import queue
import threading

from tvm_swap.cuda_env import _error_text, gpu_available, gpu_status, why_no_gpu  # noqa: F401  (the one switch)
from tvm_swap.errors import TvmSwapError

from .backend import POISON_BYTE, STREAMS, Backend


class CudaError(TvmSwapError):
    """A CUDA runtime call failed (the message names the call and CUDA's error)."""


# ---------------------------------------------------------------- helpers
def _check(rt, result, what: str):
    """cuda-bindings calls return (err, *values): raise CudaError on failure, else the value(s)."""
    if isinstance(result, tuple):
        err, values = result[0], result[1:]
    else:
        err, values = result, ()
    if err != rt.cudaError_t.cudaSuccess:
        raise CudaError(f"{what} failed: {_error_text(rt, err)}")
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def release_cached_device_memory() -> None:
    """Free the blocks TVM's pooled VM allocator keeps after earlier modules freed them. Without this a
    module's own allocations could be served from that cache, invisible to cudaMemGetInfo. Blocks in use
    are not touched (PooledAllocator::ReleaseAll frees only its free lists)."""
    import tvm_ffi

    clear = tvm_ffi.get_global_func("vm.builtin.memory_manager.clear", allow_missing=True)
    if clear is not None:
        clear()


def _nbytes(t) -> int:
    import tvm_ffi

    d = tvm_ffi.dtype(str(t.dtype))
    return math.prod(t.shape) * ((d.bits * d.lanes + 7) // 8)


class _PinnedBuffer:
    """cudaHostAlloc'ed bytes exposed through the numpy array interface; freed when the last view goes."""

    def __init__(self, rt, nbytes: int):
        self._rt = rt
        self.ptr = int(_check(rt, rt.cudaHostAlloc(nbytes, rt.cudaHostAllocDefault), f"cudaHostAlloc({nbytes})"))
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (self.ptr, False),
                                    "version": 3}

    def __del__(self):
        try:
            self._rt.cudaFreeHost(self.ptr)
        except Exception:  # interpreter shutdown: the bindings may be gone already
            pass


# ---------------------------------------------------------------- the backend
class CudaBackend(Backend):
    name = "cuda"

    def __init__(self, device_id: int = 0, *, runtime=None, device=None):
        """runtime / device: stand-ins for cuda.bindings.runtime and tvm.cuda(device_id), so tests can drive
        this backend's logic on a CPU with a fake runtime (tests/cuda_fake.py); never needed otherwise."""
        import tvm

        if runtime is None:
            ok, why = gpu_status()
            if not ok:
                raise TvmSwapError(f"no CUDA GPU to run on: {why}. Build for target='llvm' to run on the CPU "
                                   f"(emulated backend), or use tvm_swap.pipeline.compile_model to compile only")
            from cuda.bindings import runtime as rt
        else:
            rt = runtime
        self._rt = rt
        self._dev = device if device is not None else tvm.cuda(int(device_id))
        try:
            self.device_label = self._dev.device_name or str(self._dev)
        except Exception:  # a device without the attribute (the CPU stand-in of tests)
            self.device_label = str(self._dev)
        self.device_id = int(device_id)
        _check(rt, rt.cudaSetDevice(self.device_id), f"cudaSetDevice({device_id})")
        _check(rt, rt.cudaFree(0), "creating the CUDA context")       # before the memory baseline
        self._streams = {s: _check(rt, rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking),
                                   f"creating the {s} stream") for s in STREAMS}
        self._events: list = []
        self._spare_events: list = []          # host_callback events, reused
        self._callbacks: queue.Queue | None = None
        self._watcher: threading.Thread | None = None
        self._callback_error: BaseException | None = None
        release_cached_device_memory()
        self.baseline_free_bytes, self.total_bytes = self._mem_info()   # everything is measured against this
        self.allocated_device_bytes = 0        # what alloc_device was asked for (the pool)
        self.measured_after_alloc_bytes = 0    # device memory used once the pool was allocated
        self.measured_used_bytes = 0           # at the latest sample
        self.measured_peak_bytes = 0
        self.samples = 0
        self._closed = False
        self.begin_call()

    # ---- memory ----
    @property
    def device(self):
        return self._dev

    def _mem_info(self) -> tuple[int, int]:
        free, total = _check(self._rt, self._rt.cudaMemGetInfo(), "cudaMemGetInfo")
        return int(free), int(total)

    def sample_memory(self) -> int:
        """Device bytes in use now beyond the baseline (cudaMemGetInfo); keeps the peak."""
        free, _ = self._mem_info()
        used = self.baseline_free_bytes - free
        self.measured_used_bytes = used
        self.measured_peak_bytes = max(self.measured_peak_bytes, used)
        self.samples += 1
        return used

    def alloc_device(self, nbytes: int):
        import tvm

        t = tvm.runtime.empty((int(nbytes),), "uint8", self._dev)
        self.allocated_device_bytes += int(nbytes)
        self.measured_after_alloc_bytes = self.sample_memory()
        return t

    def alloc_pool(self, sizes, offsets=None, region_bytes=None) -> list:
        """The whole pool as ONE cudaMalloc, cut into aligned objects (back to back, or at an arena plan's
        offsets): per-object allocations would each be rounded up by the driver (2 MiB pages) and the
        measured peak would overshoot the limit."""
        import tvm

        from .backend import arena_objects

        total = int(sum(int(b) for b in sizes)) if offsets is None else int(region_bytes)
        self._arena = tvm.runtime.empty((max(1, total),), "uint8", self._dev)
        self.allocated_device_bytes += total
        self.measured_after_alloc_bytes = self.sample_memory()
        return arena_objects(self._arena, sizes, offsets)

    def alloc_host(self, nbytes: int):
        import numpy as np
        import tvm

        arr = np.asarray(_PinnedBuffer(self._rt, int(nbytes)))     # the buffer is the array's base
        return tvm.runtime.from_dlpack(arr)

    # ---- events ----
    def new_event(self):
        ev = _check(self._rt, self._rt.cudaEventCreateWithFlags(self._rt.cudaEventDisableTiming),
                    "cudaEventCreateWithFlags")
        self._events.append(ev)
        return ev

    def record(self, stream: str, ev) -> None:
        _check(self._rt, self._rt.cudaEventRecord(ev, self._streams[stream]), f"cudaEventRecord on {stream}")

    def wait(self, stream: str, events) -> None:
        s = self._streams[stream]
        for ev in events:
            _check(self._rt, self._rt.cudaStreamWaitEvent(s, ev, 0), f"cudaStreamWaitEvent on {stream}")

    def host_wait(self, events) -> None:
        # an op run on the host reads pinned memory the copy streams write: the host itself must wait
        for ev in events:
            _check(self._rt, self._rt.cudaEventSynchronize(ev), "cudaEventSynchronize before a host op")

    # ---- work on streams ----
    def begin_call(self) -> None:
        """Start of a call, on the caller's thread: its kernels launch on the compute stream."""
        self._dev.set_raw_stream(int(self._streams["compute"]))
        self.sample_memory()

    def copy(self, stream: str, dst, src, waits=(), record=None, stamp=None, nbytes: int | None = None) -> None:
        rt = self._rt
        n = _nbytes(dst) if nbytes is None else int(nbytes)
        self.wait(stream, waits)
        if stamp is not None:
            self.host_callback(stream, lambda: stamp("start"))
        _check(rt, rt.cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), n, rt.cudaMemcpyKind.cudaMemcpyDefault,
                                      self._streams[stream]), f"cudaMemcpyAsync of {n} bytes on {stream}")
        if stamp is not None:
            self.host_callback(stream, lambda: stamp("end"))
        if record is not None:
            self.record(stream, record)

    def fill(self, stream: str, dst, byte: int = POISON_BYTE, waits=(), record=None) -> None:
        self.wait(stream, waits)
        n = _nbytes(dst)
        _check(self._rt, self._rt.cudaMemsetAsync(dst.data_ptr(), int(byte), n, self._streams[stream]),
               f"cudaMemsetAsync of {n} bytes on {stream}")
        if record is not None:
            self.record(stream, record)

    def host_callback(self, stream: str, fn) -> None:
        if self._watcher is None:
            self._callbacks = queue.Queue()
            self._watcher = threading.Thread(target=self._watch, name="tvm_swap-cuda-callbacks", daemon=True)
            self._watcher.start()
        ev = self._spare_events.pop() if self._spare_events else self.new_event()
        self.record(stream, ev)
        self._callbacks.put((ev, fn))

    def _watch(self) -> None:
        rt = self._rt
        while True:
            item = self._callbacks.get()
            try:
                if item is None:
                    return
                ev, fn = item
                try:
                    _check(rt, rt.cudaEventSynchronize(ev), "cudaEventSynchronize")
                    fn()
                except BaseException as e:  # kept for synchronize()
                    self._callback_error = self._callback_error or e
                self._spare_events.append(ev)
            finally:
                self._callbacks.task_done()

    def synchronize(self) -> None:
        errors = []
        for s, h in self._streams.items():
            try:
                _check(self._rt, self._rt.cudaStreamSynchronize(h), f"the {s} stream")
            except CudaError as e:
                errors.append(e)
        if self._callbacks is not None:
            self._callbacks.join()
        if errors:
            raise errors[0]
        if self._callback_error is not None:
            err, self._callback_error = self._callback_error, None
            raise CudaError(f"a host callback failed: {type(err).__name__}: {err}") from err
        self.sample_memory()

    def copy_sync(self, dst, src) -> None:
        """Blocking copy outside the plan: after every stream is idle (TVM's own copies use the legacy
        stream, which the non-blocking plan streams do not wait for)."""
        import tvm

        self.synchronize()
        if isinstance(src, tvm.runtime.Tensor):
            rt = self._rt
            _check(rt, rt.cudaMemcpy(dst.data_ptr(), src.data_ptr(), _nbytes(dst),
                                     rt.cudaMemcpyKind.cudaMemcpyDefault), "cudaMemcpy")
        else:
            dst.copyfrom(src)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.synchronize()
        except TvmSwapError:
            pass
        if self._watcher is not None:
            self._callbacks.put(None)
            self._watcher.join(timeout=5)
        rt = self._rt
        for ev in self._events:
            rt.cudaEventDestroy(ev)
        import tvm_ffi

        if tvm_ffi.get_raw_stream(self._dev) == int(self._streams["compute"]):
            self._dev.set_raw_stream(0)      # do not leave this thread on a stream about to be destroyed
        for h in self._streams.values():
            rt.cudaStreamDestroy(h)

    def stats(self) -> dict:
        return {"backend": self.name, "device": self.device_label, "device_total_bytes": self.total_bytes,
                "device_baseline_used_bytes": self.total_bytes - self.baseline_free_bytes,
                "allocated_device_bytes": self.allocated_device_bytes,
                "measured_after_alloc_bytes": self.measured_after_alloc_bytes,
                "measured_used_bytes": self.measured_used_bytes,
                "measured_peak_bytes": self.measured_peak_bytes, "memory_samples": self.samples}
