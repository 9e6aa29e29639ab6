"""Model importers: each returns (tvm.IRModule, {param_name: np.ndarray}) with `main(inputs..., *params)`.

    from tvm_swap.frontends import load_model, from_mxnet
    mod, params = load_model("resnet18_v1-symbol.json", shapes={"data": (1, 3, 224, 224)})

`model_kind` is the one place that tells the importer from the path: an MXNet `-symbol.json` (its
`PREFIX-0000.params` is found beside it), an `.onnx` file, or a PyTorch `module:factory` spec; `load_model`
and the command line's model loading (model_io.py) both dispatch on it. sources.py turns what a user names
on the command line (zoo, graph JSON, model) into a DataflowGraph.
"""
from __future__ import annotations

import glob
import importlib
import json
import os

from ..errors import TvmSwapError

__all__ = ["from_mxnet", "from_onnx", "from_torch", "from_torch_factory", "load_model", "find_mxnet_params",
           "model_kind"]

# The ONNX and PyTorch importers, loaded on first use (they need onnx / torch installed).
_ONNX_MODULE = "tvm_swap.frontends.onnx_import"
_TORCH_MODULE = "tvm_swap.frontends.torch_import"


def from_mxnet(symbol, params=None, shapes=None, dtype="float32"):
    """MXNet symbol JSON (+ .params) -> (IRModule, params); see tvm_swap.frontends.mxnet.from_mxnet."""
    from .mxnet import from_mxnet as impl

    return impl(symbol, params=params, shapes=shapes, dtype=dtype)


def _importer(module: str, func: str):
    return getattr(importlib.import_module(module), func)


def from_onnx(model, shapes=None, **kw):
    """ONNX file or ModelProto -> (IRModule, params). Implemented in tvm_swap.frontends.onnx_import."""
    return _importer(_ONNX_MODULE, "from_onnx")(model, shapes, **kw)


def from_torch(module, example_inputs, **kw):
    """torch.nn.Module + example inputs -> (IRModule, params). Implemented in tvm_swap.frontends.torch_import."""
    return _importer(_TORCH_MODULE, "from_torch")(module, example_inputs, **kw)


def from_torch_factory(spec: str):
    """`pkg.module:factory` (or `file.py:factory`) -> (IRModule, params, example inputs by name).
    Implemented in tvm_swap.frontends.torch_import."""
    return _importer(_TORCH_MODULE, "from_torch_factory")(spec)


def find_mxnet_params(symbol_path: str) -> str | None:
    """`PREFIX-0000.params` beside `PREFIX-symbol.json`; else the only `PREFIX-NNNN.params` there; else None."""
    base = os.fspath(symbol_path)
    prefix = base[: -len("-symbol.json")] if base.endswith("-symbol.json") else os.path.splitext(base)[0]
    first = prefix + "-0000.params"
    if os.path.isfile(first):
        return first
    epochs = sorted(glob.glob(glob.escape(prefix) + "-[0-9][0-9][0-9][0-9].params"))
    return epochs[0] if len(epochs) == 1 else None


def _is_mxnet_json(path: str) -> bool:
    if path.endswith("-symbol.json"):
        return True
    if not path.endswith(".json"):
        return False
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(d, dict) and "nodes" in d and "heads" in d


def _is_torch_spec(spec: str) -> bool:
    """`package.module:factory` or `path/to/file.py:factory` (not `zoo:NAME`)."""
    if ":" not in spec or spec.startswith("zoo:") or os.path.exists(spec):
        return False
    mod, _, fn = spec.rpartition(":")
    return bool(mod) and fn.isidentifier()


def model_kind(spec) -> str | None:
    """Which importer reads `spec`: "mxnet", "onnx", "torch", or None when none of them does."""
    s = os.fspath(spec)
    if s.lower().endswith("-symbol.json") or (os.path.isfile(s) and _is_mxnet_json(s)):
        return "mxnet"
    if s.lower().endswith(".onnx"):
        return "onnx"
    if _is_torch_spec(s):
        return "torch"
    return None


def load_model(path, shapes=None, params=None, **kw):
    """Import a model file by its kind; returns (IRModule, params).

    path: `NAME-symbol.json` (MXNet; `params` defaults to `NAME-0000.params` beside it, or graph only
          when there is none), `NAME.onnx`, or a PyTorch `module:factory` spec.
    shapes: {input_name: shape} for the data inputs.
    """
    if isinstance(path, dict):
        return from_mxnet(path, params=params, shapes=shapes, **kw)
    spec = os.fspath(path)
    kind = model_kind(spec)
    if kind == "mxnet":
        if not os.path.isfile(spec):
            raise TvmSwapError(f"MXNet symbol file {spec!r} does not exist")
        if params is None:
            params = find_mxnet_params(spec)
        return from_mxnet(spec, params=params, shapes=shapes, **kw)
    if kind == "onnx":
        if not os.path.isfile(spec):
            raise TvmSwapError(f"ONNX file {spec!r} does not exist")
        return from_onnx(spec, shapes, **kw)
    if kind == "torch":
        mod, prm, _ = from_torch_factory(spec)
        return mod, prm
    if not os.path.exists(spec):
        raise TvmSwapError(f"model file {spec!r} does not exist")
    raise TvmSwapError(f"cannot tell what kind of model {spec!r} is: expected an MXNet NAME-symbol.json, "
                       "an .onnx file, or a PyTorch module:factory spec")
