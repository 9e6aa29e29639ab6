"""Seconds per op when a plan places it on the host (pure Python, like tvm_swap.cost.roofline for the device).

time(op) = max(flops / host.peak_flops, bytes / host.mem_bandwidth) + host.launch_overhead_s, bytes as in
tvm_swap.cost.roofline.op_bytes (each distinct input and output once): the ops worth placing there (an optimizer
update, elementwise kernels) read and write every byte once and are bound by the host's memory bandwidth.
"""
from __future__ import annotations

import numpy as np

from .roofline import op_bytes
from .devices import HostSpec
from ..graph import DataflowGraph


def host_times(graph: DataflowGraph, host: HostSpec) -> np.ndarray:
    """Seconds per op (indexed by op id) on `host`."""
    flops = np.array([op.flops for op in graph.ops], dtype=np.float64)
    return np.maximum(flops / host.peak_flops, op_bytes(graph) / host.mem_bandwidth) + host.launch_overhead_s
