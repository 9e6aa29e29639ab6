"""zoo/cnn: CNN training steps written from formulas at MXNet's kernel granularity (the Tape)."""
from __future__ import annotations

from tvm_swap.zoo import load_zoo
from tvm_swap.zoo.cnn import nasnet_training_graph
from tvm_swap.zoo.cnn.tape import Tape
from tvm_swap.zoo.stats import memory_stats

TINY = dict(filters=8, stem_filters=6, image=32, classes=10)


def test_tape_derives_one_backward_kernel_per_layer_and_sums_shared_gradients():
    tp = Tape("t")
    x = tp.input("x", (2, 3, 8, 8))
    y = tp.relu(tp.conv(x, 4, 3, "c", pad=1))
    z = tp.add(y, y)                              # y gets two gradient contributions
    loss = tp.softmax_cross_entropy(tp.dense(tp.global_avg_pool(z), 5, "fc"), tp.input("labels", (2,), "int64"))
    g = tp.finish(loss, {})
    kernels = [o.kernel for o in g.ops]
    assert kernels == ["conv", "relu", "add", "global_avg_pool", "fully_connected", "softmax_output",
                       "softmax_output_backward", "fully_connected_backward", "sgd_mom_update", "sgd_mom_update",
                       "global_avg_pool_backward", "elementwise_sum", "relu_backward", "conv_backward",
                       "sgd_mom_update"]
    s = g.ops[kernels.index("elementwise_sum")]
    assert len(s.inputs) == 2 and s.inputs[0] == s.inputs[1], "add passes one gradient to both inputs"
    conv_bwd = g.ops[kernels.index("conv_backward")]
    assert len(conv_bwd.outputs) == 1, "the data input needs no gradient: only dW"
    assert g.tensors[conv_bwd.inputs[1]].name == "x", "conv backward reads its saved input"
    assert len(g.updates) == 2 * 3                    # conv weight, fc weight and bias, each with its momentum


def test_nasnet_grows_by_the_same_cells_per_repeat():
    # from R = 2 on, a new cell reads two normal cells (the first reads the reduction cell and the one before)
    ops = [nasnet_training_graph(2, repeats=r, **TINY).num_ops for r in (2, 3, 4)]
    assert ops[2] - ops[1] == ops[1] - ops[0] > 0


def test_nasnet_25_is_near_the_papers_size():
    g = load_zoo("zoo:nasnet-25@batch=64")
    s = memory_stats(g)
    assert 0.7 < s["peak_bytes"] / 193e9 < 1.3
    assert 50 <= s["unique_sizes"] <= 80
    assert g.meta["zoo_model"] == "nasnet-25" and g.meta["batch"] == 64
