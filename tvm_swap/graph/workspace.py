"""A kernel's workspace as a tensor of its own: written by that kernel, read by no one (pure Python, no TVM).

A kernel's workspace (`OpInfo.workspace`: its global-scope intermediate buffers) is needed only while the kernel
runs. Counted as a reserve beside the pool it holds the largest kernel's workspace for the whole iteration, so
the floor is the largest working set plus the largest workspace. As an extra output of its op that no op reads,
it is a stay of one op that the planners place, the simulator times and the verifier checks like any tensor:
an arena range for that kernel's duration only.

Compiled programs get these tensors from the lowering itself (relay_passes.lift_workspace makes the buffers
extra output parameters of the PrimFunc, so the runtime really allocates them from the plan's pool); graphs
written without TVM (the zoo) get them here.
"""
from __future__ import annotations

from .dataflow import DataflowGraph, OpInfo, TensorInfo

WORKSPACE_DTYPE = "uint8"
WORKSPACE_SUFFIX = ".workspace"
META_KEY = "workspace_tensors"      # [[op, tensor], ...]: the tensors that are an op's lifted workspace


def lift_workspace(graph: DataflowGraph) -> DataflowGraph:
    """`graph` with every op's workspace as one extra output tensor (uint8, its bytes) and no workspace
    reserve left; `graph` itself when no op has workspace (so its plans and hashes are unchanged)."""
    if not any(op.workspace > 0 for op in graph.ops):
        return graph
    tensors = list(graph.tensors)
    ops, lifted = [], []
    for op in graph.ops:
        if op.workspace <= 0:
            ops.append(op)
            continue
        t = len(tensors)
        tensors.append(TensorInfo(t, f"{op.name}{WORKSPACE_SUFFIX}", int(op.workspace), (int(op.workspace),),
                                  WORKSPACE_DTYPE, "activation"))
        ops.append(OpInfo(op.id, op.name, op.kernel, op.inputs, (*op.outputs, t), op.flops, 0))
        lifted.append([op.id, t])
    meta = dict(graph.meta)
    meta[META_KEY] = list(meta.get(META_KEY, [])) + lifted
    out = DataflowGraph(graph.name, tensors, ops, list(graph.outputs), dict(graph.updates), meta)
    out.validate()
    return out


def workspace_tensors(graph: DataflowGraph) -> dict[int, int]:
    """tensor -> op for the tensors that are an op's workspace (lifted here or by the lowering)."""
    return {int(t): int(o) for o, t in (graph.meta.get(META_KEY) or ())} if isinstance(graph.meta, dict) else {}
