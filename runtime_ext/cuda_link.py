"""Host <-> device bandwidth measured on this machine: what the planner's simulator should be given.

    rates = measure_link()       # {"h2d_bytes_per_s", "d2h_bytes_per_s", "duplex_bytes_per_s", ...}
    spec = measured_device(get_device("h100"), rates)

Pinned host memory and cudaMemcpyAsync, as the CUDA backend copies; timed with CUDA events on the streams
themselves (best of `repeats`). "duplex" is the total rate with one copy each way at once, on two streams,
which is what the simulator's shared-link model needs. Needs a GPU (runtime_ext.cuda.gpu_available()).
"""
from __future__ import annotations

from dataclasses import asdict

from tvm_swap.errors import TvmSwapError


def measure_link(nbytes: int = 256 << 20, repeats: int = 5, device_id: int = 0) -> dict:
    from cuda.bindings import runtime as rt

    from .cuda import _check, _PinnedBuffer, why_no_gpu

    if why_no_gpu():
        raise TvmSwapError(f"measuring the host link needs a GPU: {why_no_gpu()}")
    c = lambda res, what: _check(rt, res, what)  # noqa: E731
    c(rt.cudaSetDevice(device_id), "cudaSetDevice")
    host_out, host_in = _PinnedBuffer(rt, nbytes), _PinnedBuffer(rt, nbytes)
    dev_a = c(rt.cudaMalloc(nbytes), "cudaMalloc")
    dev_b = c(rt.cudaMalloc(nbytes), "cudaMalloc")
    s1 = c(rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking), "cudaStreamCreate")
    s2 = c(rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking), "cudaStreamCreate")
    evs = [c(rt.cudaEventCreate(), "cudaEventCreate") for _ in range(4)]
    kind = rt.cudaMemcpyKind.cudaMemcpyDefault
    try:
        def timed(work) -> float:
            best = float("inf")
            for _ in range(repeats + 1):          # the first round warms up (page mapping, clocks)
                c(rt.cudaEventRecord(evs[0], s1), "cudaEventRecord")
                work()
                c(rt.cudaEventRecord(evs[1], s1), "cudaEventRecord")
                c(rt.cudaEventSynchronize(evs[1]), "cudaEventSynchronize")
                ms = c(rt.cudaEventElapsedTime(evs[0], evs[1]), "cudaEventElapsedTime")
                best = min(best, ms / 1e3)
            return best

        def h2d():
            c(rt.cudaMemcpyAsync(dev_a, host_out.ptr, nbytes, kind, s1), "cudaMemcpyAsync")

        def d2h():
            c(rt.cudaMemcpyAsync(host_in.ptr, dev_b, nbytes, kind, s1), "cudaMemcpyAsync")

        def both():
            c(rt.cudaEventRecord(evs[2], s1), "cudaEventRecord")
            c(rt.cudaStreamWaitEvent(s2, evs[2], 0), "cudaStreamWaitEvent")
            c(rt.cudaMemcpyAsync(dev_a, host_out.ptr, nbytes, kind, s1), "cudaMemcpyAsync")
            c(rt.cudaMemcpyAsync(host_in.ptr, dev_b, nbytes, kind, s2), "cudaMemcpyAsync")
            c(rt.cudaEventRecord(evs[3], s2), "cudaEventRecord")
            c(rt.cudaStreamWaitEvent(s1, evs[3], 0), "cudaStreamWaitEvent")

        t_h2d, t_d2h, t_both = timed(h2d), timed(d2h), timed(both)
    finally:
        for ev in evs:
            rt.cudaEventDestroy(ev)
        rt.cudaStreamDestroy(s1)
        rt.cudaStreamDestroy(s2)
        rt.cudaFree(dev_a)
        rt.cudaFree(dev_b)
    return {"bytes": nbytes, "repeats": repeats, "h2d_bytes_per_s": nbytes / t_h2d,
            "d2h_bytes_per_s": nbytes / t_d2h, "duplex_bytes_per_s": 2 * nbytes / t_both,
            "h2d_s": t_h2d, "d2h_s": t_d2h, "duplex_s": t_both}


def measured_device(spec, rates: dict):
    """`spec` (a tvm_swap DeviceSpec) with the link rates measured by measure_link."""
    from tvm_swap.cost.devices import DeviceSpec

    return DeviceSpec(**{**asdict(spec), "h2d_bandwidth": float(rates["h2d_bytes_per_s"]),
                         "d2h_bandwidth": float(rates["d2h_bytes_per_s"]),
                         "duplex_bandwidth": float(rates["duplex_bytes_per_s"]),
                         "description": spec.description + " (link measured)"})
