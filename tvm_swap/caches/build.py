"""The unlimited reference build kept on disk, so compiling the same model again does not rebuild it.

    export_unlimited_build(mod, "llvm", "model.so.unlimited.so")   # a cached copy when one exists

`tvm-swap compile` exports the model built with TVM's own memory plan beside the swap-planned one (for
`run --compare-unlimited`); that build is codegen of every kernel again, about half of a compile on llvm. It
depends only on the module, the target, the fusion cap, TVM's version and our lowering's code (a changed pass
must not hand back a library the old passes built), which key the cached library (the module by its
structural hash). The folder is tvm_swap.cost.timing_cache.cache_dir()/unlimited; `refresh`
builds again and replaces the cached copy.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile

from ..cost.timing_cache import cache_dir
from .graph import code_version


def unlimited_key(mod, target, fuse_max_depth=None) -> str:
    import tvm
    import tvm_ffi

    from relay_passes.lower import as_target

    h = tvm_ffi.structural_hash(mod) & 0xFFFFFFFFFFFFFFFF
    text = f"{h:016x}|{as_target(target)}|{fuse_max_depth}|{tvm.__version__}|{code_version()}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def export_unlimited_build(mod, target, path, fuse_max_depth=None, refresh: bool = False) -> bool:
    """Write the unlimited build of `mod` to `path`; True when it came from the cache."""
    from relay_passes.lower import lower_unlimited_build

    cached = cache_dir() / "unlimited" / f"{unlimited_key(mod, target, fuse_max_depth)}.so"
    if cached.exists() and not refresh:
        shutil.copyfile(cached, path)
        return True
    lower_unlimited_build(mod, target, fuse_max_depth=fuse_max_depth).export_library(str(path))
    cached.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".unlimited-", suffix=".so", dir=cached.parent)
    os.close(fd)
    shutil.copyfile(path, tmp)
    os.replace(tmp, cached)           # atomic: a reader never sees half a library
    return False


__all__ = ["export_unlimited_build", "unlimited_key"]
