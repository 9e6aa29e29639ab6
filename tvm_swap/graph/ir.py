"""The one reader of a lowered Relax function, shared by graph extraction (extract.py) and plan application
(relay_passes.apply), so both agree on what each binding is.

Input: the output of relay_passes.lower (after CallTIRRewrite), where each kernel is
`alloc = R.builtin.alloc_tensor(...)`, `kernel(inputs..., alloc)`, `lv = alloc`. `classify` names what one
binding's value is; the op tables below are the only lists of Relax ops either side knows.
Parameters must be tensors (`check_tensor_params`): a tuple parameter is refused with the same message
on both sides.
"""
from __future__ import annotations

import math
from enum import Enum

from ..errors import GraphError, UnsupportedModelError

ALLOC_OP = "relax.builtin.alloc_tensor"
# Relax ops that return a view of their first argument: no new storage.
VIEW_OPS = ("relax.reshape", "relax.memory.view", "relax.memory.ensure_zero_offset",
            "relax.builtin.stop_lift_params")
VIEW_PACKED = ("vm.builtin.reshape",)
# Relax ops that produce no tensor data a plan has to place.
IGNORED_OPS = ("relax.shape_of", "relax.null_value", "relax.print", "relax.assert_op", "relax.tensor_to_shape")
PACKED_CALL_OPS = ("relax.call_packed", "relax.call_pure_packed")
FINALIZED_OPS = ("relax.memory.alloc_storage", "relax.memory.alloc_tensor", "relax.vm.alloc_storage",
                 "relax.vm.alloc_tensor")
UNLOWERED_OPS = ("relax.call_tir", "relax.call_tir_inplace", "relax.call_dps_packed", "relax.call_tir_with_grad")
# Extern functions of the VM and of our runtime: calls into them are never kernels.
RUNTIME_PREFIXES = ("vm.", "tvm_swap.")


class Kind(str, Enum):
    """What a binding's value is."""
    ALIAS = "alias"                # a Var, Tuple or TupleGetItem (or a match_cast of one)
    CONSTANT = "constant"          # lives in the executable's constant pool, not in the plan's pool
    ALLOC = "alloc"                # R.builtin.alloc_tensor: storage a kernel will write
    VIEW = "view"                  # a view of its first argument
    IGNORED = "ignored"            # carries no tensor data
    KERNEL = "kernel"              # a direct call of a PrimFunc
    PACKED = "packed"              # a call of an extern (packed) function, by ExternFunc or call_packed
    RELAX_CALL = "relax_call"      # a call of another Relax function (not inlined)
    CONTROL_FLOW = "control_flow"  # if/else
    FINALIZED = "finalized"        # already memory-planned by TVM
    UNLOWERED = "unlowered"        # call_tir and friends: relay_passes.lower has not run
    UNKNOWN_OP = "unknown_op"      # a Relax op with no kernel
    OTHER = "other"                # anything else (shapes, prim values, strings)


def op_name(call) -> str | None:
    import tvm

    return call.op.name if isinstance(call.op, tvm.ir.Op) else None


def callee_name(op) -> str:
    return getattr(op, "name_hint", None) or str(getattr(op, "global_symbol", op))


def packed_call(call) -> tuple[str, list]:
    """(symbol, arguments) of a PACKED call, either spelling."""
    from tvm import relax

    if isinstance(call.op, relax.ExternFunc):
        return str(call.op.global_symbol), list(call.args)
    return str(call.args[0].global_symbol), list(call.args[1:])


def is_runtime_symbol(symbol: str) -> bool:
    return symbol.startswith(RUNTIME_PREFIXES)


def is_constant(expr) -> bool:
    import tvm
    from tvm import relax

    const_types = tuple(t for t in (getattr(tvm.ir, "GenericConst", None), getattr(relax, "Constant", None))
                        if isinstance(t, type))
    return bool(const_types) and isinstance(expr, const_types)


def classify(mod, value) -> Kind:
    """What the value of one binding is (a MatchCast's value is read as an ALIAS by the caller)."""
    import tvm
    from tvm import relax, tirx

    if isinstance(value, (relax.Var, relax.Tuple, relax.TupleGetItem)):
        return Kind.ALIAS
    if is_constant(value):
        return Kind.CONSTANT
    if isinstance(value, relax.If):
        return Kind.CONTROL_FLOW
    if not isinstance(value, relax.Call):
        return Kind.OTHER
    op = value.op
    if isinstance(op, tvm.ir.Op):
        name = op.name
        if name == ALLOC_OP:
            return Kind.ALLOC
        if name in VIEW_OPS:
            return Kind.VIEW
        if name in PACKED_CALL_OPS:
            return Kind.VIEW if packed_call(value)[0] in VIEW_PACKED else Kind.PACKED
        if name in IGNORED_OPS:
            return Kind.IGNORED
        if name in FINALIZED_OPS:
            return Kind.FINALIZED
        if name in UNLOWERED_OPS:
            return Kind.UNLOWERED
        return Kind.UNKNOWN_OP
    if isinstance(op, tvm.ir.GlobalVar):
        callee = mod[op]
        if isinstance(callee, relax.Function):
            return Kind.RELAX_CALL
        return Kind.KERNEL if isinstance(callee, tirx.PrimFunc) else Kind.OTHER
    if isinstance(op, relax.ExternFunc):
        return Kind.VIEW if str(op.global_symbol) in VIEW_PACKED else Kind.PACKED
    return Kind.OTHER


def view_source(call):
    """The expression a VIEW call views."""
    return call.args[1] if op_name(call) in PACKED_CALL_OPS else call.args[0]


def relax_function(mod, func_name: str, error: type = GraphError):
    """mod[func_name] as a Relax function, or `error` saying what the module has instead."""
    from tvm import relax

    names = [gv.name_hint for gv in mod.functions]
    if func_name not in names:
        raise error(f"the module has no function {func_name!r}; it has: {', '.join(sorted(names))}")
    func = mod[func_name]
    if not isinstance(func, relax.Function):
        raise error(f"{func_name!r} is not a Relax function")
    return func


def check_tensor_params(func, func_name: str) -> None:
    """Every parameter is a tensor: tuple parameters are refused (plan application cannot place them)."""
    from tvm import relax

    for p in func.params:
        if not isinstance(p.ty, relax.TensorType):
            raise UnsupportedModelError(
                f"parameter {p.name!r} of {func_name!r} is a {type(p.ty).__name__}, not a tensor; tuple "
                f"parameters are not supported: pass each tensor as its own parameter")


def tensor_type(ty, what: str) -> tuple[tuple[int, ...], str, int]:
    """(shape, dtype, nbytes) of a static TensorType; UnsupportedModelError otherwise."""
    from tvm import relax, tirx

    if not isinstance(ty, relax.TensorType) or ty.shape is None or getattr(ty.shape, "values", None) is None:
        raise UnsupportedModelError(f"{what} has type {ty}; only tensors with static shapes are supported")
    dims = []
    for d in ty.shape.values:
        if not isinstance(d, tirx.IntImm):
            raise UnsupportedModelError(
                f"{what} has a dynamic shape ({ty}); dynamic shapes are not supported: give static input shapes")
        dims.append(int(d))
    dt = ty.dtype.dtype
    nbytes = math.prod(dims) * ((dt.bits * dt.lanes + 7) // 8)
    return tuple(dims), str(dt), int(nbytes)


def shape_of(ty) -> tuple[int, ...]:
    return tuple(int(d) for d in ty.shape.values)


def dtype_of(ty) -> str:
    return str(ty.dtype.dtype) if hasattr(ty.dtype, "dtype") else str(ty.dtype)
