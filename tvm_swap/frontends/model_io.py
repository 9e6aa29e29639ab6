"""Load what a user names as a model (bundled example, Relax module file, or a file an importer reads: the
kinds of frontends.model_kind) into (IRModule, params, example inputs), and from there into a DataflowGraph.

Everything here imports TVM lazily: `tvm-swap plan zoo:...` never needs it.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path


from ..errors import TvmSwapError
from . import from_torch_factory, load_model, model_kind


def example_names() -> list[str]:
    from ..examples import EXAMPLES

    return sorted(EXAMPLES)


def is_model_spec(spec: str) -> bool:
    return spec.lower().endswith(".py") or model_kind(spec) is not None or spec in _safe_example_names()


def _import_py_module(path: Path):
    """TVMScript needs a real module in sys.modules (see notes): import it properly."""
    name = f"tvm_swap_user_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TvmSwapError(f"cannot import {str(path)!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_model_for_build(spec: str, shapes: dict | None = None, params: str | None = None):
    """-> (IRModule, params: dict[str, np.ndarray] | None, example_inputs: dict[str, np.ndarray] | None)"""
    shapes = shapes or {}
    low = spec.lower()
    if spec in _safe_example_names():
        from ..examples import EXAMPLES

        return EXAMPLES[spec]()
    path = Path(spec)
    kind = model_kind(spec)
    if kind in ("mxnet", "onnx"):
        from .example_inputs import example_inputs

        mod, prm = load_model(spec, shapes=shapes, params=params)
        return mod, prm, example_inputs(mod)      # token ids where an input indexes an embedding
    if low.endswith(".py"):
        if not path.exists():
            raise TvmSwapError(f"model file {spec!r} does not exist")
        module = _import_py_module(path)
        if not hasattr(module, "mod"):
            raise TvmSwapError(f"{spec!r} must define `mod` (a Relax IRModule) and may define `params` and `inputs`")
        return module.mod, getattr(module, "params", None), getattr(module, "inputs", None)
    if kind == "torch":
        return from_torch_factory(spec)
    raise TvmSwapError(
        f"cannot load model {spec!r}: expected one of the bundled examples ({', '.join(_safe_example_names())}), "
        f"a Relax module file (.py defining `mod`), an MXNet NAME-symbol.json, an .onnx file, or module:factory"
    )


def refuse_before_import(spec: str, shapes: dict | None = None, params: str | None = None,
                         init: str | None = None, mem_limit=None) -> None:
    """The refusals an MXNet symbol proves before its importer imports TVM (seconds; frontends.mxnet_early):
    the symbol's own errors that come first there (a `--shape` for an input it lacks, operators the importer
    lacks), a `--shape` of the wrong rank for the convolution it feeds and, without params: a shape a converter
    refuses where the symbol's shapes prove it is the import's first error (mxnet_early.first_import_error,
    e.g. an RNN fed data that is not 3-d), with no `init` a function that would read parameters without a
    value (the message model_checks.check_params gives after importing), and a byte `mem_limit` (give it only
    for the forward function, not a training step) below one of the function's tensors
    (model_checks.check_limit_before_lowering's message). ONNX files: onnx_import.refuse_before_import.
    Anything not proven here is left to the importer."""
    if model_kind(spec) == "onnx":
        from .onnx_import import refuse_before_import as onnx_refusals

        return onnx_refusals(spec, shapes)      # (a missing file, no model, missing weight files, shapes)
    if model_kind(spec) != "mxnet" or not Path(spec).is_file():
        return
    from . import find_mxnet_params
    from .mxnet import _check_shapes, check_supported
    from .mxnet_early import first_import_error, input_rank_error, largest_tensor, surely_missing_params
    from .mxnet_graph import parse_symbol

    graph = parse_symbol(spec)
    shapes = _check_shapes(shapes, graph)
    check_supported(graph)
    err = input_rank_error(graph, shapes)
    if err is not None:
        raise err
    if params is not None or find_mxnet_params(spec) is not None:
        return
    err = first_import_error(graph, shapes)       # (with params, their shapes may refuse it earlier)
    if err is not None:
        raise err
    from ..limits.mem_limit import MemLimit
    from ..limits.model_checks import MissingParamsError, refuse_below_tensor

    limit = MemLimit.of(mem_limit)
    if limit is not None and limit.absolute is not None:      # (checked first after importing too)
        largest = largest_tensor(graph, shapes)
        if largest is not None:
            refuse_below_tensor(limit, *largest)
    if init is not None:
        return
    missing = surely_missing_params(graph, shapes)
    if missing:
        raise MissingParamsError(missing, len(missing), cli=True, model=spec)


def _safe_example_names() -> list[str]:
    try:
        return example_names()
    except ImportError:
        return []


def graph_of_model(spec: str, shapes=None, params=None, target: str = "llvm", fuse_max_depth=None):
    """Import, lower and extract: the DataflowGraph `tvm-swap plan` works on for a model file."""
    from relay_passes.lower import lower

    from ..graph import from_relax

    from ..pipeline import fold_frozen_layouts

    mod, _, _ = load_model_for_build(spec, shapes=shapes, params=params)
    mod, _ = fold_frozen_layouts(mod)         # as tvm_swap.build compiles it: frozen weights in compute layout
    lowered = lower(mod, target=target, fuse_max_depth=fuse_max_depth)
    return from_relax(lowered, name=Path(spec).name)
