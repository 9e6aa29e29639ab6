#!/usr/bin/env python
"""Write ImageNet-size CNN symbols shaped as Gluon 1.9's model zoo exports them (no params file: compile them
with `--init random`), as scripts/make_resnet50_symbol.py does for ResNet-50.

    python scripts/make_cnn_symbols.py OUT_DIR --model vgg16        # -> OUT_DIR/vgg16-symbol.json
    python scripts/make_cnn_symbols.py OUT_DIR --model all          # alexnet, vgg16, mobilenetv2_1.0, densenet121

No MXNet needed: tests/data/mxnet/make_symbols.py's builder emits the NNVM graph. Layers, strides, biases and
widths follow gluon.model_zoo.vision (alexnet, vgg (no batch norm), mobilenet.MobileNetV2 at multiplier 1.0,
densenet); Dropout, which is the identity at inference, is written as Gluon writes it. Input: data 1x3x224x224.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "data" / "mxnet"))

from make_symbols import SymbolBuilder  # noqa: E402

CLASSES = 1000


def _dropout(b: SymbolBuilder, x):
    return b.op("Dropout", f"{b.uid('dropout')}_fwd", [x], axes=(), cudnn_off=False, mode="training", p=0.5)


def _classifier(b: SymbolBuilder, x, cin: int):
    """Gluon's AlexNet/VGG head: Dense(4096, relu), Dropout, Dense(4096, relu), Dropout, Dense(classes)."""
    x = _dropout(b, b.act(b.dense(x, cin, 4096)))
    x = _dropout(b, b.act(b.dense(x, 4096, 4096)))
    return b.dense(x, 4096, CLASSES)


def alexnet() -> dict:
    b = SymbolBuilder("alexnet0_")
    x = b.data()
    for cin, cout, k, s, p, pool in ((3, 64, 11, 4, 2, True), (64, 192, 5, 1, 2, True), (192, 384, 3, 1, 1, False),
                                     (384, 256, 3, 1, 1, False), (256, 256, 3, 1, 1, True)):
        x = b.act(b.conv(x, cin, cout, (k, k), (s, s), (p, p), bias=True))
        if pool:
            x = b.pool(x, "max", (3, 3), (2, 2))
    x = b.op("Flatten", "flatten0", [x])
    return b.to_json([_classifier(b, x, 256 * 6 * 6)])


def vgg16() -> dict:
    b = SymbolBuilder("vgg0_")
    x, cin = b.data(), 3
    for n, cout in zip((2, 2, 3, 3, 3), (64, 128, 256, 512, 512)):
        for _ in range(n):
            x, cin = b.act(b.conv(x, cin, cout, (3, 3), pad=(1, 1), bias=True)), cout
        x = b.pool(x, "max", (2, 2), (2, 2))
    return b.to_json([_classifier(b, x, 512 * 7 * 7)])


def _inverted_residual(b: SymbolBuilder, x, cin: int, cout: int, t: int, stride: int):
    y = b.relu6(b.bn(b.conv(x, cin, cin * t, (1, 1)), cin * t))
    y = b.relu6(b.bn(b.conv(y, cin * t, cin * t, (3, 3), (stride, stride), (1, 1), groups=cin * t), cin * t))
    y = b.bn(b.conv(y, cin * t, cout, (1, 1)), cout)
    return b.op("elemwise_add", b.uid("_plus"), [y, x]) if stride == 1 and cin == cout else y


def mobilenetv2() -> dict:
    b = SymbolBuilder("mobilenetv20_")
    x = b.relu6(b.bn(b.conv(b.data(), 3, 32, (3, 3), (2, 2), (1, 1)), 32))
    cins = [32, 16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160]
    couts = [16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320]
    ts = [1] + [6] * 16
    strides = [1, 2, 1, 2, 1, 1, 2] + [1] * 6 + [2] + [1] * 3
    for cin, cout, t, s in zip(cins, couts, ts, strides):
        x = _inverted_residual(b, x, cin, cout, t, s)
    x = b.relu6(b.bn(b.conv(x, 320, 1280, (1, 1)), 1280))
    x = b.pool(x, "avg", (1, 1), (1, 1), global_pool=True)
    x = b.conv(x, 1280, CLASSES, (1, 1))                     # Gluon's MobileNetV2 output is a 1x1 conv
    return b.to_json([b.op("Flatten", "flatten0", [x])])


def densenet121() -> dict:
    growth, bn_size = 32, 4
    b = SymbolBuilder("densenet0_")
    x = b.act(b.bn(b.conv(b.data(), 3, 64, (7, 7), (2, 2), (3, 3)), 64))
    x = b.pool(x, "max", (3, 3), (2, 2), (1, 1))
    c = 64
    for i, n in enumerate((6, 12, 24, 16)):
        for _ in range(n):
            y = b.conv(b.act(b.bn(x, c)), c, bn_size * growth, (1, 1))
            y = b.conv(b.act(b.bn(y, bn_size * growth)), bn_size * growth, growth, (3, 3), pad=(1, 1))
            x = b.op("Concat", b.uid("concat"), [x, y], dim=1, num_args=2)
            c += growth
        if i < 3:                                            # transition: halve the channels and the size
            x = b.pool(b.conv(b.act(b.bn(x, c)), c, c // 2, (1, 1)), "avg", (2, 2), (2, 2))
            c //= 2
    x = b.pool(b.act(b.bn(x, c)), "avg", (7, 7), (7, 7))
    x = b.op("Flatten", "flatten0", [x])
    return b.to_json([b.dense(x, c, CLASSES)])


MODELS = {"alexnet": alexnet, "vgg16": vgg16, "mobilenetv2_1.0": mobilenetv2, "densenet121": densenet121}


def write(out_dir: str | Path, model: str) -> Path:
    path = Path(out_dir) / f"{model}-symbol.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(MODELS[model](), indent=1) + "\n")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", nargs="?", default=".")
    ap.add_argument("--model", default="all", choices=[*MODELS, "all"])
    args = ap.parse_args(argv)
    for m in (MODELS if args.model == "all" else [args.model]):
        print(write(args.out_dir, m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
