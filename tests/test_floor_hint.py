"""The refusal names what would move the floor for the op that sets it (issue 26, item 5): a weight layout
copy that could not be folded, the split factor or batch that would fit, and no advice that cannot move that
op's own need (tvm_swap.limits.floor_hint, through plan_graph's refusal)."""
from __future__ import annotations

import re

import pytest

from tvm_swap.errors import InfeasibleLimitError
from tvm_swap.graph import DataflowGraph
from tvm_swap.graph.dataflow import OpInfo, TensorInfo
from tvm_swap.planner.api import check_feasible

MiB = 1 << 20


def graph(tensors, ops, updates=None):
    ts = [TensorInfo(i, n, b, s, "float32", k) for i, (n, b, s, k) in enumerate(tensors)]
    os_ = [OpInfo(i, n, kern, tuple(ins), tuple(outs)) for i, (n, kern, ins, outs) in enumerate(ops)]
    return DataflowGraph("g", ts, os_, outputs=[ops[-1][3][0]], updates=dict(updates or {}))


def refusal(g, limit) -> str:
    with pytest.raises(InfeasibleLimitError) as e:
        check_feasible(g, limit, "arena")
    return str(e.value)


def test_a_weight_layout_copy_that_was_not_folded_is_named_and_no_batch_or_fusion_advice():
    """(What a lowering without relay_passes.param_layout / transpose_matmul leaves: TVM's transpose kernel.)"""
    g = graph([("x", MiB, (4, 64 * 1024), "input"), ("W", 64 * MiB, (4096, 4096), "param"),
               ("WT", 64 * MiB, (4096, 4096), "activation"), ("y", MiB, (4, 64 * 1024), "activation"),
               ("z", MiB, (4, 64 * 1024), "activation")],
              [("transpose#0", "transpose", [1], [2]), ("fused_matmul_add#1", "fused_matmul_add", [0, 2], [3]),
               ("relu#2", "relu", [3], [4])])
    msg = refusal(g, 100 * MiB)
    assert "op 'transpose#0' needs 128.00 MiB" in msg
    assert "copies parameter 'W' (64.00 MiB) into another layout" in msg and "could not be folded" in msg
    assert "micro_batches" not in msg and "fuse_max_depth" not in msg and "smaller batch" not in msg


def test_a_weight_bigger_than_the_limit_names_the_split_that_fits_not_the_batch():
    w = 392 * MiB
    g = graph([("x", 100 * 1024, (1, 25088), "input"), ("W_T", w, (25088, 4096), "param"),
               ("b", 16 * 1024, (4096,), "param"), ("y", 16 * 1024, (1, 4096), "activation"),
               ("z", 16 * 1024, (1, 4096), "activation")],
              [("fused_matmul_add_relu#0", "fused_matmul_add_relu", [0, 1, 2], [3]),
               ("relu#1", "relu", [3], [4])])
    msg = refusal(g, 60 * MiB)
    assert "its parameters (392.02 MiB, the largest 'W_T')" in msg and "no batch size or fusion setting" in msg
    k = int(re.search(r"split_dense=True runs it in (\d+) slices of its output features", msg).group(1))
    assert 100 * 1024 + (w + 2 * 16 * 1024) / k <= 60 * MiB < 100 * 1024 + (w + 2 * 16 * 1024) / (k - 1)
    assert "micro_batches" not in msg and "fuse_max_depth" not in msg


def test_activations_that_set_the_floor_get_the_micro_batch_count_that_fits():
    act = 32 * MiB
    g = graph([("x", act, (8, 1024, 1024), "input"), ("g", 4096, (1024,), "param"),
               ("y", act, (8, 1024, 1024), "activation"), ("a", act, (8, 1024, 1024), "activation"),
               ("z", act, (8, 1024, 1024), "activation")],
              [("fused_mul_add#0", "fused_mul_add", [0, 1], [2]), ("fused_add_relu#1", "fused_add_relu", [0, 2], [3]),
               ("relu#2", "relu", [3], [4])])
    msg = refusal(g, 40 * MiB)
    k = int(re.search(r"micro_batches=(\d+)", msg).group(1))
    assert k == 3                        # 96 MiB of activations in 3 slices: 32 MiB, beside 4 KiB of weights
    assert "fuse_max_depth=2" in msg     # a fused kernel holding three activations: less fusion helps too
    assert "its parameters" not in msg


def test_at_batch_one_no_micro_batches_are_advised():
    g = graph([("x", 8 * MiB, (1, 2 * MiB), "input"), ("y", 8 * MiB, (1, 2 * MiB), "activation"),
               ("z", 8 * MiB, (1, 2 * MiB), "activation")],
              [("fused_bn_clip#0", "fused_bn_clip", [0], [1]), ("relu#1", "relu", [1], [2])])
    msg = refusal(g, 10 * MiB)
    assert "micro_batches" not in msg and "smaller batch" not in msg and "fuse_max_depth" not in msg


def test_a_training_steps_activations_get_the_batch_split_that_rides_on_split_dense():
    """A training step (updates) whose floor is activations: split_dense=True with the batch slices that
    fit (its per-sample ops in slices of the batch, relay_passes.split_region), beside a smaller batch; never
    split_ops (inference only) nor micro_batches (training mixes the batch)."""
    act = 32 * MiB
    g = graph([("x", act, (8, 1024, 1024), "input"), ("w", 4096, (1024,), "param"),
               ("y", act, (8, 1024, 1024), "activation"), ("a", act, (8, 1024, 1024), "activation"),
               ("w_new", 4096, (1024,), "activation")],
              [("fused_max_pool2d_backward_where#0", "fused_max_pool2d_backward_where", [0, 1], [2]),
               ("fused_mul_add#1", "fused_mul_add", [0, 2], [3]), ("sgd#2", "sgd", [1, 3], [4])],
              updates={1: 4})
    msg = refusal(g, 40 * MiB)
    k = int(re.search(r"split_dense=True \(it and the per-sample ops around it in (\d+) or more slices of the "
                      r"batch", msg).group(1))
    assert k == 3 and "a batch 3 times smaller" in msg
    assert "split_ops" not in msg and "micro_batches" not in msg


def test_a_training_steps_input_read_whole_gets_its_batch_slices():
    """A training step whose floor op is a weight gradient reading a 2-D input whole (mlp at batch 128): the
    input's batch slices under split_dense=True (relay_passes.split_input_train), K as fits."""
    x = 392 * 1024
    g = graph([("data", x, (128, 784), "input"), ("dy", 4 * 1024, (128, 8), "activation"),
               ("w", 24 * 1024, (8, 784), "param"), ("w_new", 24 * 1024, (8, 784), "activation")],
              [("fused_matmul_transposed_multiply_subtract#0", "fused_matmul_transposed_multiply_subtract",
                [0, 1, 2], [3])], updates={2: 3})
    msg = refusal(g, 300 * 1024)
    k = int(re.search(r"split_dense=True \(input 'data' in (\d+) batch slices", msg).group(1))
    assert 52 * 1024 + x / k <= 300 * 1024 < 52 * 1024 + x / (k - 1)
    assert "a batch" in msg and "micro_batches" not in msg
