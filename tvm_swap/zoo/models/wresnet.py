"""Wide ResNet-152 (bottleneck blocks [3, 8, 36, 3]) on ImageNet 224x224, 1000 classes.

The width multiplier k scales the bottleneck's inner channels (64, 128, 256, 512 -> 64k, ...) and
leaves the block outputs at 256, 512, 1024, 2048, as in torchvision's wide_resnet50_2 (k = 2). Every
conv is followed by batch norm (batch statistics) and ReLU; the shortcut is a 1x1 conv + BN where the
shape changes; the stride sits on the 3x3 conv (ResNet v1.5).
"""
from __future__ import annotations

from tvm.relax import op as R

from .net import Net

RESNET152_BLOCKS = (3, 8, 36, 3)


def _bottleneck(net: Net, x, inner: int, out: int, stride: int, name: str, project: bool):
    y = net.conv_bn(x, inner, 1, f"{name}.conv1")
    y = net.conv_bn(y, inner, 3, f"{name}.conv2", stride=stride, padding=1)
    y = net.conv_bn(y, out, 1, f"{name}.conv3", relu=False)
    short = net.conv_bn(x, out, 1, f"{name}.down", stride=stride, relu=False) if project else x
    return net.relu(net.emit(R.add(y, short)))


def wide_resnet(blocks=RESNET152_BLOCKS, width: int = 10, image: int = 224, classes: int = 1000):
    blocks = tuple(blocks)
    def build(batch: int):
        def build_loss(net: Net):
            x = net.input("data", (batch, 3, image, image))
            labels = net.input("labels", (batch,), "int64")
            y = net.conv_bn(x, 64, 7, "stem", stride=2, padding=3)
            y = net.max_pool(y, 3, 2, 1)
            in_ch = 64
            for stage, n in enumerate(blocks):
                inner, out = 64 * width * 2 ** stage, 256 * 2 ** stage
                for i in range(n):
                    stride = 2 if stage > 0 and i == 0 else 1
                    y = _bottleneck(net, y, inner, out, stride, f"s{stage + 1}.b{i}", project=(i == 0))
                in_ch = out
            logits = net.dense(net.global_avg_pool(y), classes, "fc")
            assert in_ch == 2048
            return net.softmax_cross_entropy(logits, labels)

        return build_loss

    return build
