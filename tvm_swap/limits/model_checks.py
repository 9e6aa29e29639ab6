"""Checks on a model that need no lowering, profiling or search, so bad input is refused in well under a
second (issue 16): params without a value, and a memory limit below what one tensor of the model alone needs.

Messages here speak of Python arguments (`params=`, `mem_limit=`); the command line rewords them into its
flags (tvm_swap.cli.wording) or raises its own (`cli=True`).
"""
from __future__ import annotations

import math

from ..errors import InfeasibleLimitError, TvmSwapError

SHOW_FIRST = 5


class MissingParamsError(TvmSwapError):
    """Some parameters of the model have no value; carries them (`missing`) and how many it has (`total`)."""

    def __init__(self, missing: list[str], total: int, cli: bool = False, model: str = "the model"):
        self.missing = list(missing)
        self.total = int(total)
        first = ", ".join(repr(n) for n in self.missing[:SHOW_FIRST])
        more = ", ..." if len(self.missing) > SHOW_FIRST else ""
        head = (f"{model} has {len(self.missing)} of its {self.total} parameters without a value "
                f"(first: {first}{more})")
        if cli:
            way = ("pass --params FILE with the trained weights, or --init random|zeros to initialise every "
                   "parameter (seeded; for sizing and benchmarking: the weights are not trained)")
        else:
            way = ("pass params={name: array} for each, or initialise them for sizing and benchmarking with "
                   "params=tvm_swap.frontends.init_params.init_params(mod, 'random' or 'zeros', seed=0)")
        super().__init__(f"{head}: {way}")


def _func(mod, func_name: str):
    import tvm

    if not isinstance(mod, tvm.IRModule) or func_name not in [gv.name_hint for gv in mod.functions]:
        return None
    return mod[func_name]


def _num_input(func) -> int:
    attrs = func.attrs
    return int(attrs["num_input"]) if attrs is not None and "num_input" in attrs else len(func.params)


def _used_params(func) -> set:
    from tvm import relax

    return {v.name for v in relax.analysis.free_vars(func.body)}


def params_without_value(mod, params, func_name: str = "main") -> tuple[list[str], int]:
    """(names of the parameters after `num_input` that the function reads and `params` does not give, in
    parameter order; how many parameters there are). A list of params (positional) is checked elsewhere."""
    func = _func(mod, func_name)
    if func is None or isinstance(params, (list, tuple)):
        return [], 0
    given = set(params or {})
    used = _used_params(func)
    weights = [p.name for p in func.params[_num_input(func):]]
    return [n for n in weights if n in used and n not in given], len(weights)


def check_params(mod, params, func_name: str = "main", cli: bool = False, model: str = "the model") -> None:
    missing, total = params_without_value(mod, params, func_name)
    if missing:
        raise MissingParamsError(missing, total, cli=cli, model=model)


def _nbytes(ty) -> int | None:
    from tvm import relax, tirx

    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    dims = ty.shape.values
    if not all(isinstance(d, tirx.IntImm) for d in dims):
        return None
    import numpy as np

    return math.prod(int(d) for d in dims) * np.dtype(str(ty.dtype.dtype)).itemsize


def largest_tensor(mod, func_name: str = "main") -> tuple[int, str]:
    """(bytes, name) of the largest tensor that must be on the device at some point whatever the plan:
    a parameter the function reads, or one of its results. A lower bound on any feasible limit, known
    before lowering (fusion can hide intermediates, never these)."""
    from tvm import relax

    func = _func(mod, func_name)
    if func is None:
        return 0, ""
    used = _used_params(func)
    best = (0, "")
    for p in func.params:
        b = _nbytes(p.ty)
        if b is not None and p.name in used and b > best[0]:
            best = (b, f"parameter {p.name!r}")
    ret = func.ret_ty
    fields = ret.fields if isinstance(ret, relax.TupleType) else [ret]
    for i, ty in enumerate(fields):
        b = _nbytes(ty)
        if b is not None and b > best[0]:
            best = (b, f"result #{i}")
    return best


def check_limit_before_lowering(mod, mem_limit, func_name: str = "main", alignment: int = 256) -> None:
    """Refuse an absolute limit below the largest tensor the model must hold (percent limits need the
    lowered graph; compile_model checks those, and every limit exactly, right after lowering)."""
    from .mem_limit import MemLimit

    limit = MemLimit.of(mem_limit)
    if limit is None or limit.absolute is None:    # a percentage needs the lowered graph; a bad limit is
        return                                     # worded by MemLimit.resolve after lowering
    need, what = largest_tensor(mod, func_name)
    refuse_below_tensor(limit, need, what, alignment=alignment, note=splittable_note(mod, what, func_name))


def splittable_note(mod, what: str, func_name: str = "main") -> str:
    """For largest_tensor's `what`: the words saying split_dense=True cuts it, when it is an inference dense
    layer's weight (read by one matmul, directly or after a layout change folded at compile time), else ''."""
    from relay_passes.param_layout import FoldParamLayouts, folded_layouts
    from relay_passes.split_dense import splittable

    func = _func(mod, func_name)
    if (not what.startswith("parameter ") or func is None
            or (func.attrs is not None and "tvm_swap.updates" in func.attrs)):
        return ""
    name = what.split("'")[1]
    folded = FoldParamLayouts(func_name)(mod)[func_name]
    can = splittable(folded)
    layouts = folded_layouts(folded)
    names = {name} | {f.name for f in (layouts.folds if layouts else ()) if f.source == name}
    if not names & set(can):
        return ""
    return "; it is a dense layer's weight: split_dense=True cuts it into slices of its output features"


def refuse_below_tensor(mem_limit, need: int, what: str, alignment: int = 256, note: str = "") -> None:
    """InfeasibleLimitError when a byte limit is below `need` bytes (aligned) of one tensor `what` the model
    must hold (largest_tensor, or frontends.mxnet_early.largest_tensor from a symbol before importing)."""
    from .mem_limit import MemLimit
    from ..plan import aligned_bytes

    limit = MemLimit.of(mem_limit)
    limit = None if limit is None else limit.absolute
    floor = aligned_bytes(need, alignment) if need else 0
    if limit is not None and limit < floor:
        raise InfeasibleLimitError(limit, floor, f"the model's {what} alone needs that much{note}", exact=False)
