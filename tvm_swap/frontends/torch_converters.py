"""Converters that replace TVM 0.27's own for aten ops it imports with other semantics than torch's.

Passed to from_exported_program as its custom_convert_map (each takes the fx node and the importer).

- cumsum / cumprod of a bool or integer tensor without a dtype: torch accumulates in int64 (its type
  promotion for integral reductions), TVM keeps the input dtype, so a cumulative sum of bools is a bool
  (saturating at True) and a sum of int32 can wrap. transformers computes one when no attention_mask is
  given (its packed-sequence check: `(position_ids.diff() != 1).cumsum(-1)`), then compares the counts.
  TVM's own `sum` converter already promotes; these do the same.
- select.int with a negative index (`x[:, -1]`, a sequence model's last step): TVM emits take(x, -1), which
  reads before the tensor (garbage values, and a heap corrupted by the kernels after it); the index is
  wrapped by the dimension's size here, as torch does.
- scaled_dot_product_attention: torch's own decomposition of it fails inside `run_decompositions` for
  transformers' GPT-2 (its default "sdpa" attention: `Cannot view a tensor with shape [2, 16, 32] and strides
  (32, 64, 1)`), and TVM's converter (relax.nn.attention) has no gradient and takes float masks only. So
  `decompositions()` keeps the op whole and it is written here as torch's math reference does it:
  softmax(q k^T * scale + mask) v, with bool masks (True = attend), is_causal and grouped-query heads
  (enable_gqa), from plain ops that have gradients.
"""
from __future__ import annotations


def _integral(dtype: str) -> bool:
    return dtype == "bool" or dtype.startswith(("int", "uint"))


def _scan(op_name: str):
    def convert(node, importer):
        from tvm import relax

        x = importer.env[node.args[0]]
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        dtype = node.kwargs.get("dtype")
        if dtype is not None:
            dtype = importer._convert_data_type(str(dtype), importer.env)
        elif _integral(str(x.ty.dtype.dtype)):
            dtype = "int64"
        op = getattr(relax.op, op_name)
        return importer.block_builder.emit(op(x, dim, dtype))
    return convert


def _select(node, importer):
    from tvm import relax

    x = importer.env[node.args[0]]
    dim, index = int(node.args[1]), int(node.args[2])
    size = int(x.ty.shape.values[dim])
    if not -size <= index < size:
        raise IndexError(f"select index {index} is out of range for dimension {dim} of size {size}")
    return importer.block_builder.emit(relax.op.take(x, relax.const(index % size, "int64"), dim))


def _attention(node, importer):
    """aten.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *,
    scale=None, enable_gqa=False) from matmul / softmax (torch's _scaled_dot_product_attention_math)."""
    import math

    import numpy as np
    from tvm import relax

    op, emit = relax.op, importer.block_builder.emit
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
    args = dict(zip(names, node.args))
    args.update(node.kwargs)
    q, k, v = (importer.env[args[n]] for n in names[:3])
    mask = args.get("attn_mask")
    if float(args.get("dropout_p") or 0.0) != 0.0:
        raise ValueError("scaled_dot_product_attention with dropout_p > 0; export the model in eval mode")
    qs, ks = [int(d) for d in q.ty.shape.values], [int(d) for d in k.ty.shape.values]
    dt = str(q.ty.dtype.dtype)
    if args.get("enable_gqa") and len(qs) >= 3 and qs[-3] != ks[-3]:      # each KV head serves qs/ks heads
        reps = qs[-3] // ks[-3]
        k, v = (emit(op.repeat(t, reps, axis=len(qs) - 3)) for t in (k, v))
    scale = args.get("scale")
    scale = 1.0 / math.sqrt(qs[-1]) if scale is None else float(scale)
    kt = emit(op.permute_dims(k, [*range(len(ks) - 2), len(ks) - 1, len(ks) - 2]))
    scores = emit(op.multiply(op.matmul(q, kt), relax.const(scale, dt)))
    neg = relax.const(float("-inf"), dt)
    if args.get("is_causal"):
        keep = np.tril(np.ones((qs[-2], ks[-2]), dtype=bool))
        scores = emit(op.where(relax.const(keep), scores, neg))
    if mask is not None:
        m = importer.env[mask]
        if str(m.ty.dtype.dtype) == "bool":
            scores = emit(op.where(m, scores, neg))
        else:
            scores = emit(op.add(scores, m))
    probs = emit(op.nn.softmax(scores, axis=-1))
    return emit(op.matmul(probs, v))


ATTENTION = "scaled_dot_product_attention.default"


def custom_convert_map() -> dict:
    """{aten overload name: converter(node, importer)} for from_exported_program."""
    return {"cumsum.default": _scan("cumsum"), "cumprod.default": _scan("cumprod"), "select.int": _select,
            ATTENTION: _attention}


def decompositions():
    """torch.export's default decomposition table without scaled_dot_product_attention (converted above)."""
    import torch

    table = torch.export.default_decompositions()
    table.pop(torch.ops.aten.scaled_dot_product_attention.default, None)
    return table
