"""TVM's CUDA runtime registered on a machine without an NVIDIA driver, for compiling only.

Why: TVM 0.27 compiles CUDA kernels to machine code only when its CUDA runtime sidecar
(`libtvm_runtime_cuda.so`) is loaded; without it the codegen keeps CUDA *source* in the library, which then
needs NVRTC or nvcc on the GPU machine at load time (notes/tvm-0.27.md §5). The sidecar links
`libcuda.so.1`, which a GPU-less build machine lacks, so `import tvm` silently skips it.

`ensure_codegen_runtime()` makes the sidecar's module factory available in this process:
- if it is already registered (a machine with a driver): nothing to do;
- if the real `libcuda.so.1` loads: load the sidecar normally;
- otherwise: compile a stand-in `libcuda.so.1` (every entry point returns CUDA_ERROR_NO_DEVICE) with the
  C compiler export_library uses anyway, load it, then the sidecar.

The stand-in never runs a kernel: any driver call fails with "no device". So that nothing else in the
process changes behaviour, it also sets TVM_COMPILE_FORCE_FALLBACK=1 (TVM's codegen then keeps source
exactly as before); relay_passes.cuda_build lifts that only around its own fatbin builds.
tvm_swap.cuda_env.gpu_available() stays False under the stand-in (its first driver call fails).
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tvm_swap.errors import TvmSwapError

FORCE_FALLBACK_ENV = "TVM_COMPILE_FORCE_FALLBACK"
FACTORY = "ffi.Module.create.cuda"
# Driver entry points libtvm_runtime_cuda.so imports from libcuda.so.1 (nm -D --undefined-only, TVM 0.27);
# nm adds any a newer TVM needs (a stand-in loads once per process: its soname cannot be replaced).
DRIVER_SYMBOLS = ("cuDeviceGetName", "cuFuncSetAttribute", "cuGetErrorName", "cuGetErrorString",
                  "cuLaunchKernelEx", "cuModuleGetFunction", "cuModuleLoadData", "cuModuleUnload",
                  "cuTensorMapEncodeTiled")
CUDA_ERROR_NO_DEVICE = 100

_state: dict = {"mode": None, "handles": []}


class OfflineRuntimeError(TvmSwapError):
    """TVM's CUDA runtime could not be made available for compiling."""


def factory_registered() -> bool:
    """True when TVM's codegen would build a real CUDA module (machine code), not a source-only one."""
    import tvm_ffi

    return tvm_ffi.get_global_func(FACTORY, allow_missing=True) is not None


def mode() -> str | None:
    """How the runtime got here: 'native' (already loaded or real driver), 'stand-in', or None (not yet)."""
    return _state["mode"]


def _imported_driver_symbols() -> list[str]:
    """The cu* symbols the sidecar imports, read with nm when binutils is there (else DRIVER_SYMBOLS)."""
    nm = shutil.which("nm")
    if nm is None:
        return []
    proc = subprocess.run([nm, "-D", "--undefined-only", str(_sidecar_path())], capture_output=True, text=True)
    return re.findall(r"\bU (cu[A-Z]\w*)$", proc.stdout, flags=re.M)


def _sidecar_path() -> Path:
    from tvm_swap.cuda_env import sidecar_path

    return sidecar_path()


def _load_sidecar() -> None:
    from tvm_swap.cuda_env import load_sidecar

    load_sidecar()


def _stub_source(symbols) -> str:
    body = "\n".join(f"int {s}(void) {{ return {CUDA_ERROR_NO_DEVICE}; }}" for s in symbols)
    return "/* tvm_swap build-only stand-in for the NVIDIA driver: every call reports no device */\n" + body + "\n"


def _build_stub(symbols, out_dir: Path) -> Path:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise OfflineRuntimeError("no C compiler (cc/gcc) found to build the stand-in libcuda.so.1 that lets "
                                  "TVM compile CUDA to machine code without a driver; install gcc or set CC")
    src = out_dir / "libcuda_standin.c"
    lib = out_dir / "libcuda.so.1"
    src.write_text(_stub_source(symbols))
    proc = subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(lib), str(src)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise OfflineRuntimeError(f"building the stand-in libcuda.so.1 failed: {proc.stderr.strip()[:400]}")
    return lib


def _real_driver_loads() -> bool:
    try:
        _state["handles"].append(ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL))
        return True
    except OSError:
        return False


def ensure_codegen_runtime() -> str:
    """Make TVM's CUDA module factory available (see the module docstring); returns mode()."""
    if _state["mode"] is not None:
        return _state["mode"]
    import tvm  # noqa: F401  (libtvm_runtime must be loaded first: the sidecar links it)

    if factory_registered():
        _state["mode"] = "native"
        return "native"
    if not _sidecar_path().exists():
        raise OfflineRuntimeError(f"this TVM has no CUDA runtime sidecar ({_sidecar_path()}); install an "
                                  f"apache-tvm wheel built with CUDA")
    if _real_driver_loads():
        try:
            _load_sidecar()
        except OSError as e:
            raise OfflineRuntimeError(f"TVM's CUDA runtime does not load: {e}") from None
        _state["mode"] = "native"
        return "native"
    stub = _build_stub(sorted(set(DRIVER_SYMBOLS) | set(_imported_driver_symbols())),
                       Path(tempfile.mkdtemp(prefix="tvm_swap_cuda_standin_")))
    # Loaded first and by soname, so the sidecar's DT_NEEDED libcuda.so.1 resolves to it.
    _state["handles"].append(ctypes.CDLL(str(stub), mode=ctypes.RTLD_GLOBAL))
    try:
        _load_sidecar()
    except OSError as e:
        raise OfflineRuntimeError(f"TVM's CUDA runtime does not load even with a stand-in driver: {e}") from None
    os.environ[FORCE_FALLBACK_ENV] = "1"   # nothing outside cuda_build's fatbin builds changes
    _state["mode"] = "stand-in"
    return "stand-in"
