"""ONNX models through TVM's relax ONNX frontend, weights kept as function parameters.

    mod, params = from_onnx("model.onnx", shapes={"x": (8, 3, 224, 224)})   # main(x, *params)

Operators TVM cannot convert are listed up front (with counts) instead of a deep traceback; graph inputs
with symbolic dims need `shapes`. Weight broadcasts into matmuls are folded (frontends.rewrites).
"""
from __future__ import annotations

import os
from collections import Counter

from ..errors import TvmSwapError, UnsupportedModelError
from .rewrites import fold_weight_broadcasts


def _load(model):
    try:
        import onnx
    except ImportError:
        raise TvmSwapError("importing ONNX needs the onnx package: pip install onnx") from None
    if isinstance(model, onnx.ModelProto):
        return model
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise TvmSwapError(f"ONNX file {path!r} does not exist")
    try:
        return onnx.load(path)
    except Exception as e:  # protobuf DecodeError and friends
        raise TvmSwapError(f"{path!r} is not a readable ONNX model: {type(e).__name__}: {e}") from None


def _unsupported_ops(model) -> Counter:
    try:
        from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map
    except ImportError:  # private API; TVM's own check still runs
        return Counter()
    known = set(_get_convert_map()) | {"Constant", "If"}
    return Counter(n.op_type for n in model.graph.node if n.op_type not in known)


def _graph_inputs(model) -> dict:
    """Real graph inputs (not initializers) -> list of dims (int, or the symbolic name / None)."""
    inits = {i.name for i in model.graph.initializer}
    out = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in i.type.tensor_type.shape.dim]
        out[i.name] = dims
    return out


def _check_shapes(model, shapes):
    inputs = _graph_inputs(model)
    unknown = sorted(set(shapes) - set(inputs))
    if unknown:
        raise TvmSwapError(f"shapes names {unknown}, which are not inputs of the ONNX graph; its inputs: "
                           f"{', '.join(inputs)}")
    for name, dims in inputs.items():
        if name not in shapes and not all(isinstance(d, int) and d > 0 for d in dims):
            raise TvmSwapError(f"ONNX input {name!r} has dims {dims} that are not fixed; give its shape "
                               f"(shapes={{{name!r}: (...)}})")


def from_onnx(model, shapes=None, dtypes=None, opset=None, fix_broadcasts: bool = True):
    """ONNX file path or ModelProto -> (IRModule with main(*inputs, *params), {name: np.ndarray})."""
    model = _load(model)
    shapes = {k: [int(d) for d in v] for k, v in (shapes or {}).items()}
    _check_shapes(model, shapes)        # (a file that is no model, or shapes that do not fit: before TVM, seconds)
    from tvm.relax.frontend import detach_params
    from tvm.relax.frontend.onnx import from_onnx as tvm_from_onnx

    missing = _unsupported_ops(model)
    if missing:
        ops = ", ".join(f"{op} (x{n})" for op, n in sorted(missing.items()))
        raise UnsupportedModelError(f"TVM's ONNX frontend has no converter for {ops}; re-export the model "
                                    "without them (e.g. from PyTorch with tvm_swap.frontends.from_torch)")
    try:
        mod = tvm_from_onnx(model, shape_dict=shapes or None, dtype_dict=dtypes or "float32", opset=opset,
                            keep_params_in_input=True)
    except Exception as e:  # OpNotImplemented, OpAttributeInvalid, ValueError, TVMError
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise UnsupportedModelError(f"TVM's ONNX frontend failed: {type(e).__name__}: {msg}") from None
    mod, detached = detach_params(mod)
    func = mod["main"]
    n_in = int(func.attrs["num_input"]) if func.attrs is not None and "num_input" in func.attrs else len(func.params)
    params = {p.name: v.numpy() for p, v in zip(func.params[n_in:], detached.get("main", []))}
    if fix_broadcasts:
        mod = fold_weight_broadcasts(mod)
    return mod, params
