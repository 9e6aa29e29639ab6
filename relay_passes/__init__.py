"""Relax IR passes of tvm_swap (the folder keeps the design's name; TVM 0.27 has no Relay).

lower: TVM's pipeline up to fused kernels with explicit allocations; finalize: the rest, after a plan is applied.
"""
from .lower import build_lowered, check_static_shapes, finalize, lower, lower_unlimited_build

__all__ = ["lower", "finalize", "build_lowered", "lower_unlimited_build", "check_static_shapes"]
