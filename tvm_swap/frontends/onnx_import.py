"""ONNX models through TVM's relax ONNX frontend, weights kept as function parameters.

    mod, params = from_onnx("model.onnx", shapes={"x": (8, 3, 224, 224)})   # main(x, *params)

Operators TVM cannot convert are listed up front (with counts) instead of a deep traceback; graph inputs
with symbolic dims need `shapes`. Weight broadcasts into matmuls are folded (frontends.rewrites).
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import os
import sys
from collections import Counter

from ..errors import TvmSwapError, UnsupportedModelError
from .rewrites import fold_weight_broadcasts


def _read(model):
    """(ModelProto without its external data loaded, the file's path or None for a ModelProto given)."""
    try:
        import onnx
    except ImportError:
        raise TvmSwapError("importing ONNX needs the onnx package: pip install onnx") from None
    if isinstance(model, onnx.ModelProto):
        return model, None
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise _not_found(path)
    try:
        proto = onnx.load(path, load_external_data=False)
    except Exception as e:  # protobuf DecodeError and friends
        raise _unreadable(path, e) from None
    missing = _missing_external_data(proto, path)
    if missing is not None:
        raise missing
    return proto, path


def _load_external_data(proto, path) -> None:
    if path is None:
        return
    try:
        from onnx.external_data_helper import load_external_data_for_model

        load_external_data_for_model(proto, os.path.dirname(path))
    except Exception as e:  # a data file that is short, a location onnx refuses, ...
        raise _unreadable(path, e) from None


def _not_found(path: str) -> TvmSwapError:
    return TvmSwapError(f"ONNX file {path!r} does not exist")


def _unreadable(path: str, e: Exception) -> TvmSwapError:
    return TvmSwapError(f"{path!r} is not a readable ONNX model: {type(e).__name__}: {e}")


_EXTERNAL = 1          # TensorProto.EXTERNAL: the tensor's bytes are in a file beside the model


def _tensors(graph):
    """Every tensor a graph stores (initializers, and attribute tensors, subgraphs included)."""
    yield from graph.initializer
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("g"):
                yield from _tensors(a.g)
            for g in a.graphs:
                yield from _tensors(g)


def _missing_external_data(model, path: str) -> TvmSwapError | None:
    """The tensors whose data lives in files beside the model that are not there, all named at once (onnx
    names only the first); None when every such file is there, or a location is one onnx words itself."""
    base = os.path.dirname(path)
    tensors = list(_tensors(model.graph))
    missing: dict[str, str] = {}
    for t in tensors:
        if t.data_location != _EXTERNAL:
            continue
        loc = next((e.value for e in t.external_data if e.key == "location"), "")
        if not loc or os.path.isabs(loc) or ".." in loc.replace("\\", "/").split("/"):
            return None
        if not os.path.isfile(os.path.join(base, loc)):
            missing[t.name] = loc
    if not missing:
        return None
    names = list(missing)
    first = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
    files = ", ".join(sorted(set(missing.values())))
    return TvmSwapError(f"{path!r} keeps the data of {len(names)} of its {len(tensors)} weights in files that are "
                        f"not beside it ({files}; first: {first}): copy them next to the model, or export it "
                        f"with its weights inside")


@functools.lru_cache(maxsize=1)
def _model_proto_class():
    """onnx.ModelProto's class from the onnx package's generated onnx_ml_pb2 alone (protobuf only: 25 ms, where
    importing onnx takes 0.7 s, most of it ml_dtypes); None without the onnx package."""
    if sys.modules.get("onnx") is not None:
        return sys.modules["onnx"].ModelProto
    try:
        spec = importlib.util.find_spec("onnx")
        pb2 = os.path.join(os.path.dirname(spec.origin), "onnx_ml_pb2.py") if spec and spec.origin else None
        if pb2 is None or not os.path.isfile(pb2):
            return None
        mspec = importlib.util.spec_from_file_location("_tvm_swap_onnx_ml_pb2", pb2)
        module = importlib.util.module_from_spec(mspec)
        mspec.loader.exec_module(module)
        return module.ModelProto
    except Exception:  # noqa: BLE001 - only an early check: the importer loads the file as before
        return None


def refuse_before_import(path, shapes=None) -> None:
    """from_onnx's refusals of a file that come before TVM converts it, raised without importing TVM or the onnx
    package: a file that does not exist, is no ONNX model, lacks the files that hold its weights, does not have
    the inputs `shapes` names (or leaves a dim open), or has operators TVM's importer does not convert (from
    the stored list, when it was written for the TVM installed); the same messages, in the same order, word for
    word (model_io calls this for the command line)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise _not_found(path)
    proto = _model_proto_class()
    if proto is None:
        return
    from google.protobuf.message import DecodeError

    with open(path, "rb") as f:
        data = f.read()
    model = proto()
    try:
        decoded = model.ParseFromString(data)      # (as onnx.serialization's protobuf reader does)
        if decoded is not None and decoded != len(data):
            raise DecodeError(f"Protobuf decoding consumed too few bytes: {decoded} out of {len(data)}")
    except DecodeError as e:
        raise _unreadable(path, e) from None
    missing = _missing_external_data(model, path)
    if missing is not None:
        raise missing
    _check_shapes(model, {k: [int(d) for d in v] for k, v in (shapes or {}).items()})
    from .onnx_ops import stored_converted_ops

    _refuse_unsupported(model, stored_converted_ops())


# op types from_onnx handles without a converter of TVM's map
HANDLED_APART = frozenset({"Constant", "If"})


def _refuse_unsupported(model, converted) -> None:
    """Every operator of the graph TVM's importer does not convert, named at once with counts; `converted`: the
    op types its convert map has (None: not known, TVM's own check runs)."""
    if converted is None:
        return
    known = set(converted) | HANDLED_APART
    missing = Counter(n.op_type for n in model.graph.node if n.op_type not in known)
    if missing:
        ops = ", ".join(f"{op} (x{n})" for op, n in sorted(missing.items()))
        raise UnsupportedModelError(f"TVM's ONNX frontend has no converter for {ops}; re-export the model "
                                    "without them (e.g. from PyTorch with tvm_swap.frontends.from_torch)")


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



@contextlib.contextmanager
def _operator_being_converted():
    """A list holding the ONNX operator TVM's importer is converting (its last), so a failure can name it;
    TVM's own print of the failing node's inputs (pages of IR) is kept off stdout meanwhile."""
    from tvm.relax.frontend.onnx import onnx_frontend

    cls = onnx_frontend.ONNXGraphImporter
    real, current = cls._convert_operator, []

    def recording(self, op_name, *args, **kwargs):
        current[:] = [op_name]
        return real(self, op_name, *args, **kwargs)

    cls._convert_operator = recording
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield current
    finally:
        cls._convert_operator = real

def from_onnx(model, shapes=None, dtypes=None, opset=None, fix_broadcasts: bool = True):
    """ONNX file path or ModelProto -> (IRModule with main(*inputs, *params), {name: np.ndarray})."""
    model, path = _read(model)
    shapes = {k: [int(d) for d in v] for k, v in (shapes or {}).items()}
    _check_shapes(model, shapes)        # (a file that is no model, or shapes that do not fit: before TVM, seconds)
    from .onnx_ops import live_converted_ops

    # refuse_before_import's checks, in its order: the operators before the weights' data is read
    _refuse_unsupported(model, live_converted_ops())
    _load_external_data(model, path)
    from tvm.relax.frontend import detach_params
    from tvm.relax.frontend.onnx import from_onnx as tvm_from_onnx

    with _operator_being_converted() as current:
        try:
            mod = tvm_from_onnx(model, shape_dict=shapes or None, dtype_dict=dtypes or "float32", opset=opset,
                                keep_params_in_input=True)
        except Exception as e:  # OpNotImplemented, OpAttributeInvalid, ValueError, TVMError
            msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
            where = f" on ONNX operator {current[0]!r}" if current else ""
            raise UnsupportedModelError(
                f"TVM's ONNX frontend failed{where}: {type(e).__name__}: {msg}; for a PyTorch model, import the "
                f"module itself (tvm_swap.frontends.from_torch), or export it with another opset or exporter "
                f"(torch.onnx.export(..., dynamo=True))") from None
    mod, detached = detach_params(mod)
    func = mod["main"]
    n_in = int(func.attrs["num_input"]) if func.attrs is not None and "num_input" in func.attrs else len(func.params)
    params = {p.name: v.numpy() for p, v in zip(func.params[n_in:], detached.get("main", []))}
    if fix_broadcasts:
        mod = fold_weight_broadcasts(mod)
    return mod, params
