"""Memory figures of a training graph, for comparing the zoo with the paper's "memory need".

Two measures, both in bytes:
- `total_bytes`: every tensor once (no reuse at all); an upper bound on any plan's memory.
- `peak_bytes`: the liveness peak of the graph's own op order with every parameter resident all
  iteration. A non-persistent tensor lives from the op that writes it to its last reader (function
  outputs to the end); an input from the start to its last reader. SGD updates count as in place (the
  new weight takes the old one's memory, as in MXNet), so a weight is counted once.
  Kernel workspace counts while its op runs.
"""
from __future__ import annotations

import numpy as np

from ..graph import DataflowGraph


def peak_bytes(g: DataflowGraph) -> int:
    n_ops = g.num_ops
    nbytes = g.tensor_bytes()
    prod = g.producer()
    delta = np.zeros(n_ops + 1, dtype=np.int64)   # live-bytes change before op i (i = n_ops: end)
    resident = 0
    in_place = set(g.updates)
    outputs = set(g.outputs)
    for t, cons in enumerate(g.consumers()):
        info = g.tensors[t]
        if info.kind in ("param", "optimizer_state") and prod[t] < 0:
            resident += int(nbytes[t])
            continue
        if t in in_place:
            continue
        if prod[t] < 0 and not cons:
            continue                                  # an argument nobody reads
        start = int(prod[t]) if prod[t] >= 0 else 0
        end = n_ops if t in outputs else (cons[-1] + 1 if cons else start + 1)
        delta[start] += nbytes[t]
        delta[end] -= nbytes[t]
    live = np.cumsum(delta)[:n_ops]
    work = np.array([op.workspace for op in g.ops], dtype=np.int64)
    return int(resident + (live + work).max()) if n_ops else resident


def persistent_bytes(g: DataflowGraph, kind: str) -> int:
    """Bytes of the tensors of `kind` ("param" or "optimizer_state") that live across iterations."""
    prod = g.producer()
    return int(sum(t.nbytes for t in g.tensors if t.kind == kind and prod[t.id] < 0))


def total_bytes(g: DataflowGraph) -> int:
    return int(g.tensor_bytes().sum())


def unique_sizes(g: DataflowGraph) -> int:
    return len({t.nbytes for t in g.tensors})


def memory_stats(g: DataflowGraph) -> dict:
    return {
        "ops": g.num_ops,
        "tensors": g.num_tensors,
        "unique_sizes": unique_sizes(g),
        "param_bytes": persistent_bytes(g, "param"),
        "state_bytes": persistent_bytes(g, "optimizer_state"),
        "total_bytes": total_bytes(g),
        "peak_bytes": peak_bytes(g),
        "gflops": g.total_flops() / 1e9,
    }
