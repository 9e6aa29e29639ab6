"""Training steps sized for a GPU: the GPU check's models (scripts/gpu_check.py).

    ex = cnn_train(scale=1.0)           # several GiB of activations at scale 1; scale shrinks the batch
    ex = transformer_train(scale=1.0)

- cnn_train: 24 conv3x3 layers of 64 channels, 12 at 128x128 then 12 at 64x64, batch 32 at scale 1: an
  activation-heavy step (tvm_swap.examples.models.cnn_train_step), SGD. No-swap peak 3.9 GiB, 1.6 TFLOP;
  plans exist down to 15% of the peak (the largest op's working set).
- transformer_train: a 6-layer pre-LN transformer encoder (d=512, 8 heads, ffn 2048, sequence 512) with a
  per-token classifier and cross-entropy, batch 32 at scale 1; its attention probabilities (B*H*S*S
  floats per layer) dominate memory, as in real long-sequence training. SGD through tvm_swap.training.
  No-swap peak 5.2 GiB; plans exist down to 17% of it.

Memory scales with the batch, kernels do not, so a small `scale` gives the same program shape for CPU dry
runs. Values are random but deterministic (seed); params are small so training stays finite.
"""
from __future__ import annotations

import math

import numpy as np

from .models import Example, cnn_train_step

CNN = dict(batch=32, in_channels=3, channels=(64,) * 24, image=128, classes=10, pool_every=12)
TRANSFORMER = dict(batch=32, seq=512, d_model=512, heads=8, ffn=2048, layers=6, vocab=1024, classes=16)
# The same programs at toy sizes (tests of the GPU check script run them on the CPU in seconds).
TINY = {"cnn-train": dict(batch=2, channels=(8,) * 16, image=16, pool_every=8),
        "transformer-train": dict(batch=2, seq=16, d_model=32, heads=2, ffn=64, layers=6, vocab=32, classes=4)}


def _batch(base: int, scale: float) -> int:
    return max(1, int(round(base * scale)))


def cnn_train(scale: float = 1.0, seed: int = 0, **overrides) -> Example:
    """An SGD step of a 12-layer CNN; `scale` multiplies the batch (and so the activation memory)."""
    kw = {**CNN, **overrides}
    kw["batch"] = _batch(kw["batch"], scale)
    return cnn_train_step(seed=seed, **kw)


def _encoder_params(rng, seq, d_model, heads, ffn, layers, vocab, classes) -> dict:
    def dense(shape, fan_in):
        return (rng.standard_normal(shape) / math.sqrt(fan_in)).astype("float32")

    p = {"tok_emb": (rng.standard_normal((vocab, d_model)) * 0.02).astype("float32"),
         "pos_emb": (rng.standard_normal((seq, d_model)) * 0.02).astype("float32")}
    for i in range(layers):
        p[f"l{i}_ln1_g"] = np.ones((d_model,), "float32")
        p[f"l{i}_ln1_b"] = np.zeros((d_model,), "float32")
        for w in ("q", "k", "v", "o"):
            p[f"l{i}_w{w}"] = dense((d_model, d_model), d_model)
            p[f"l{i}_b{w}"] = np.zeros((d_model,), "float32")
        p[f"l{i}_ln2_g"] = np.ones((d_model,), "float32")
        p[f"l{i}_ln2_b"] = np.zeros((d_model,), "float32")
        p[f"l{i}_w1"] = dense((d_model, ffn), d_model)
        p[f"l{i}_b1"] = np.zeros((ffn,), "float32")
        p[f"l{i}_w2"] = dense((ffn, d_model), ffn)
        p[f"l{i}_b2"] = np.zeros((d_model,), "float32")
    p["lnf_g"] = np.ones((d_model,), "float32")
    p["lnf_b"] = np.zeros((d_model,), "float32")
    p["head"] = dense((d_model, classes), d_model)
    return p


def _encoder_forward(batch, seq, d_model, heads, ffn, layers, vocab, classes, params):
    """IRModule main(tokens, *params) -> logits (batch, seq, classes)."""
    from tvm import relax

    op = relax.op
    dh = d_model // heads
    bb = relax.BlockBuilder()
    tokens = relax.Var("tokens", relax.TensorType([batch, seq], "int64"))
    pv = {k: relax.Var(k, relax.TensorType(list(v.shape), "float32")) for k, v in params.items()}
    scale = relax.const(1.0 / math.sqrt(dh), "float32")

    def ln(x, g, b):
        return bb.emit(op.nn.layer_norm(x, pv[g], pv[b], axes=[-1]))

    def proj(x, w, b):
        return bb.emit(op.add(op.matmul(x, pv[w]), pv[b]))

    def heads_first(x):                       # (B, S, D) -> (B, H, S, dh)
        return bb.emit(op.permute_dims(op.reshape(x, [batch, seq, heads, dh]), [0, 2, 1, 3]))

    with bb.function("main", [tokens, *pv.values()], attrs={"num_input": 1}):
        with bb.dataflow():
            h = bb.emit(op.add(op.take(pv["tok_emb"], tokens, axis=0), pv["pos_emb"]))
            for i in range(layers):
                x = ln(h, f"l{i}_ln1_g", f"l{i}_ln1_b")
                q = heads_first(proj(x, f"l{i}_wq", f"l{i}_bq"))
                k = heads_first(proj(x, f"l{i}_wk", f"l{i}_bk"))
                v = heads_first(proj(x, f"l{i}_wv", f"l{i}_bv"))
                s = bb.emit(op.multiply(op.matmul(q, op.permute_dims(k, [0, 1, 3, 2])), scale))
                a = bb.emit(op.nn.softmax(s, axis=-1))
                c = bb.emit(op.matmul(a, v))                                   # (B, H, S, dh)
                c = bb.emit(op.reshape(op.permute_dims(c, [0, 2, 1, 3]), [batch, seq, d_model]))
                h = bb.emit(op.add(h, proj(c, f"l{i}_wo", f"l{i}_bo")))
                x = ln(h, f"l{i}_ln2_g", f"l{i}_ln2_b")
                f = bb.emit(op.nn.gelu(proj(x, f"l{i}_w1", f"l{i}_b1")))
                h = bb.emit(op.add(h, proj(f, f"l{i}_w2", f"l{i}_b2")))
            x = ln(h, "lnf_g", "lnf_b")
            out = bb.emit_output(op.matmul(x, pv["head"]))
        bb.emit_func_output(out)
    return bb.get()


def transformer_train(scale: float = 1.0, seed: int = 0, **overrides) -> Example:
    """An SGD step of a transformer encoder with per-token cross-entropy; `scale` multiplies the batch.

    main(tokens, labels, *params) -> (loss, *new_params)."""
    from tvm_swap.training.step import train_step

    kw = {**TRANSFORMER, **overrides}
    kw["batch"] = _batch(kw["batch"], scale)
    rng = np.random.default_rng(seed)
    params = _encoder_params(rng, kw["seq"], kw["d_model"], kw["heads"], kw["ffn"], kw["layers"], kw["vocab"],
                             kw["classes"])
    fwd = _encoder_forward(params=params, **kw)
    step, state = train_step(fwd, params, loss="cross_entropy", optimizer="sgd", lr=0.01)
    tokens = rng.integers(0, kw["vocab"], (kw["batch"], kw["seq"])).astype("int64")
    labels = rng.integers(0, kw["classes"], (kw["batch"], kw["seq"])).astype("int64")
    return Example(step, state, {"tokens": tokens, "labels": labels})


MODELS = {"cnn-train": cnn_train, "transformer-train": transformer_train}
