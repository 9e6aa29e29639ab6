"""Kernels a plan runs in place (Plan.inplace) are compiled without the no-alias promise.

TVM marks every PrimFunc `tirx.noalias`, so codegen may assume its buffers never overlap (LLVM `noalias`,
CUDA `__restrict__`). A kernel run in place gets its output as a view of its input's bytes: the kernel is
elementwise over that input (tvm_swap/graph/inplace.py), so the values are the same either way, but the
promise would be false, so it is withdrawn for those kernels only (the others keep their codegen).
"""
from __future__ import annotations

NOALIAS = "tirx.noalias"


def allow_aliasing(mod, kernels) -> None:
    """Set `tirx.noalias` off on each PrimFunc GlobalVar in `kernels`, in `mod` (an IRModule, edited)."""
    import tvm

    for gv in {gv.name_hint: gv for gv in kernels}.values():
        f = mod[gv]
        if isinstance(f, tvm.tirx.PrimFunc) and f.attrs is not None and NOALIAS in f.attrs:
            mod.update_func(gv, f.with_attr(NOALIAS, False))
