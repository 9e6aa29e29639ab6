"""Inception-v4 (Szegedy et al. 2016) on 299x299 images, 1000 classes, with every filter count times
`width` (the paper's "wide" Inception-4 uses x4).

Layout as in the reference implementation (timm's inception_v4): stem (Mixed_3a/4a/5a), 4 x
Inception-A, Reduction-A, 7 x Inception-B, Reduction-B, 3 x Inception-C, global average pool, FC.
Every conv is conv + batch norm + ReLU; pools inside blocks are 3x3 average pools (stride 1, pad 1,
not counting the padding) and the reductions use 3x3 stride-2 max pools.
"""
from __future__ import annotations

from .net import Net


def inception_v4(width: int = 4, image: int = 299, classes: int = 1000):
    def build(batch: int):
        def build_loss(net: Net):
            x = net.input("data", (batch, 3, image, image))
            labels = net.input("labels", (batch,), "int64")
            w = lambda c: c * width  # noqa: E731

            def conv(x, c, k, name, stride=1, padding=0):
                return net.conv_bn(x, w(c), k, name, stride=stride, padding=padding)

            # stem
            y = conv(x, 32, 3, "stem.c1", stride=2)
            y = conv(y, 32, 3, "stem.c2")
            y = conv(y, 64, 3, "stem.c3", padding=1)
            y = net.concat([net.max_pool(y, 3, 2), conv(y, 96, 3, "mixed3a", stride=2)])
            b0 = conv(conv(y, 64, 1, "mixed4a.b0.c1"), 96, 3, "mixed4a.b0.c2")
            b1 = conv(y, 64, 1, "mixed4a.b1.c1")
            b1 = conv(b1, 64, (1, 7), "mixed4a.b1.c2", padding=(0, 3))
            b1 = conv(b1, 64, (7, 1), "mixed4a.b1.c3", padding=(3, 0))
            b1 = conv(b1, 96, 3, "mixed4a.b1.c4")
            y = net.concat([b0, b1])
            y = net.concat([conv(y, 192, 3, "mixed5a", stride=2), net.max_pool(y, 3, 2)])

            for i in range(4):
                n = f"a{i}"
                b0 = conv(y, 96, 1, f"{n}.b0")
                b1 = conv(conv(y, 64, 1, f"{n}.b1.c1"), 96, 3, f"{n}.b1.c2", padding=1)
                b2 = conv(conv(y, 64, 1, f"{n}.b2.c1"), 96, 3, f"{n}.b2.c2", padding=1)
                b2 = conv(b2, 96, 3, f"{n}.b2.c3", padding=1)
                b3 = conv(net.avg_pool(y), 96, 1, f"{n}.b3")
                y = net.concat([b0, b1, b2, b3])

            b0 = conv(y, 384, 3, "ra.b0", stride=2)
            b1 = conv(conv(y, 192, 1, "ra.b1.c1"), 224, 3, "ra.b1.c2", padding=1)
            b1 = conv(b1, 256, 3, "ra.b1.c3", stride=2)
            y = net.concat([b0, b1, net.max_pool(y, 3, 2)])

            for i in range(7):
                n = f"b{i}"
                b0 = conv(y, 384, 1, f"{n}.b0")
                b1 = conv(y, 192, 1, f"{n}.b1.c1")
                b1 = conv(b1, 224, (1, 7), f"{n}.b1.c2", padding=(0, 3))
                b1 = conv(b1, 256, (7, 1), f"{n}.b1.c3", padding=(3, 0))
                b2 = conv(y, 192, 1, f"{n}.b2.c1")
                b2 = conv(b2, 192, (7, 1), f"{n}.b2.c2", padding=(3, 0))
                b2 = conv(b2, 224, (1, 7), f"{n}.b2.c3", padding=(0, 3))
                b2 = conv(b2, 224, (7, 1), f"{n}.b2.c4", padding=(3, 0))
                b2 = conv(b2, 256, (1, 7), f"{n}.b2.c5", padding=(0, 3))
                b3 = conv(net.avg_pool(y), 128, 1, f"{n}.b3")
                y = net.concat([b0, b1, b2, b3])

            b0 = conv(conv(y, 192, 1, "rb.b0.c1"), 192, 3, "rb.b0.c2", stride=2)
            b1 = conv(y, 256, 1, "rb.b1.c1")
            b1 = conv(b1, 256, (1, 7), "rb.b1.c2", padding=(0, 3))
            b1 = conv(b1, 320, (7, 1), "rb.b1.c3", padding=(3, 0))
            b1 = conv(b1, 320, 3, "rb.b1.c4", stride=2)
            y = net.concat([b0, b1, net.max_pool(y, 3, 2)])

            for i in range(3):
                n = f"c{i}"
                b0 = conv(y, 256, 1, f"{n}.b0")
                b1 = conv(y, 384, 1, f"{n}.b1.c1")
                b1 = net.concat([conv(b1, 256, (1, 3), f"{n}.b1.c2a", padding=(0, 1)),
                                 conv(b1, 256, (3, 1), f"{n}.b1.c2b", padding=(1, 0))])
                b2 = conv(y, 384, 1, f"{n}.b2.c1")
                b2 = conv(b2, 448, (3, 1), f"{n}.b2.c2", padding=(1, 0))
                b2 = conv(b2, 512, (1, 3), f"{n}.b2.c3", padding=(0, 1))
                b2 = net.concat([conv(b2, 256, (1, 3), f"{n}.b2.c4a", padding=(0, 1)),
                                 conv(b2, 256, (3, 1), f"{n}.b2.c4b", padding=(1, 0))])
                b3 = conv(net.avg_pool(y), 256, 1, f"{n}.b3")
                y = net.concat([b0, b1, b2, b3])

            logits = net.dense(net.global_avg_pool(y), classes, "fc")
            return net.softmax_cross_entropy(logits, labels)

        return build_loss

    return build
