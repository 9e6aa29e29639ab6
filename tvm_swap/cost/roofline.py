"""Per-op time from a roofline model of a DeviceSpec (pure Python: the planner and the zoo use it).

    roofline_times(graph, "v100-16gb")

time(op) = max(flops / (peak_flops * compute_efficiency), bytes / mem_bandwidth) + launch_overhead
(peak_flops: the device's tensor_flops for an op with a bf16/fp16 output, where the device has them),
where bytes = each distinct input and output once, plus the kernel's workspace written and read once.
Measured times instead: tvm_swap.cost.profile.
"""
from __future__ import annotations

import numpy as np

from .devices import DeviceSpec, get_device
from ..graph import DataflowGraph


def op_bytes(graph: DataflowGraph) -> np.ndarray:
    """Bytes each op moves through device memory: distinct inputs + outputs, plus 2x its workspace."""
    nb = graph.tensor_bytes()
    out = np.empty(graph.num_ops, dtype=np.float64)
    for op in graph.ops:
        touched = set(op.inputs) | set(op.outputs)
        out[op.id] = float(sum(int(nb[t]) for t in touched)) + 2.0 * op.workspace
    return out


def op_peak_flops(graph: DataflowGraph, dev: DeviceSpec) -> np.ndarray:
    """Peak FLOP/s per op: the tensor-core rate for an op whose first output is bf16/fp16, else fp32."""
    if not dev.tensor_flops:
        return np.full(graph.num_ops, dev.peak_flops)
    return np.array([dev.flops_for(graph.tensors[op.outputs[0]].dtype) if op.outputs else dev.peak_flops
                     for op in graph.ops], dtype=np.float64)


def roofline_times(graph: DataflowGraph, device: str | DeviceSpec) -> np.ndarray:
    """Seconds per op (indexed by op id) on `device` by the roofline model above."""
    dev = get_device(device)
    flops = np.array([op.flops for op in graph.ops], dtype=np.float64)
    compute = flops / (op_peak_flops(graph, dev) * dev.compute_efficiency)
    memory = op_bytes(graph) / dev.mem_bandwidth
    return np.maximum(compute, memory) + dev.launch_overhead_s
