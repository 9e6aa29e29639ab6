"""The stream/event interface a plan executes on, shaped after CUDA so one executor drives every backend.

Four streams, each FIFO in issue order:

    compute   kernels; the caller's thread issues them (on CUDA: TVM's current stream, set with
              Device.set_raw_stream, so kernel launches land on it)
    d2h       swap-outs: device -> host copies        (cudaMemcpyAsync on its own non-blocking stream)
    h2d       swap-ins:  host -> device copies        (idem)
    aux       debug work (poisoning dropped objects); never used by a plan in normal runs

Events are one-shot per call: `record(stream, ev)` completes `ev` when everything issued on `stream` so far has
completed; `wait(stream, evs)` makes later work on `stream` wait for them (cudaEventRecord /
cudaStreamWaitEvent). On the compute stream of a synchronous backend a wait blocks the caller. Copies take typed
tvm Tensors of equal byte size: device tensors are views of pool objects, host tensors come from `alloc_host`
(pinned memory on CUDA, so copies really are asynchronous).

Backends: `emulated.EmulatedBackend` (CPU: worker threads, optional link throttle); `cuda.CudaBackend`
(cuda-bindings: non-blocking CUDA streams, cudaEvents, cudaMemcpyAsync to pinned host memory).
"""
from __future__ import annotations

from abc import ABC, abstractmethod

STREAMS = ("compute", "d2h", "h2d", "aux")
POISON_BYTE = 0xFF   # float32/float16/bfloat16 NaN, -1 for signed ints


class Backend(ABC):
    """A device with a compute stream, two copy streams and events (see the module docstring)."""

    name: str = "abstract"

    @property
    @abstractmethod
    def device(self):
        """The tvm Device kernels run on and pool objects live on."""

    # ---- memory (allocated once per module) ----
    @abstractmethod
    def alloc_device(self, nbytes: int):
        """A uint8 device tensor of `nbytes` (one pool object: its own storage, offset 0)."""

    def alloc_pool(self, sizes, offsets=None, region_bytes=None) -> list:
        """Every pool object at once (called once per module). Size classes (no `offsets`): one allocation
        per object. An arena plan: one allocation of `region_bytes`, object k a view at offsets[k] (objects
        may overlap: they alias the same bytes, as the plan intends)."""
        if offsets is None:
            return [self.alloc_device(b) for b in sizes]
        region = self.alloc_device(max(1, int(region_bytes)))
        return arena_objects(region, sizes, offsets)

    @abstractmethod
    def alloc_host(self, nbytes: int):
        """A uint8 host tensor of `nbytes` for swapped-out copies and host-resident params (pinned on CUDA)."""

    # ---- events ----
    @abstractmethod
    def new_event(self):
        """An event handle, reused every call (call `reset_event` before re-recording it)."""

    def reset_event(self, ev) -> None:
        """Make `ev` pending again at the start of a call (CUDA re-records in place: nothing to do)."""

    @abstractmethod
    def record(self, stream: str, ev) -> None:
        """`ev` completes when all work issued on `stream` so far has completed."""

    @abstractmethod
    def wait(self, stream: str, events) -> None:
        """Work issued on `stream` after this waits for every event in `events`."""

    def host_wait(self, events) -> None:
        """Block the calling thread until every event in `events` has completed (before an op run on the host).
        On a backend whose compute stream is the caller's thread, that is a wait on the compute stream."""
        self.wait("compute", events)

    def begin_call(self) -> None:
        """Start of a call, on the thread that runs the program (CUDA: its kernels go to the compute stream)."""

    # ---- work on streams ----
    # Each takes the events to wait for first and the event to record after, so one plan action is one call
    # (CUDA: cudaStreamWaitEvent per event, cudaMemcpyAsync, cudaEventRecord; the emulated backend: one job).
    # `stamp(phase)`, if given, is called with "start" / "end" around the work itself (tracing).
    @abstractmethod
    def copy(self, stream: str, dst, src, waits=(), record=None, stamp=None, nbytes: int | None = None) -> None:
        """After `waits`, copy tensor `src` into `dst` (same bytes) asynchronously on `stream` ("d2h" or
        "h2d"); then complete `record` if given. `nbytes` (the size, if the caller knows it) saves a lookup."""

    @abstractmethod
    def fill(self, stream: str, dst, byte: int = POISON_BYTE, waits=(), record=None) -> None:
        """After `waits`, overwrite every byte of `dst` with `byte` on `stream` (debug poisoning); then
        complete `record` if given."""

    @abstractmethod
    def host_callback(self, stream: str, fn) -> None:
        """Run `fn()` on the host once `stream` reaches this point (cudaLaunchHostFunc); used for tracing."""

    @abstractmethod
    def synchronize(self) -> None:
        """Block until every stream is idle; raise the first error any stream hit since the last call."""

    # ---- copies outside the plan (loading params, reading results) ----
    def copy_sync(self, dst, src) -> None:
        """A blocking copy between any two tensors (not on a plan stream)."""
        dst.copyfrom(src)

    def close(self) -> None:
        """Release threads / streams. The backend is unusable afterwards."""

    def stats(self) -> dict:
        return {}


def arena_objects(arena, sizes, offsets=None) -> list:
    """Pool objects as uint8 views of one arena tensor: back to back (size classes), or at `offsets`.

    Offsets and sizes are multiples of the plan's alignment (256), so every view starts aligned; the views keep
    the arena alive. One arena avoids the driver rounding each object up on its own (cudaMalloc: 2 MiB)."""
    import tvm

    # kernels reject a non-zero byte_offset: fold it into the data pointer (zero-copy when 64-byte aligned)
    fold = tvm.get_global_func("vm.builtin.ensure_zero_offset")
    if offsets is None:
        offsets, at = [], 0
        for b in sizes:
            offsets.append(at)
            at += int(b)
    objects = []
    for b, offset in zip(sizes, offsets):
        obj = fold(arena._create_view((int(b),), "uint8", int(offset)))
        if obj.data_ptr() != arena.data_ptr() + int(offset):
            raise RuntimeError(f"pool object at arena offset {offset} was copied, not aliased: offsets must be "
                               f"multiples of 64 bytes")
        objects.append(obj)
    return objects

