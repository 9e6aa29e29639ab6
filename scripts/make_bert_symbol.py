#!/usr/bin/env python
"""Write bert_base-symbol.json: a BERT-base-sized encoder (12 layers, hidden 768, 12 heads, FFN 3072, GELU,
post-LayerNorm) with a masked-LM head (Dense 768 -> 30522) as the symbol JSON Gluon 1.9's `export` writes, no
params file (an architecture to size up: compile it with `--init random`, train it with `--train`).

    python scripts/make_bert_symbol.py OUT_DIR [LAYERS]     # -> OUT_DIR/bert_base-symbol.json
    tvm-swap plan OUT_DIR/bert_base-symbol.json --shape data=1,128,768 --train --mem-limit 30%

The block is tests/data/mxnet's transformer_encoder (the same ops, Reshape codes and order) at BERT-base size.
Its input is the token embeddings (batch, seq, 768), as that fixture's is: the word-embedding lookup is left
out, the MLM head's 30522 x 768 weight (BERT ties it to the word embedding) is the model's largest tensor.
Dropout is left out (the importer makes it an identity). 12 layers: 85 M encoder + 23 M head parameters.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "data" / "mxnet"))

from make_symbols import SymbolBuilder  # noqa: E402

NAME = "bert_base"
HIDDEN, HEADS, FFN, VOCAB, SEQ = 768, 12, 3072, 30522, 128


def _heads(b: SymbolBuilder, x, tag: str):
    """(B, S, H) -> (B * heads, S, H / heads), as Gluon's multi-head attention reshapes."""
    y = b.op("Reshape", b.uid(f"{tag}_reshape"), [x], shape=f"(0, 0, {HEADS}, -1)")
    y = b.op("transpose", b.uid(f"{tag}_transpose"), [y], axes="(0, 2, 1, 3)")
    return b.op("Reshape", b.uid(f"{tag}_reshape"), [y], shape="(-3, 0, 0)")


def _layer_norm(b: SymbolBuilder, x, name: str):
    gamma = b.var(f"{name}_gamma", (HIDDEN,), "ones")
    beta = b.var(f"{name}_beta", (HIDDEN,), "zeros")
    return b.op("LayerNorm", f"{name}_layernorm0", [x, gamma, beta], axis=-1, eps=1e-12)


def _encoder_layer(b: SymbolBuilder, x, i: int):
    a = f"l{i}_attn"
    q = _heads(b, b.dense(x, HIDDEN, HIDDEN, flatten=False), a)
    q = b.op("_div_scalar", b.uid(f"{a}__divscalar"), [q], scalar=float(math.sqrt(HIDDEN // HEADS)))
    k = _heads(b, b.dense(x, HIDDEN, HIDDEN, flatten=False), a)
    scores = b.op("batch_dot", b.uid(f"{a}_batch_dot"), [q, k], transpose_b=True)
    probs = b.op("softmax", b.uid(f"{a}_softmax"), [scores], axis=-1)
    v = _heads(b, b.dense(x, HIDDEN, HIDDEN, flatten=False), a)
    ctx = b.op("batch_dot", b.uid(f"{a}_batch_dot"), [probs, v])
    ctx = b.op("Reshape", b.uid(f"{a}_reshape"), [ctx], shape=f"(-4, -1, {HEADS}, 0, 0)")
    ctx = b.op("transpose", b.uid(f"{a}_transpose"), [ctx], axes="(0, 2, 1, 3)")
    ctx = b.op("Reshape", b.uid(f"{a}_reshape"), [ctx], shape="(0, 0, -3)")
    y = b.op("elemwise_add", b.uid("_plus"), [x, b.dense(ctx, HIDDEN, HIDDEN, flatten=False)])
    y = _layer_norm(b, y, f"l{i}_ln1")
    h = b.op("LeakyReLU", b.uid("gelu"), [b.dense(y, HIDDEN, FFN, flatten=False)], act_type="gelu")
    z = b.op("elemwise_add", b.uid("_plus"), [y, b.dense(h, FFN, HIDDEN, flatten=False)])
    return _layer_norm(b, z, f"l{i}_ln2")


def bert_base(layers: int = 12, seq: int = SEQ) -> dict:
    b = SymbolBuilder("bert_")
    x = b.data()
    pos = b.var("pos_embed", (1, seq, HIDDEN))
    y = b.op("broadcast_add", b.uid("broadcast_add"), [x, pos])
    for i in range(layers):
        y = _encoder_layer(b, y, i)
    return b.to_json([b.dense(y, HIDDEN, VOCAB, flatten=False)])      # the masked-LM head's logits


def write(out_dir: str | Path, layers: int = 12) -> Path:
    path = Path(out_dir) / f"{NAME}-symbol.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(bert_base(layers), indent=1) + "\n")
    return path


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) > 2 or any(a.startswith("-") for a in args):
        sys.exit(__doc__.split("\n\n")[1])
    print(write(args[0] if args else ".", int(args[1]) if len(args) > 1 else 12))
