"""CUDA builds whose library carries machine code (a fatbin), made on any machine, GPU or not.

    target = resolve_target("cuda -arch=sm_90")   # also "cuda", {"kind": "cuda", "arch": "sm_80"}, a Target
    ex = build_lowered(lowered, target)           # relax.build; every kernel compiled by nvcc into one fatbin

TVM 0.27 keeps CUDA *source* in the library unless its CUDA runtime is loaded at build time, and then
compiles with NVRTC, or with nvcc only when the arch is known (notes/tvm-0.27.md §5). Here the build always
goes through nvcc with explicit archs: relay_passes.cuda_offline makes the runtime's module factory
available (a stand-in driver where there is none), and `fatbin_codegen` installs a compile callback that
writes one fatbin with SASS for every arch in `fatbin_archs(target)` plus PTX of the codegen arch (so newer
GPUs can JIT it). The exported library then loads on those GPUs with no compiler on the GPU machine.

Targets: the codegen arch is the target's `arch` (TVM generates code valid for that arch and newer). A
plain "cuda" means the GPU's arch when one is present, else DEFAULT_ARCH. The fatbin gets SASS for that
arch and for every arch of FATBIN_ARCHS above it ("cuda" on a GPU-less machine: sm_80 and sm_90; "cuda
-arch=sm_90": sm_90 only). TVM_SWAP_CUDA_ARCHS="80,90,100" replaces FATBIN_ARCHS.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from tvm_swap.errors import TvmSwapError

DEFAULT_ARCH = "sm_80"            # A100; code for it runs on H100/H200 too
FATBIN_ARCHS = (80, 90)           # SASS carried for these when the codegen arch allows (A100, H100/H200)
ARCHS_ENV = "TVM_SWAP_CUDA_ARCHS"
CALLBACK = "tvm_callback_cuda_compile"
_TARGET_OPTION = re.compile(r"^-{1,2}([A-Za-z_][\w]*)=(\S+)$")
_FATBIN_CACHE: dict = {}          # (sha256 of the CUDA source, nvcc arch flags) -> fatbin, per process


class CudaBuildError(TvmSwapError):
    """A CUDA build could not produce machine code."""


# ---------------------------------------------------------------- targets
def is_cuda(target) -> bool:
    import tvm

    if isinstance(target, tvm.target.Target):
        return target.kind.name == "cuda"
    if isinstance(target, dict):
        return target.get("kind") == "cuda"
    return isinstance(target, str) and target.split(maxsplit=1)[:1] == ["cuda"]


def _parse_string(text: str) -> dict:
    """'cuda -arch=sm_90 -max_num_threads=1024' -> {'kind': 'cuda', 'arch': 'sm_90', ...} (TVM 0.27 only
    takes JSON dicts; this keeps the familiar form working)."""
    kind, *opts = text.split()
    d: dict = {"kind": kind}
    for o in opts:
        m = _TARGET_OPTION.match(o)
        if m is None:
            raise TvmSwapError(f"cannot read target option {o!r} in {text!r}; write options as -key=value, "
                               f"e.g. 'cuda -arch=sm_90'")
        key, value = m.group(1), m.group(2)
        d[key] = int(value) if value.isdigit() else value
    return d


def _detected_arch() -> str | None:
    from tvm_swap.cuda_env import gpu_available

    if not gpu_available():
        return None
    import tvm

    return "sm_" + tvm.cuda(0).compute_version.replace(".", "")


def resolve_target(target):
    """A tvm Target for any target spec; CUDA ones get an explicit arch (see the module docstring)."""
    import tvm

    from .lower import as_target

    if not is_cuda(target):
        return as_target(target)
    if isinstance(target, tvm.target.Target):
        return target
    d = _parse_string(target) if isinstance(target, str) else dict(target)
    if not d.get("arch"):
        d["arch"] = _detected_arch() or DEFAULT_ARCH
    if not re.fullmatch(r"sm_\d+[a-z]?", str(d["arch"])):
        raise TvmSwapError(f"CUDA arch {d['arch']!r} is not of the form sm_XX (e.g. sm_80, sm_90)")
    return as_target(d)


def arch_number(target) -> int:
    arch = str(target.attrs.get("arch", "")) if hasattr(target, "attrs") else str(target)
    m = re.fullmatch(r"sm_(\d+)[a-z]?", arch)
    if m is None:
        raise TvmSwapError(f"the CUDA target has no arch of the form sm_XX (got {arch!r}); use e.g. "
                           f"'cuda -arch=sm_90'")
    return int(m.group(1))


def fatbin_archs(target) -> list[int]:
    """The archs the fatbin carries SASS for: the target's and every newer one of FATBIN_ARCHS."""
    own = arch_number(target)
    extra = FATBIN_ARCHS
    env = os.environ.get(ARCHS_ENV, "").strip()
    if env:
        try:
            extra = tuple(int(a.strip().removeprefix("sm_")) for a in env.split(",") if a.strip())
        except ValueError:
            raise TvmSwapError(f"{ARCHS_ENV}={env!r}: give archs as numbers, e.g. '80,90'") from None
    return sorted({own, *(a for a in extra if a > own)})


def nvcc_arch_flags(archs, ptx_arch: int) -> list[str]:
    flags = []
    for a in archs:
        flags += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    return flags + ["-gencode", f"arch=compute_{ptx_arch},code=compute_{ptx_arch}"]


def find_nvcc() -> str:
    for cand in (shutil.which("nvcc"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc"),
                 "/usr/local/cuda/bin/nvcc"):
        if cand and os.access(cand, os.X_OK):
            return cand
    raise CudaBuildError("nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin): a CUDA build needs it to "
                         "put machine code into the library; install the CUDA toolkit or set CUDA_HOME")


# ---------------------------------------------------------------- the compile callback
@contextmanager
def fatbin_codegen(target):
    """While active, TVM's CUDA codegen compiles every module to one fatbin for `fatbin_archs(target)`.

    Yields a dict that counts the compiles ("calls", "cached": served from this process's cache of identical
    sources, "seconds", "bytes", "archs"); restores the previous callback and environment afterwards.
    """
    import tvm_ffi

    from . import cuda_offline

    target = resolve_target(target)
    archs = fatbin_archs(target)
    own = arch_number(target)
    nvcc_bin = find_nvcc()
    cuda_offline.ensure_codegen_runtime()
    stats = {"calls": 0, "cached": 0, "seconds": 0.0, "bytes": 0, "archs": archs, "error": None}
    flags = nvcc_arch_flags(archs, own)

    def compile_fatbin(code):
        from tvm.support import nvcc

        key = (hashlib.sha256(code.encode()).hexdigest(), tuple(flags))
        if key in _FATBIN_CACHE:      # the same kernels built again (another plan of one model): no nvcc
            stats["calls"] += 1
            stats["cached"] += 1
            return _FATBIN_CACHE[key]
        t0 = time.perf_counter()
        try:
            with target:   # tvm's nvcc helper reads the current target's arch even when flags are given
                data = nvcc.compile_cuda(code, target_format="fatbin", arch=flags, compiler="nvcc")
        except Exception as e:  # nvcc's message embeds the whole source: keep its own diagnostics only
            text = str(e)
            tail = text.split("Compilation error:", 1)[-1].strip()
            stats["error"] = f"nvcc failed for {', '.join(f'sm_{a}' for a in archs)}: {tail[-1500:]}"
            raise
        stats["calls"] += 1
        stats["seconds"] += time.perf_counter() - t0
        stats["bytes"] += len(data)
        _FATBIN_CACHE[key] = data
        return data

    prev = tvm_ffi.get_global_func(CALLBACK, allow_missing=True)
    saved_env = {k: os.environ.get(k) for k in (cuda_offline.FORCE_FALLBACK_ENV, "PATH")}
    tvm_ffi.register_global_func(CALLBACK, compile_fatbin, override=True)
    os.environ[cuda_offline.FORCE_FALLBACK_ENV] = "0"
    os.environ["PATH"] = str(Path(nvcc_bin).parent) + os.pathsep + os.environ.get("PATH", "")
    try:
        yield stats
    finally:
        if prev is not None:
            tvm_ffi.register_global_func(CALLBACK, prev, override=True)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def build_lowered(mod, target):
    """relay_passes.lower.build_lowered, with CUDA kernels compiled into a fatbin (see the module docstring)."""
    from .lower import build_lowered as plain_build

    target = resolve_target(target)
    if target.kind.name != "cuda":
        return plain_build(mod, target)
    with fatbin_codegen(target) as st:
        try:
            ex = plain_build(mod, target)
        except Exception as e:
            if st["error"]:
                raise CudaBuildError(st["error"]) from None
            raise CudaBuildError(f"the CUDA build failed: {str(e).splitlines()[0][:300]}") from e
    if st["calls"] == 0:
        raise CudaBuildError("the CUDA build compiled no kernels: TVM kept CUDA source in the library (its "
                             "CUDA runtime is not loaded); see relay_passes.cuda_offline")
    return ex


def build_unlimited(mod, target="cuda", fuse_max_depth=None):
    """The plain build with TVM's own memory plan (same kernels as tvm_swap's lowering): the bitwise
    reference, with its CUDA kernels in a fatbin like every build here."""
    from .lower import lower

    target = resolve_target(target)
    return build_lowered(lower(mod, target, fuse_max_depth=fuse_max_depth), target)
