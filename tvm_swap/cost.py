"""Per-op time from a roofline model of a DeviceSpec (pure Python: the planner and the zoo use it).

    roofline_times(graph, "v100-16gb")

time(op) = max(flops / (peak_flops * compute_efficiency), bytes / mem_bandwidth) + launch_overhead,
where bytes = each distinct input and output once, plus the kernel's workspace written and read once.
Measured times instead: tvm_swap.profile.
"""
from __future__ import annotations

import numpy as np

from .devices import DeviceSpec, get_device
from .graph import DataflowGraph


def op_bytes(graph: DataflowGraph) -> np.ndarray:
    """Bytes each op moves through device memory: distinct inputs + outputs, plus 2x its workspace."""
    nb = graph.tensor_bytes()
    out = np.empty(graph.num_ops, dtype=np.float64)
    for op in graph.ops:
        touched = set(op.inputs) | set(op.outputs)
        out[op.id] = float(sum(int(nb[t]) for t in touched)) + 2.0 * op.workspace
    return out


def roofline_times(graph: DataflowGraph, device: str | DeviceSpec) -> np.ndarray:
    """Seconds per op (indexed by op id) on `device` by the roofline model above."""
    dev = get_device(device)
    flops = np.array([op.flops for op in graph.ops], dtype=np.float64)
    compute = flops / (dev.peak_flops * dev.compute_efficiency)
    memory = op_bytes(graph) / dev.mem_bandwidth
    return np.maximum(compute, memory) + dev.launch_overhead_s
