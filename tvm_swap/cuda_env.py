"""Is there a GPU to run on (`gpu_available`, the one switch), and loading TVM's CUDA runtime sidecar
(libtvm_runtime_cuda.so) by hand. Both halves ask: relay_passes (builds) and runtime_ext (the CUDA backend).

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
_status: list = []      # [(available, reason)] once probed


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


# ---------------------------------------------------------------- the one switch
def _probe() -> tuple[bool, str]:
    try:
        from cuda.bindings import runtime as rt
    except ImportError:
        return False, "cuda-bindings is not installed (pip install 'tvm_swap[cuda]')"
    err, count = rt.cudaGetDeviceCount()
    if err != rt.cudaError_t.cudaSuccess:
        return False, f"no usable CUDA driver or device ({_error_text(rt, err)})"
    if count < 1:
        return False, "the CUDA driver reports no device"
    try:
        ensure_runtime()
    except OSError as e:
        return False, f"TVM's CUDA runtime does not load: {str(e).splitlines()[0]}"
    import tvm

    dev = tvm.cuda(0)
    if not dev.exist:
        return False, "TVM sees no CUDA device (its CUDA runtime may be older than the driver allows)"
    return True, f"{dev.device_name} (sm_{dev.compute_version.replace('.', '')}), {count} device(s)"


def gpu_status() -> tuple[bool, str]:
    """(available, reason): the probe runs once per process."""
    if not _status:
        try:
            _status.append(_probe())
        except Exception as e:  # a broken install must read as "no GPU", with the reason
            _status.append((False, f"probing CUDA failed: {type(e).__name__}: {e}"))
    return _status[0]


def gpu_available() -> bool:
    """True when this process can run CUDA kernels: cuda-bindings importable, a driver and a device, TVM's
    CUDA runtime loaded (by hand if needed), and TVM seeing the device. Everything that needs a GPU asks here."""
    return gpu_status()[0]


def why_no_gpu() -> str:
    ok, reason = gpu_status()
    return "" if ok else reason


def _error_text(rt, err) -> str:
    _, name = rt.cudaGetErrorName(err)
    _, text = rt.cudaGetErrorString(err)
    return f"{name.decode() if isinstance(name, bytes) else name}: {text.decode() if isinstance(text, bytes) else text}"
