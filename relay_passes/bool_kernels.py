"""Boolean tensors through ops the llvm code generator cannot compile for them, computed in int8 instead.

TVM 0.27 legalizes a comparison or arithmetic op on bool tensors to TIR on `bool` values, and its llvm code
generator then fails on the kernel: `equal`/`not_equal` emit `fcmp` on i1 ("Invalid operand types for FCmp
instruction"), `less`/`add`/`multiply`/`maximum`/`cumsum`... fail `Check failed: t.MatchesCode(kDLFloat)`, and
`max`/`min` cannot find the bool type's identity. Such kernels come from masks a model computes from shapes
(transformers' causal mask when no attention_mask is given compares bools) or from ONNX graphs.

`LegalizeBoolOps` (run before LegalizeOps) casts every bool operand of those ops to int8 and the result back
to bool where the op returned bool, so the kernels compute on int8 values, which the code generator handles.
Values are unchanged: comparisons of 0/1 agree with comparisons of False/True; add, multiply, maximum and
minimum of 0/1 are non-zero exactly where torch's bool results (logical or / and) are True; a cumulative
sum or product of bools is kept as "non-zero so far" (bool saturating), which is what a bool-typed result
can hold (torch itself returns int64 for cumsum of bools: tvm_swap.frontends.torch_converters imports it so).
"""
from __future__ import annotations

import tvm
from tvm import relax

# bool operands -> int8, the op's bool result stays bool (a comparison) or is cast back to bool
COMPARISONS = {"relax.equal", "relax.not_equal", "relax.less", "relax.less_equal", "relax.greater",
               "relax.greater_equal"}
ELEMENTWISE = {"relax.add", "relax.subtract", "relax.multiply", "relax.maximum", "relax.minimum"}
REDUCTIONS = {"relax.max", "relax.min", "relax.cumsum", "relax.cumprod"}
BOOL_OPS = COMPARISONS | ELEMENTWISE | REDUCTIONS


def _is_bool(expr) -> bool:
    ty = expr.ty
    return isinstance(ty, relax.TensorType) and str(ty.dtype.dtype) == "bool"


def _with_args(call, args):
    return relax.Call(call.op, args, call.attrs, call.ty_args)


@relax.expr_functor.mutator
class _BoolOpsMutator(relax.PyExprMutator):
    def __init__(self, mod):
        super().__init__(mod)
        self.changed = 0

    def visit_call_(self, call):
        call = super().visit_call_(call)
        name = getattr(call.op, "name", None)
        if name not in BOOL_OPS or not any(_is_bool(a) for a in call.args if isinstance(a, relax.Expr)):
            return call
        self.changed += 1
        args = [relax.op.astype(a, "int8") if isinstance(a, relax.Expr) and _is_bool(a) else a
                for a in call.args]
        if name in ("relax.cumsum", "relax.cumprod"):      # accumulate in int32: int8 would wrap to 0
            scan = relax.op.cumsum if name == "relax.cumsum" else relax.op.cumprod
            new = scan(args[0], call.attrs.axis, "int32" if _is_bool(call) else call.attrs.dtype,
                       call.attrs.exclusive)
        else:
            new = _with_args(call, args)
        new = self.builder_.normalize(new)
        return relax.op.astype(new, "bool") if _is_bool(call) and not _is_bool(new) else new


@tvm.transform.module_pass(opt_level=0, name="tvm_swap.LegalizeBoolOps")
def LegalizeBoolOps(mod, _ctx):   # noqa: N802 (TVM's pass naming)
    """Every Relax function of `mod` with its bool comparisons / arithmetic / reductions done in int8."""
    m = _BoolOpsMutator(mod)
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function):
            m.builder_.update_func(gv, m.visit_expr(func))
    return m.builder_.get() if m.changed else mod
