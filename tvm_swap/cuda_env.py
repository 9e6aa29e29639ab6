"""Loading TVM's CUDA runtime sidecar (libtvm_runtime_cuda.so) by hand.

`import tvm` loads it on its own only in a full install with a working driver. Two cases need it by hand:
- runtime-only TVM (TVM_USE_RUNTIME_LIB=1, or a wheel without libtvm_compiler.so, which is how the GPU check
  fits its wheels in the device tool's 64 MiB): TVM skips all device backends then;
- compiling without a driver (relay_passes.cuda_offline).
The sidecar links libcudart.so.13; where the CUDA toolkit is not installed, NVIDIA's pip wheel
(nvidia-cuda-runtime) provides it, found with cuda-pathfinder (a dependency of cuda-bindings).
"""
from __future__ import annotations

import ctypes
from pathlib import Path

_handles: list = []     # keep the libraries loaded for the life of the process


def sidecar_path() -> Path:
    import tvm

    return Path(tvm.__file__).parent / "lib" / "libtvm_runtime_cuda.so"


def runtime_registered() -> bool:
    """True when TVM's CUDA device API is registered in this process."""
    import tvm_ffi

    return tvm_ffi.get_global_func("device_api.cuda", allow_missing=True) is not None


def _preload_cudart() -> bool:
    """Load libcudart from NVIDIA's pip wheel if one is installed; False when there is none."""
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
    except ImportError:
        return False
    try:
        load_nvidia_dynamic_lib("cudart")
        return True
    except Exception:  # pathfinder raises its own not-found error types
        return False


def load_sidecar() -> None:
    """Load libtvm_runtime_cuda.so (RTLD_GLOBAL, as tvm.base loads libtvm_runtime). Raises OSError with the
    loader's message when a dependency is missing."""
    import tvm  # noqa: F401  (libtvm_runtime must be loaded first: the sidecar links it)

    path = sidecar_path()
    if not path.exists():
        raise OSError(f"this TVM install has no CUDA runtime sidecar ({path}); use an apache-tvm wheel "
                      f"built with CUDA")
    try:
        _handles.append(ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL))
    except OSError as e:
        if "libcudart" not in str(e) or not _preload_cudart():
            raise
        _handles.append(ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL))


def ensure_runtime() -> None:
    """TVM's CUDA device API registered, loading the sidecar if needed (OSError when it cannot be)."""
    if not runtime_registered():
        load_sidecar()
