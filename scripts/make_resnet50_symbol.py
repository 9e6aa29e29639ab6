#!/usr/bin/env python
"""Write resnet50_v1-symbol.json: Gluon's ResNet-50 v1 (BottleneckV1 blocks, [3, 4, 6, 3]) as the symbol JSON
Gluon 1.9's `export` writes, with no params file (an architecture to size up: compile it with `--init random`).

    python scripts/make_resnet50_symbol.py OUT_DIR      # -> OUT_DIR/resnet50_v1-symbol.json

No MXNet needed: tests/data/mxnet/make_symbols.py's builder emits the NNVM graph. Layer order, strides and
biases follow gluon.model_zoo.vision.resnet (v1: the stride sits on the first 1x1 conv of a block; its 1x1
convs keep Gluon's default bias, its 3x3 conv and the downsample conv have none).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "data" / "mxnet"))

from make_symbols import SymbolBuilder  # noqa: E402

NAME = "resnet50_v1"
BLOCKS = (3, 4, 6, 3)
CHANNELS = (64, 256, 512, 1024, 2048)


def _bottleneck(b: SymbolBuilder, x, cin: int, cout: int, stride: int, downsample: bool):
    s = (stride, stride)
    y = b.act(b.bn(b.conv(x, cin, cout // 4, (1, 1), stride=s, bias=True), cout // 4))
    y = b.act(b.bn(b.conv(y, cout // 4, cout // 4, (3, 3), pad=(1, 1)), cout // 4))
    y = b.bn(b.conv(y, cout // 4, cout, (1, 1), bias=True), cout)
    short = b.bn(b.conv(x, cin, cout, (1, 1), stride=s), cout) if downsample else x
    return b.act(b.op("elemwise_add", b.uid("_plus"), [short, y]))


def resnet50_v1(classes: int = 1000) -> dict:
    b = SymbolBuilder("resnetv10_")
    x = b.data()
    y = b.act(b.bn(b.conv(x, 3, CHANNELS[0], (7, 7), stride=(2, 2), pad=(3, 3)), CHANNELS[0]))
    y = b.pool(y, "max", (3, 3), (2, 2), (1, 1))
    for stage, n in enumerate(BLOCKS):
        cin, cout = CHANNELS[stage], CHANNELS[stage + 1]
        for i in range(n):
            y = _bottleneck(b, y, cin if i == 0 else cout, cout, 1 if stage == 0 or i > 0 else 2, downsample=i == 0)
    y = b.pool(y, "avg", (1, 1), (1, 1), global_pool=True)
    return b.to_json([b.dense(y, CHANNELS[-1], classes)])


def write(out_dir: str | Path) -> Path:
    path = Path(out_dir) / f"{NAME}-symbol.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(resnet50_v1(), indent=1) + "\n")
    return path


if __name__ == "__main__":
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1].startswith("-")):
        # An option here was once taken for OUT_DIR (a "--help" folder landed in the repository root).
        sys.exit(__doc__.split("\n\n")[1])
    print(write(sys.argv[1] if len(sys.argv) > 1 else "."))
