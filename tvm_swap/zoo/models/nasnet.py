"""NASNet-A (Zoph et al. 2018) on ImageNet, with R normal cells per stage (the paper's "NasNet-25": R = 25).

Layout as TF-slim's `build_nasnet_large` (331x331, F = 168 filters, stem multiplier 3), except that the
number of normal cells per stage is R instead of 6:
    stem conv 3x3/2 (96) -> stem reduction cells (F/4, F/2) -> R normal cells (F) -> reduction (2F)
    -> R normal cells (2F) -> reduction (4F) -> R normal cells (4F) -> ReLU, global average pool, FC.
Cells follow NASNet-A's normal and reduction cells (5 blocks of two ops each, summed); a cell's inputs
are the two previous cells' outputs, each first brought to the cell's width by ReLU-conv1x1-BN. A
separable conv is NASNet's "separable_KxK_2": twice (ReLU, depthwise KxK, pointwise 1x1, BN), the stride
on the first depthwise conv.

Simplifications (they change neither the cell structure nor the tensor sizes much): the previous cell's
output, when its spatial size is twice the current one, is reduced by a 1x1 stride-2 conv + BN instead of
the two-path factorized reduction; no auxiliary head, no drop-path, no dropout. Batch norm uses batch
statistics, built from primitive ops (Net.batch_norm), as in the other zoo CNNs.

Against the paper's NasNet-25 (193 GB, 5533 ops, 65 sizes at batch 64). Measured on this model at R = 1, 2
and 3 (real sizes, llvm lowering: bench/nasnet_scaling.py, benchmarks/nasnet_scaling.json), each extra R
adds the same cells, so R = 25 is extrapolated from the R = 2 -> 3 step: about 19,900 ops (3320 at R = 3,
+753 per R: about 250 fused kernels per normal cell, forward and backward) and a liveness peak of about
222 GB at batch 64 (41.6 GB at R = 3, +8.2 GB per R), with 63-66 distinct tensor sizes. The op count is
3.6x the paper's because batch norm is built from primitive ops (forward: mean, variance, normalize, scale;
backward: their gradients) where MXNet has one BatchNorm op each way, and depthwise-conv weight gradients
take extra reshape/transpose kernels; the memory is 1.15x for the same reason (the normalized activations
are kept for backward) and because every separable conv's ReLU output is its own tensor.

The zoo's nasnet-25 graph is NOT made from this Relax model but written from formulas (zoo/cnn/nasnet.py,
the same layout and cells at MXNet's kernel granularity). Profiled at R = 2, 4, 6, 12 (cProfile, batch 5,
llvm): relax.transform.DeadCodeElimination on the appended train step was superlinear (4 s at R = 6, 113 s at
R = 12); training.py now drops dead bindings with one backward sweep. What is left is linear but large:
legalizing ~20,000 ops through emit_te (create_prim_func per call) dominates lowering, ~1 s per 10 kernels on
this machine, done for two targets (cuda for sizes, llvm for flops) at three batches: most of an hour of CPU
at R = 25, and the extraction shows TVM's granularity (batch norm as 3 forward and ~6 backward kernels).
`python scripts/gen_zoo.py --models nasnet-25 --jobs 3` still runs it on an idle machine.
"""
from __future__ import annotations

from tvm.relax import op as R

from .net import Net, shape_of


def _dw_conv(net: Net, x, k: int, name: str, stride: int = 1):
    c = shape_of(x)[1]
    w = net.param(f"{name}.weight", (c, 1, k, k))
    p = k // 2
    return net.emit(R.nn.conv2d(x, w, strides=stride, padding=(p, p, p, p), groups=c))


def _sep_conv(net: Net, x, out_ch: int, k: int, name: str, stride: int = 1):
    """NASNet's separable_KxK_2: (ReLU, depthwise, pointwise, BN) twice; stride on the first depthwise."""
    y = x
    for i, s in enumerate((stride, 1)):
        y = net.relu(y)
        y = _dw_conv(net, y, k, f"{name}.{i}.dw", stride=s)
        y = net.batch_norm(net.conv2d(y, out_ch, 1, f"{name}.{i}.pw"), f"{name}.{i}.bn")
    return y


def _fit(net: Net, x, ch: int, hw: int, name: str):
    """Bring a cell input to `ch` channels and `hw` spatial size: ReLU-conv1x1-BN (stride 2 if it is larger)."""
    _, c, h, _ = shape_of(x)
    if c == ch and h == hw:
        return x
    stride = 2 if h > hw else 1
    return net.conv_bn(net.relu(x), ch, 1, name, stride=stride, relu=False)


def _add(net: Net, a, b):
    return net.emit(R.add(a, b))


def _normal_cell(net: Net, cur, prev, ch: int, name: str):
    hw = shape_of(cur)[2]
    h = _fit(net, cur, ch, hw, f"{name}.fit_cur")
    p = _fit(net, prev, ch, hw, f"{name}.fit_prev")
    b0 = _add(net, _sep_conv(net, h, ch, 5, f"{name}.b0.l"), _sep_conv(net, p, ch, 3, f"{name}.b0.r"))
    b1 = _add(net, _sep_conv(net, p, ch, 5, f"{name}.b1.l"), _sep_conv(net, p, ch, 3, f"{name}.b1.r"))
    b2 = _add(net, net.avg_pool(h), p)
    b3 = _add(net, net.avg_pool(p), net.avg_pool(p))
    b4 = _add(net, _sep_conv(net, h, ch, 3, f"{name}.b4.l"), h)
    return net.concat([p, b0, b1, b2, b3, b4])


def _reduction_cell(net: Net, cur, prev, ch: int, name: str):
    hw = shape_of(cur)[2]
    h = _fit(net, cur, ch, hw, f"{name}.fit_cur")
    p = _fit(net, prev, ch, hw, f"{name}.fit_prev")
    mp = lambda x: net.max_pool(x, 3, 2, 1)  # noqa: E731
    ap = lambda x: net.avg_pool(x, 3, 2, 1)  # noqa: E731
    b0 = _add(net, _sep_conv(net, h, ch, 5, f"{name}.b0.l", 2), _sep_conv(net, p, ch, 7, f"{name}.b0.r", 2))
    b1 = _add(net, mp(h), _sep_conv(net, p, ch, 7, f"{name}.b1.r", 2))
    b2 = _add(net, ap(h), _sep_conv(net, p, ch, 5, f"{name}.b2.r", 2))
    b3 = _add(net, b1, net.avg_pool(b0))
    b4 = _add(net, _sep_conv(net, b0, ch, 3, f"{name}.b4.l"), mp(h))
    return net.concat([b1, b2, b3, b4])


def nasnet_a(repeats: int = 25, filters: int = 168, stem_filters: int = 96, image: int = 331,
             classes: int = 1000):
    def build(batch: int):
        def build_loss(net: Net):
            x = net.input("data", (batch, 3, image, image))
            labels = net.input("labels", (batch,), "int64")
            stem = net.conv_bn(x, stem_filters, 3, "stem", stride=2, relu=False)
            s0 = _reduction_cell(net, stem, stem, filters // 4, "stem_cell0")
            prev, cur = stem, s0
            cur, prev = _reduction_cell(net, cur, prev, filters // 2, "stem_cell1"), cur
            ch = filters
            for stage in range(3):
                if stage > 0:
                    ch *= 2
                    cur, prev = _reduction_cell(net, cur, prev, ch, f"reduce{stage}"), cur
                for i in range(repeats):
                    cur, prev = _normal_cell(net, cur, prev, ch, f"s{stage}.n{i}"), cur
            y = net.global_avg_pool(net.relu(cur))
            logits = net.dense(y, classes, "fc")
            return net.softmax_cross_entropy(logits, labels)

        return build_loss

    return build
