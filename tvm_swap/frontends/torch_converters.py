"""Converters that replace TVM 0.27's own for aten ops it imports with other semantics than torch's.

Passed to from_exported_program as its custom_convert_map (each takes the fx node and the importer).

- cumsum / cumprod of a bool or integer tensor without a dtype: torch accumulates in int64 (its type
  promotion for integral reductions), TVM keeps the input dtype, so a cumulative sum of bools is a bool
  (saturating at True) and a sum of int32 can wrap. transformers computes one when no attention_mask is
  given (its packed-sequence check: `(position_ids.diff() != 1).cumsum(-1)`), then compares the counts.
  TVM's own `sum` converter already promotes; these do the same.
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


def custom_convert_map() -> dict:
    """{aten overload name: converter(node, importer)} for from_exported_program."""
    return {"cumsum.default": _scan("cumsum"), "cumprod.default": _scan("cumprod")}
