"""SplitDenseByOutputFeatures: a dense layer whose weight sets the floor runs as K slices of its output features.

    y = matmul(x, W_T)                       W_T: (IN, OUT), a frozen parameter (after relay_passes.param_layout)
 -> y_k = matmul(x, W_T_s{k})   k < K        W_T_s{k}: (IN, OUT_k), its k-th block of columns, shipped as is
    y = concat([y_0 .. y_{K-1}], axis=-1)

Each slice is a kernel of its own that the planner schedules, swaps and places like any other, so the floor is
the largest slice's working set (x, one weight chunk, one output chunk), not the whole weight's (memory-centric
tiling, as ZeRO-Infinity does for large linear layers). Every output element is the same sum in the same order
as the unsplit kernel's: results are bitwise equal. The chunks are cut at compile time, a `slice` step of the
parameter's recipe (tvm_swap.param_layouts), so the user still gives and gets W in its own layout.
Only frozen parameters (after `num_input`, not updated) read by exactly one matmul as its right operand.
"""
from __future__ import annotations

import json

import numpy as np
import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

from tvm_swap.param_layouts import Fold, ParamLayouts

from .param_layout import ATTR, _frozen, _static_shape, folded_layouts


def _matmul_readers(func) -> dict:
    """param -> the bindings reading it (any expression), for the function's parameters."""
    readers: dict = {p: [] for p in func.params}
    for block in func.body.blocks:
        for b in block.bindings:
            for v in relax.analysis.free_vars(b.value):
                if v in readers:
                    readers[v].append(b)
    return readers


def splittable(func) -> dict[str, tuple[int, int]]:
    """{name: (IN, OUT)} of the frozen 2-D parameters read only as the right operand of one matmul."""
    readers = _matmul_readers(func)
    out = {}
    for p in _frozen(func):
        shape = _static_shape(p.ty)
        bs = readers.get(p, [])
        if shape is None or len(shape) != 2 or len(bs) != 1:
            continue
        v = bs[0].value
        if (isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.matmul"
                and v.args[1].same_as(p) and not v.args[0].same_as(p)):
            out[p.name] = shape
    return out


def chunk_bounds(out_features: int, k: int) -> list[tuple[int, int]]:
    """[begin, end) of K blocks of columns, as numpy.array_split cuts them."""
    edges = np.cumsum([0] + [len(c) for c in np.array_split(np.arange(out_features), k)])
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])]


@mutator
class _Splitter(PyExprMutator):
    def __init__(self, chunks):
        super().__init__()
        self.chunks = chunks        # param var -> [new param vars]

    def visit_var_binding_(self, binding):  # noqa: N802  (TVM's visitor naming)
        v = binding.value
        if (isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name == "relax.matmul"
                and isinstance(v.args[1], relax.Var) and v.args[1] in self.chunks):
            x = self.visit_expr(v.args[0])
            parts = [self.builder_.emit(relax.op.matmul(x, c, out_dtype=v.attrs.out_dtype), f"{binding.var.name}_s{i}")
                     for i, c in enumerate(self.chunks[v.args[1]])]
            joined = relax.op.concat(parts, axis=-1)
            emit = self.builder_.emit if isinstance(binding.var, relax.DataflowVar) else self.builder_.emit_output
            self.set_var_remap(binding.var, emit(joined, binding.var.name))
            return
        super().visit_var_binding_(binding)


def _identity_layouts(func) -> ParamLayouts:
    n = int(func.attrs["num_input"])
    user = tuple((p.name, _static_shape(p.ty), str(p.ty.dtype.dtype)) for p in func.params[n:])
    return ParamLayouts(user, tuple(p.name for p in func.params[n:]), ())


def split_function(func, splits: dict[str, int]):
    """`func` with each parameter named in `splits` ({name: K}, see splittable) read as K column chunks."""
    can = splittable(func)
    bad = sorted(set(splits) - set(can))
    if bad:
        raise ValueError(f"not a frozen 2-D weight read by one matmul: {bad}")
    layouts = folded_layouts(func) or _identity_layouts(func)
    folds = {f.name: f for f in layouts.folds}
    kept, new_folds = list(layouts.kept), [f for f in layouts.folds if f.name not in splits]
    params, chunks = [], {}
    for p in func.params:
        k = int(splits.get(p.name, 1))
        if k <= 1:
            params.append(p)
            continue
        rows, cols = can[p.name]
        base = folds.get(p.name) or Fold(p.name, p.name, (rows, cols), ())
        if p.name in kept:
            kept.remove(p.name)
        chunks[p] = []
        for i, (b, e) in enumerate(chunk_bounds(cols, k)):
            new = relax.Var(f"{p.name}_s{i}", relax.TensorType([rows, e - b], p.ty.dtype))
            chunks[p].append(new)
            params.append(new)
            new_folds.append(Fold(new.name, base.source, base.source_shape, base.steps + (("slice", (1, b, e)),)))
    body = _Splitter(chunks).visit_expr(func.body)
    attrs = dict(func.attrs.items())
    attrs[ATTR] = json.dumps(ParamLayouts(layouts.user, tuple(kept), tuple(new_folds)).to_dict())
    return relax.Function(params, body, func.ret_ty, func.is_pure, tvm.ir.make_node("ir.DictAttrs", **attrs))


@tvm.transform.module_pass(opt_level=0, name="tvm_swap.SplitDenseByOutputFeatures")
class SplitDenseByOutputFeatures:
    """Run the matmuls reading the weights in `splits` ({param name: K}) as K slices (module docstring).
    Inference only: a function with `tvm_swap.updates` (a training step) is refused."""

    def __init__(self, splits: dict[str, int], func_name: str = "main"):
        self.splits = {k: int(v) for k, v in splits.items() if int(v) > 1}
        self.func_name = func_name

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        if not self.splits:
            return mod
        gv = mod.get_global_var(self.func_name)
        func = mod[gv]
        if func.attrs is not None and "tvm_swap.updates" in func.attrs:
            raise ValueError("splitting a dense layer by output features is for inference; this is a training step")
        out = tvm.IRModule(dict(mod.functions.items()), attrs=mod.attrs)
        out[gv] = split_function(func, self.splits)
        return relax.transform.Normalize()(out)
