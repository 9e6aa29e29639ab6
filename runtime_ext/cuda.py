"""CUDA backend: LATER PART (issue 5). Not implemented yet; constructing it raises a clear error.

How it maps onto runtime_ext.backend.Backend (the interface was shaped for this):

    device            tvm.cuda(0); kernels launch on TVM's current stream, which `__init__` sets to the compute
                      stream with Device.set_raw_stream (notes §6)
    alloc_device      one cudaMalloc per pool object (tvm.runtime.empty((nbytes,), "uint8", tvm.cuda(0)));
                      cudaMemGetInfo before/after gives the measured device peak
    alloc_host        pinned: tvm.runtime.empty((nbytes,), "uint8", tvm.runtime.device(3, 0))  (kDLCUDAHost)
    new_event         cudaEventCreateWithFlags(cudaEventDisableTiming), one per recorded action, reused
    record(s, ev)     cudaEventRecord(ev, stream[s])
    wait(s, evs)      cudaStreamWaitEvent(stream[s], ev, 0) per event (on "compute" this does not block the
                      host: the kernels queued after it wait on the GPU)
    copy(s, d, src, waits, record, stamp, nbytes)
                      waits as above, then cudaMemcpyAsync(d.data_ptr(), src.data_ptr(), nbytes,
                      cudaMemcpyDeviceToHost | HostToDevice, stream[s]), then cudaEventRecord(record)
    fill(s, d, byte)  cudaMemsetAsync(d.data_ptr(), byte, nbytes, stream[s])
    host_callback     cudaLaunchHostFunc (tracing only; cudaEvent elapsed times are the better trace)
    synchronize       cudaStreamSynchronize on all four streams; CUDA errors become StreamError
    streams           compute, d2h, h2d, aux: cudaStreamCreateWithFlags(cudaStreamNonBlocking)

with NVIDIA's cuda-bindings (the `cuda` extra): TVM 0.27 has no Python API for copies on a stream or events.
"""
from __future__ import annotations

from tvm_swap.errors import TvmSwapError

from .backend import Backend


class CudaBackend(Backend):
    name = "cuda"

    def __new__(cls, *args, **kwargs):
        raise TvmSwapError("the CUDA runtime backend is issue 5 and not implemented yet; build for "
                           "target='llvm' to run on the CPU (the emulated backend)")
