"""Model importers: each returns (tvm.IRModule, {param_name: np.ndarray}) with `main(inputs..., *params)`.

    from tvm_swap.frontends import load_model, from_mxnet
    mod, params = load_model("resnet18_v1-symbol.json", shapes={"data": (1, 3, 224, 224)})

`load_model` picks the importer from the path: an MXNet `-symbol.json` (its `PREFIX-0000.params` is found
beside it), an `.onnx` file, or a PyTorch `module:factory` spec.
"""
from __future__ import annotations

import glob
import importlib
import importlib.util
import json
import os

from ..errors import TvmSwapError

__all__ = ["from_mxnet", "from_onnx", "from_torch", "from_torch_factory", "load_model", "find_mxnet_params"]

# Where the ONNX and PyTorch importers live once written; the hooks below load them on first use.
_ONNX_MODULE = "tvm_swap.frontends.onnx_import"
_TORCH_MODULE = "tvm_swap.frontends.torch_import"


def from_mxnet(symbol, params=None, shapes=None, dtype="float32"):
    """MXNet symbol JSON (+ .params) -> (IRModule, params); see tvm_swap.frontends.mxnet.from_mxnet."""
    from .mxnet import from_mxnet as impl

    return impl(symbol, params=params, shapes=shapes, dtype=dtype)


def _hook(module: str, func: str, what: str):
    if importlib.util.find_spec(module) is None:
        raise TvmSwapError(f"{what} import is not yet supported by tvm_swap ({module}.{func} is not written); "
                           "export the model to MXNet symbol JSON, or build a Relax IRModule yourself")
    return getattr(importlib.import_module(module), func)


def from_onnx(model, shapes=None, **kw):
    """ONNX file or ModelProto -> (IRModule, params). Implemented in tvm_swap.frontends.onnx_import."""
    return _hook(_ONNX_MODULE, "from_onnx", "ONNX")(model, shapes, **kw)


def from_torch(module, example_inputs, **kw):
    """torch.nn.Module + example inputs -> (IRModule, params). Implemented in tvm_swap.frontends.torch_import."""
    return _hook(_TORCH_MODULE, "from_torch", "PyTorch")(module, example_inputs, **kw)


def from_torch_factory(spec: str):
    """`pkg.module:factory` (or `file.py:factory`) -> (IRModule, params, example inputs by name).
    Implemented in tvm_swap.frontends.torch_import."""
    return _hook(_TORCH_MODULE, "from_torch_factory", "PyTorch")(spec)


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
    """`package.module:factory` or `path/to/file.py:factory`."""
    if ":" not in spec or os.path.exists(spec):
        return False
    mod, _, fn = spec.rpartition(":")
    return bool(mod) and fn.isidentifier()


def load_model(path, shapes=None, params=None, **kw):
    """Import a model file by its kind; returns (IRModule, params).

    path: `NAME-symbol.json` (MXNet; `params` defaults to `NAME-0000.params` beside it, or graph only
          when there is none), `NAME.onnx`, or a PyTorch `module:factory` spec.
    shapes: {input_name: shape} for the data inputs.
    """
    if isinstance(path, dict):
        return from_mxnet(path, params=params, shapes=shapes, **kw)
    spec = os.fspath(path)
    if os.path.isfile(spec) and _is_mxnet_json(spec):
        if params is None:
            params = find_mxnet_params(spec)
        return from_mxnet(spec, params=params, shapes=shapes, **kw)
    if spec.endswith(".onnx"):
        if not os.path.isfile(spec):
            raise TvmSwapError(f"ONNX file {spec!r} does not exist")
        return from_onnx(spec, shapes, **kw)
    if _is_torch_spec(spec):
        mod, prm, _ = from_torch_factory(spec)
        return mod, prm
    if not os.path.exists(spec):
        raise TvmSwapError(f"model file {spec!r} does not exist")
    raise TvmSwapError(f"cannot tell what kind of model {spec!r} is: expected an MXNet NAME-symbol.json, "
                       "an .onnx file, or a PyTorch module:factory spec")
