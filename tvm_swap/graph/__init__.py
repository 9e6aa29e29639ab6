"""The dataflow graph a planner works on. TVM types stop in this package.

`dataflow` is pure Python; `extract` (from a lowered Relax IRModule) imports TVM lazily.
"""
from .dataflow import KINDS, PERSISTENT_KINDS, DataflowGraph, OpInfo, TensorInfo

__all__ = ["DataflowGraph", "OpInfo", "TensorInfo", "KINDS", "PERSISTENT_KINDS", "from_relax"]


def from_relax(mod, func_name: str = "main", **kw) -> DataflowGraph:
    """Extract a DataflowGraph from a lowered Relax IRModule (see relay_passes.lower)."""
    from .extract import graph_from_relax

    return graph_from_relax(mod, func_name=func_name, **kw)
