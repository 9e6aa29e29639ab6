"""NASNet-A's training step at MXNet's kernel granularity, from formulas at any batch (no TVM, no data file).

The same network as tvm_swap/zoo/models/nasnet.py (the Relax version: its docstring has the layout, the
cells and the simplifications), written on a Tape (tape.py) so that R = 25 normal cells per stage (the
paper's NasNet-25) is built in about a second instead of lowering a ~20,000-kernel Relax training step
three times (that takes most of an hour of CPU at R = 25; see models/nasnet.py).

Against the paper's NasNet-25 (5,533 ops, 193 GB, 65 sizes at batch 64), at batch 64: 12,198 ops, a liveness
peak of 164 GB (0.85x; tvm_swap.zoo.stats) and 56 sizes. Each normal cell is 154 kernels: 55 forward (12
ReLU, 12 1x1 convs, 10 depthwise convs, 12 batch norms, 3 pools, 5 adds, a concat), 50 backward (one per
forward layer, none for the adds), 3 gradient sums and 46 momentum updates (one per weight: 30% of all ops;
MXNet >= 1.5 can aggregate up to 4 weights per update kernel, which would give ~9,500 ops). The paper's count
is ~70 per cell, fewer than one kernel per layer each way even without updates, so its graph must count
coarser units than kernels (or its cells are smaller); we do not know which, and keep the kernel count the
simulator times. The memory is lower because a batch norm here saves only its (C,) mean and inverse std
beside its input, the ReLUs' outputs are the depthwise convs' saved inputs (no extra copies), no cuDNN
workspace is modelled, and the peak is the liveness in program order, not MXNet's allocator.
"""
from __future__ import annotations

from .tape import Tape


def _sep_conv(tp: Tape, x: int, ch: int, k: int, name: str, stride: int = 1) -> int:
    """NASNet's separable_KxK_2: (ReLU, depthwise KxK, pointwise 1x1, BN) twice; the stride on the first."""
    y = x
    for i, s in enumerate((stride, 1)):
        y = tp.depthwise_conv(tp.relu(y), k, f"{name}.{i}.dw", stride=s)
        y = tp.batch_norm(tp.conv(y, ch, 1, f"{name}.{i}.pw"), f"{name}.{i}.bn")
    return y


def _fit(tp: Tape, x: int, ch: int, hw: int, name: str) -> int:
    """ReLU-conv1x1-BN to `ch` channels (stride 2 when x is larger than `hw`); x itself when it fits."""
    _, c, h, _ = tp.shape(x)
    if c == ch and h == hw:
        return x
    return tp.batch_norm(tp.conv(tp.relu(x), ch, 1, name, stride=2 if h > hw else 1), name + ".bn")


def _normal_cell(tp: Tape, cur: int, prev: int, ch: int, name: str) -> int:
    hw = tp.shape(cur)[2]
    h, p = _fit(tp, cur, ch, hw, f"{name}.fit_cur"), _fit(tp, prev, ch, hw, f"{name}.fit_prev")
    avg = lambda x: tp.pool(x, "avg")  # noqa: E731
    b0 = tp.add(_sep_conv(tp, h, ch, 5, f"{name}.b0.l"), _sep_conv(tp, p, ch, 3, f"{name}.b0.r"))
    b1 = tp.add(_sep_conv(tp, p, ch, 5, f"{name}.b1.l"), _sep_conv(tp, p, ch, 3, f"{name}.b1.r"))
    b2 = tp.add(avg(h), p)
    b3 = tp.add(avg(p), avg(p))
    b4 = tp.add(_sep_conv(tp, h, ch, 3, f"{name}.b4.l"), h)
    return tp.concat([p, b0, b1, b2, b3, b4])


def _reduction_cell(tp: Tape, cur: int, prev: int, ch: int, name: str) -> int:
    hw = tp.shape(cur)[2]
    h, p = _fit(tp, cur, ch, hw, f"{name}.fit_cur"), _fit(tp, prev, ch, hw, f"{name}.fit_prev")
    mp = lambda x: tp.pool(x, "max", 3, 2, 1)  # noqa: E731
    ap = lambda x: tp.pool(x, "avg", 3, 2, 1)  # noqa: E731
    b0 = tp.add(_sep_conv(tp, h, ch, 5, f"{name}.b0.l", 2), _sep_conv(tp, p, ch, 7, f"{name}.b0.r", 2))
    b1 = tp.add(mp(h), _sep_conv(tp, p, ch, 7, f"{name}.b1.r", 2))
    b2 = tp.add(ap(h), _sep_conv(tp, p, ch, 5, f"{name}.b2.r", 2))
    b3 = tp.add(b1, tp.pool(b0, "avg"))
    b4 = tp.add(_sep_conv(tp, b0, ch, 3, f"{name}.b4.l"), mp(h))
    return tp.concat([b1, b2, b3, b4])


def nasnet_training_graph(batch: int, repeats: int = 25, filters: int = 168, stem_filters: int = 96,
                          image: int = 331, classes: int = 1000, name: str | None = None):
    """One SGD-with-momentum training step of NASNet-A (R = `repeats` normal cells per stage)."""
    tp = Tape(name or f"nasnet-{repeats}@batch={batch}")
    x = tp.input("data", (batch, 3, image, image))
    labels = tp.input("labels", (batch,), "int64")
    stem = tp.batch_norm(tp.conv(x, stem_filters, 3, "stem", stride=2), "stem.bn")
    s0 = _reduction_cell(tp, stem, stem, filters // 4, "stem_cell0")
    prev, cur = s0, _reduction_cell(tp, s0, stem, filters // 2, "stem_cell1")
    ch = filters
    for stage in range(3):
        if stage > 0:
            ch *= 2
            cur, prev = _reduction_cell(tp, cur, prev, ch, f"reduce{stage}"), cur
        for i in range(repeats):
            cur, prev = _normal_cell(tp, cur, prev, ch, f"s{stage}.n{i}"), cur
    logits = tp.dense(tp.global_avg_pool(tp.relu(cur)), classes, "fc")
    loss = tp.softmax_cross_entropy(logits, labels)
    meta = {"source": "tvm_swap.zoo.cnn (formulas at MXNet's kernel granularity, no TVM)", "batch": batch,
            "config": {"repeats": repeats, "filters": filters, "stem_filters": stem_filters, "image": image,
                       "classes": classes}, "optimizer": "momentum"}
    return tp.finish(loss, meta)
