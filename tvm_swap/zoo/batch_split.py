"""The ops that set a zoo graph's floor as K slices of the batch, each slice an op the planner places.

A zoo graph (no TVM) is split as relay_passes.split_region splits a compiled program: the ops whose working set
(inputs + outputs, workspace included) is largest, with the producers of their batch-proportional inputs, run
as K ops each, slice k reading slice k of every batch-proportional tensor produced in that set and writing its
own slice of each output. So each slice holds 1/K of those tensors, and the floor (the largest working set the
arena must hold at once) drops. What crosses the set's edge stays whole:
- a batch-proportional tensor produced outside the set is read whole by every slice (as a view of its rows);
- a split tensor read outside the set is read as its K slices by that op (a kernel reading K row blocks);
- an output that is not batch-proportional (a reduction over the batch: per-channel sums, a weight gradient,
  an optimizer update fused with it) is accumulated through the slices: slice k reads slice k-1's partial
  result and writes its own; the last slice writes the original tensor (so updates and results keep their ids).
Flops and workspace divide by K. Which tensors are batch-proportional is read from the graph at twice the batch
(`batch_tensors`): the zoo stores sizes as affine functions of the batch, so a tensor is proportional when its
bytes double.
"""
from __future__ import annotations

import numpy as np

from ..graph.dataflow import DataflowGraph, OpInfo, TensorInfo
from ..graph.workspace import META_KEY as WORKSPACE_KEY


def batch_tensors(graph: DataflowGraph, doubled: DataflowGraph) -> set[int]:
    """Tensors produced by an op whose bytes double with the batch (`doubled`: the same graph at twice it)."""
    if doubled.num_tensors != graph.num_tensors:
        return set()
    a, b, prod = graph.tensor_bytes(), doubled.tensor_bytes(), graph.producer()
    return {t for t in range(graph.num_tensors) if prod[t] >= 0 and a[t] > 0 and b[t] == 2 * a[t]}


def working_sets(graph: DataflowGraph) -> np.ndarray:
    """Per op, the bytes of its distinct inputs and outputs."""
    size = graph.tensor_bytes()
    return np.array([int(size[list(set(op.inputs) | set(op.outputs))].sum()) for op in graph.ops], dtype=np.int64)


def floor_ops(graph: DataflowGraph, batch: set[int], share: float = 0.5) -> set[int]:
    """The ops to split: those whose working set is over `share` of the largest and that write a batch-
    proportional tensor, with the producers of their batch-proportional inputs (so those arrive in slices)."""
    ws = working_sets(graph)
    top = {o for o in range(graph.num_ops) if ws[o] > share * ws.max(initial=0)
           and any(t in batch for t in graph.ops[o].outputs)}
    prod = graph.producer()
    more = {int(prod[t]) for o in top for t in graph.ops[o].inputs if t in batch}
    results = set(graph.outputs)
    return {o for o in top | more if not any(t in results and t in batch for t in graph.ops[o].outputs)}


class _Splitter:
    def __init__(self, graph: DataflowGraph, ops: set[int], batch: set[int], k: int, uneven: bool = False):
        self.g, self.ops, self.k = graph, ops, k
        # a zoo tensor is cut only where K divides its bytes (a batch K divides); `uneven` cuts any of at least
        # K bytes into K near-equal slices (the fuzz's random sizes, scripts/fuzz.py)
        cuts = (lambda n: n >= k) if uneven else (lambda n: n % k == 0)
        self.split = {t for o in ops for t in graph.ops[o].outputs if t in batch and cuts(graph.tensors[t].nbytes)}
        self.tensors = list(graph.tensors)
        self.slices: dict[int, list[int]] = {}     # split tensor -> its K slice tensors
        self.new_ops: list[OpInfo] = []
        self.new_id: dict[int, int] = {}           # old op -> new op id (its last slice for a split op)
        self.ws: list = []

    def tensor(self, base: TensorInfo, name: str, nbytes: int) -> int:
        t = len(self.tensors)
        self.tensors.append(TensorInfo(t, name, int(nbytes), (int(nbytes),), base.dtype, base.kind))
        return t

    def slice_of(self, t: int) -> list[int]:
        if t not in self.slices:
            base = self.g.tensors[t]
            n, k = base.nbytes, self.k          # K slices summing to the tensor (equal where K divides it)
            self.slices[t] = [self.tensor(base, f"{base.name}/{i}", n * (i + 1) // k - n * i // k) for i in range(k)]
        return self.slices[t]

    def reads(self, t: int) -> list[int]:
        """What an op outside the split set reads for `t`: its slices where it was split."""
        return self.slices[t] if t in self.slices else [t]

    def add(self, old: OpInfo, name, inputs, outputs, flops, workspace) -> int:
        o = len(self.new_ops)
        self.new_ops.append(OpInfo(o, name, old.kernel, tuple(dict.fromkeys(inputs)), tuple(outputs), flops,
                                   workspace))
        return o

    def split_op(self, op: OpInfo, ws_of: dict) -> None:
        partial = {}                            # non-split output -> the partial the previous slice wrote
        for i in range(self.k):
            last = i == self.k - 1
            ins, outs = [], []
            for t in op.inputs:
                ins.append(self.slices[t][i] if t in self.slices else t)
            for t in op.outputs:
                if t in self.split:
                    outs.append(self.slice_of(t)[i])
                    continue
                if t in partial:
                    ins.append(partial[t])
                if last:
                    outs.append(t)
                else:
                    partial[t] = self.tensor(self.g.tensors[t], f"{self.g.tensors[t].name}/partial{i}",
                                             self.g.tensors[t].nbytes)
                    outs.append(partial[t])
            o = self.add(op, f"{op.name}/{i}", ins, outs, op.flops / self.k, op.workspace // self.k)
            if op.id in ws_of:
                self.ws.append([o, self.slices[ws_of[op.id]][i] if ws_of[op.id] in self.slices
                                else ws_of[op.id]])
        self.new_id[op.id] = len(self.new_ops) - 1

    def run(self) -> DataflowGraph:
        ws_of = {o: t for t, o in ((int(t), int(o)) for o, t in self.g.meta.get(WORKSPACE_KEY, ()))}
        for op in self.g.ops:
            if op.id in self.ops:
                self.split_op(op, ws_of)
                continue
            ins = [s for t in op.inputs for s in self.reads(t)]
            o = self.add(op, op.name, ins, op.outputs, op.flops, op.workspace)
            self.new_id[op.id] = o
            if op.id in ws_of:
                self.ws.append([o, ws_of[op.id]])
        meta = {k: v for k, v in self.g.meta.items() if k not in ("inplace", WORKSPACE_KEY)}
        inplace = [[self.new_id[o], a, b] for o, a, b in self.g.meta.get("inplace", ())
                   if o not in self.ops and b not in self.slices]      # a split input is read as its slices
        meta.update({**({"inplace": inplace} if inplace else {}), **({WORKSPACE_KEY: self.ws} if self.ws else {}),
                     "batch_split": {"k": self.k, "ops": len(self.ops), "tensors": len(self.slices)}})
        out = DataflowGraph(self.g.name, self.tensors, self.new_ops, list(self.g.outputs), dict(self.g.updates),
                            meta)
        out.validate()
        return out


def split_batch(graph: DataflowGraph, ops: set[int], batch: set[int], k: int, uneven: bool = False) -> DataflowGraph:
    """`graph` with each op of `ops` run as `k` slices of the batch (see the module docstring); `uneven`: cut
    the tensors K does not divide too, into near-equal slices."""
    if k < 2 or not ops:
        return graph
    return _Splitter(graph, set(ops), batch, int(k), uneven).run()
