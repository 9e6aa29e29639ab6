"""What runs with a compiled tvm_swap module: device pool, host store, stream/event backends, the `tvm_swap.*`
packed functions the applied program calls, and SwapModule. The contracts it shares with relay_passes (plan,
manifest, loading TVM's CUDA runtime) live in tvm_swap.

    backend.py     the stream/event interface (compute, d2h, h2d, aux streams; events; async copies)
    emulated.py    CPU backend: copy streams on worker threads, optional link throttle (link.py), poisoning
    cuda.py        CUDA backend: cudaMemcpyAsync + cudaEvent on non-blocking streams, pinned host memory,
                   measured device memory; gpu_available() is the one switch for everything needing a GPU
    cuda_link.py   measured host<->device bandwidth (pinned, each way and both at once)
    pool.py        the plan's pool objects, tenancy and byte accounting
    host_store.py  host copies of swapped-out tensors and host-resident params
    executor.py    runs a plan's actions on a backend; builtins.py registers the calls that reach it
    swap_module.py SwapModule and load
"""


def __getattr__(name):
    # Lazy: importing runtime_ext must not pull in TVM for users that only read manifests.
    if name in ("SwapModule", "load", "make_backend"):
        from . import swap_module

        return getattr(swap_module, name)
    raise AttributeError(name)


__all__ = ["SwapModule", "load", "make_backend"]
