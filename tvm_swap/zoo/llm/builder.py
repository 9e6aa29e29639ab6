"""GraphBuilder: a DataflowGraph written kernel by kernel, with sizes from shapes and dtypes.

    b = GraphBuilder("name")
    x = b.tensor("x", (T, d), "bfloat16", "input")
    (y,) = b.op("matmul", [x, w], [("y", (T, f), "bfloat16")], flops=2 * T * d * f)
    g = b.graph(outputs=[loss], updates={w_new: w})

No TVM: the LLM zoo graphs are generated from formulas at any size, instantly (tvm_swap/zoo/llm).
"""
from __future__ import annotations

import math

from ...graph import DataflowGraph, OpInfo, TensorInfo

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "int64": 8, "int32": 4, "bool": 1}


class GraphBuilder:
    def __init__(self, name: str):
        self.name = name
        self.tensors: list[TensorInfo] = []
        self.ops: list[OpInfo] = []

    def tensor(self, name: str, shape, dtype: str, kind: str) -> int:
        shape = tuple(int(s) for s in shape)
        nbytes = math.prod(shape) * DTYPE_BYTES[dtype]
        self.tensors.append(TensorInfo(len(self.tensors), name, nbytes, shape, dtype, kind))
        return len(self.tensors) - 1

    def like(self, t: int, name: str, kind: str | None = None, dtype: str | None = None) -> tuple:
        """An output spec shaped like tensor t (for op())."""
        src = self.tensors[t]
        return (name, src.shape, dtype or src.dtype, kind or "activation")

    def op(self, kernel: str, inputs, outputs, flops: float = 0.0, workspace: int = 0) -> list[int]:
        """Append a kernel; outputs are (name, shape, dtype[, kind]) specs; returns the new tensor ids."""
        ids = [self.tensor(o[0], o[1], o[2], o[3] if len(o) > 3 else "activation") for o in outputs]
        self.ops.append(OpInfo(len(self.ops), f"{kernel}#{len(self.ops)}", kernel, tuple(inputs), tuple(ids),
                               float(flops), int(workspace)))
        return ids

    def graph(self, outputs, updates: dict, meta: dict) -> DataflowGraph:
        g = DataflowGraph(self.name, self.tensors, self.ops, list(outputs), dict(updates), meta)
        g.validate()
        return g
