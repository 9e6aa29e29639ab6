"""PyTorch models through torch.export and TVM's from_exported_program, params kept as inputs.

    mod, params = from_torch(model, (x,))                  # main(x, *params); params: name -> np.ndarray
    mod, params, inputs = from_torch_factory("pkg.mod:make")   # factory() -> (model, example_inputs)

The module is exported in eval mode (dropout off; train_step later turns BatchNorm into batch statistics)
and put back in the mode it was in. After import, tied weights are de-duplicated by torch tensor identity
and weight broadcasts into matmuls are folded (tvm_swap.frontends.rewrites).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np

from ..errors import TvmSwapError, UnsupportedModelError
from .rewrites import dedupe_params, fold_weight_broadcasts


def _torch():
    try:
        import torch
    except ImportError:
        raise TvmSwapError("importing a PyTorch model needs torch: pip install 'tvm_swap[torch]' "
                           "(or torch==2.13.0 for CPU)") from None
    return torch


def _as_tuple(example_inputs):
    torch = _torch()
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if isinstance(example_inputs, (list, tuple)):
        bad = [type(x).__name__ for x in example_inputs if not isinstance(x, torch.Tensor)]
        if bad:
            raise TvmSwapError(f"example_inputs must be torch tensors, got {bad}")
        return tuple(example_inputs)
    raise TvmSwapError(f"example_inputs must be a tensor or a tuple of tensors, got {type(example_inputs).__name__}")


def _export(module, args):
    torch = _torch()
    was_training = module.training
    module.eval()
    try:
        return torch.export.export(module, args)
    except Exception as e:  # torch raises many types (UserError, GuardOnDataDependentSymNode, ...)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise UnsupportedModelError(f"torch.export could not trace {type(module).__name__}: {type(e).__name__}: "
                                    f"{first}; make the forward traceable (no data-dependent control flow; "
                                    "for nn.Transformer pass tgt_is_causal=True)") from None
    finally:
        module.train(was_training)


def _unsupported_aten(ep) -> list[str]:
    """aten targets the TVM converter has no entry for (what its own assert would list)."""
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

    from .torch_converters import custom_convert_map

    try:
        known = {**ExportedProgramImporter().create_convert_map(), **custom_convert_map()}
    except Exception:  # private API: if it changes, fall back to TVM's own message
        return []
    return sorted({n.target.__name__ for n in ep.graph.nodes
                   if n.op == "call_function" and n.target.__name__ not in known})


def _translate(ep, run_ep_decomposition: bool):
    """ExportedProgram -> Relax. The decomposition is torch's default table run here, minus the ops
    tvm_swap.frontends.torch_converters converts whole (TVM's importer would run the full table)."""
    from tvm.relax.frontend.torch import from_exported_program

    from .torch_converters import custom_convert_map, decompositions

    if run_ep_decomposition:
        try:
            ep = ep.run_decompositions(decompositions())
        except Exception as e:  # torch raises many types from its decompositions
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise UnsupportedModelError(f"torch's decomposition of the exported model failed: {type(e).__name__}: "
                                        f"{first}; try from_torch(..., run_ep_decomposition=False)") from None
    try:
        return from_exported_program(ep, keep_params_as_input=True, unwrap_unit_return_tuple=True,
                                     run_ep_decomposition=False, custom_convert_map=custom_convert_map())
    except Exception as e:  # AssertionError / NotImplementedError / ValueError from the converters
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "Unsupported function types" in msg or isinstance(e, AssertionError):
            ops = _unsupported_aten(ep)
            if ops:
                raise UnsupportedModelError(
                    f"TVM's PyTorch frontend has no converter for {', '.join(ops)}; rewrite that part of the "
                    "model with supported ops, or export it to ONNX and use from_onnx") from None
        hint = ""
        if "Concat expects all input tensors to have same ndim" in msg:   # torch.cat with an empty KV cache
            hint = "; for a transformers model call it with use_cache=False (its empty KV cache is concatenated)"
        raise UnsupportedModelError(f"TVM's PyTorch frontend failed: {type(e).__name__}: {msg}{hint}") from None


def _tied_groups(ep) -> list[list[str]]:
    """Relax parameter names (input spec arg names) that refer to the same torch tensor."""
    torch = _torch()
    kinds = torch.export.graph_signature.InputKind
    buffers = dict(ep.named_buffers())
    groups: dict = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind is kinds.PARAMETER:
            t = ep.state_dict.get(spec.target)
        elif spec.kind is kinds.BUFFER:
            t = buffers.get(spec.target)
        else:
            continue
        if t is None:
            continue
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        groups.setdefault(key, []).append(spec.arg.name)
    return [g for g in groups.values() if len(g) > 1]


def _warn_padding_idx(module) -> None:
    """torch zeroes the gradient of an Embedding's padding_idx row; the exported graph has a plain take."""
    torch = _torch()
    rows = [f"{name} (padding_idx={m.padding_idx})" for name, m in module.named_modules()
            if isinstance(m, torch.nn.Embedding) and m.padding_idx is not None]
    if rows:
        warnings.warn(f"{', '.join(rows)}: a training step will update the padding row, which torch keeps "
                      "fixed; keep padding tokens out of the loss (labels -100) or set padding_idx=None",
                      stacklevel=3)


def from_torch(module, example_inputs, run_ep_decomposition: bool = True, fix_broadcasts: bool = True,
               dedupe_tied: bool = True):
    """torch.nn.Module + example inputs -> (IRModule with main(*inputs, *params), {name: np.ndarray})."""
    torch = _torch()
    from tvm.relax.frontend import detach_params

    if not isinstance(module, torch.nn.Module):
        raise TvmSwapError(f"from_torch needs a torch.nn.Module, got {type(module).__name__}")
    _warn_padding_idx(module)
    ep = _export(module, _as_tuple(example_inputs))
    mod = _translate(ep, run_ep_decomposition)
    mod, detached = detach_params(mod)
    func = mod["main"]
    n_in = int(func.attrs["num_input"])
    values = detached.get("main", [])
    params = {p.name: v.numpy() for p, v in zip(func.params[n_in:], values)}
    if dedupe_tied:
        mod, params = dedupe_params(mod, _tied_groups(ep), params)
    if fix_broadcasts:
        mod = fold_weight_broadcasts(mod)
    return mod, params


def _load_factory(spec: str):
    """`pkg.module:factory` or `path/to/file.py:factory` -> the factory callable."""
    mod_name, sep, fn_name = spec.rpartition(":")
    if not sep or not mod_name or not fn_name.isidentifier():
        raise TvmSwapError(f"{spec!r} is not a module:factory spec (e.g. mypkg.models:make_model)")
    if mod_name.endswith(".py") or "/" in mod_name:
        path = Path(mod_name)
        if not path.is_file():
            raise TvmSwapError(f"model file {mod_name!r} (from {spec!r}) does not exist")
        name = f"tvm_swap_user_{path.stem}"
        loader_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        loader_spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(mod_name)
        except ImportError as e:
            raise TvmSwapError(f"cannot import {mod_name!r} (from {spec!r}): {e}; is it on PYTHONPATH?") from None
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        raise TvmSwapError(f"{mod_name!r} has no callable {fn_name!r}")
    return fn


def from_torch_factory(spec: str):
    """Import `module:factory`, call factory() -> (nn.Module, example_inputs) or an nn.Module with an
    `example_inputs` attribute; -> (IRModule, params, {input name: np.ndarray})."""
    torch = _torch()
    made = _load_factory(spec)()
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        model, example = made
    elif isinstance(made, torch.nn.Module) and hasattr(made, "example_inputs"):
        model, example = made, made.example_inputs
    else:
        raise TvmSwapError(f"{spec!r} must return (torch.nn.Module, example_inputs) or an nn.Module with an "
                           f"`example_inputs` attribute; got {type(made).__name__}")
    example = _as_tuple(example)
    mod, params = from_torch(model, example)
    func = mod["main"]
    n_in = int(func.attrs["num_input"])
    inputs = {p.name: np.ascontiguousarray(x.detach().cpu().numpy()) for p, x in zip(func.params[:n_in], example)}
    return mod, params, inputs
