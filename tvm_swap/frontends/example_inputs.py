"""Deterministic example inputs for an imported model, stored beside a compiled library so `tvm-swap run`
works without any: uniform values in [-1, 1) for data, and valid token ids in [0, vocab) for inputs that
index an embedding table (MXNet feeds token ids as float32; uniform floats there would all clip to token 0).
"""
from __future__ import annotations

import numpy as np

# ops that pass indices through unchanged in meaning (casts, reshapes) between an input and a `take`
_PASS_THROUGH = ("relax.astype", "relax.reshape", "relax.clip", "relax.floor", "relax.round", "relax.squeeze",
                 "relax.expand_dims", "relax.permute_dims", "relax.flatten")


def token_vocab(mod, func_name: str = "main") -> dict[str, int]:
    """{input name: table rows} for each input of func_name that is (a cast or reshape of) the indices of a
    relax `take` along axis 0: the smallest table it indexes."""
    import tvm
    from tvm import relax

    func = mod[func_name]
    k = int(func.attrs["num_input"]) if func.attrs is not None and "num_input" in func.attrs else len(func.params)
    inputs = {p: p.name for p in func.params[:k]}
    origin: dict = dict(inputs)          # var -> the input it passes through from
    vocab: dict[str, int] = {}

    def root(expr):
        return origin.get(expr) if isinstance(expr, relax.Var) else None

    def visit(binding):
        if not isinstance(binding, relax.VarBinding) or not isinstance(binding.value, relax.Call):
            return
        call = binding.value
        if not isinstance(call.op, tvm.ir.Op) or not call.args:
            return
        name = call.op.name
        if name in _PASS_THROUGH and root(call.args[0]) is not None:
            origin[binding.var] = root(call.args[0])
        elif name == "relax.take" and len(call.args) >= 2 and root(call.args[1]) is not None:
            axis = call.attrs.axis if call.attrs is not None and call.attrs.axis is not None else 0
            shape = call.args[0].ty.shape
            if int(axis) == 0 and shape is not None and isinstance(shape.values[0], tvm.tirx.IntImm):
                rows = int(shape.values[0])
                key = root(call.args[1])
                vocab[key] = min(rows, vocab.get(key, rows))

    for block in func.body.blocks:
        for b in block.bindings:
            visit(b)
    return vocab


def example_inputs(mod, seed: int = 0, func_name: str = "main") -> dict[str, np.ndarray]:
    """{name: array} for every input of func_name (its first `num_input` parameters), by their static types."""
    func = mod[func_name]
    k = int(func.attrs["num_input"]) if func.attrs is not None and "num_input" in func.attrs else len(func.params)
    try:
        vocab = token_vocab(mod, func_name)
    except Exception:  # noqa: BLE001  (a module this reader does not follow: plain data for every input)
        vocab = {}
    rng = np.random.default_rng(seed)
    out = {}
    for p in func.params[:k]:
        ty = p.ty
        if not hasattr(ty, "shape") or ty.shape is None:
            continue                     # not a tensor of known shape: `tvm-swap run --input` gives it
        try:
            shape = [int(d) for d in ty.shape.values]
        except TypeError:
            continue                     # a symbolic dim
        dt = str(ty.dtype.dtype)
        if p.name in vocab:
            out[p.name] = rng.integers(0, vocab[p.name], size=shape).astype(dt)
        elif "int" in dt:
            out[p.name] = rng.integers(0, 2, size=shape).astype(dt)
        else:
            out[p.name] = rng.uniform(-1, 1, size=shape).astype(dt)
    return out
