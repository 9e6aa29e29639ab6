"""FuseTransposedOperands: a matmul reads a transposed operand in place instead of a kernel copying it first.

    matmul(x, permute_dims(W))        -> one kernel reading W as it is        (X W^T: a Linear's forward)
    matmul(permute_dims(dY), X)       -> one kernel reading dY as it is       (X^T W: a Linear's weight gradient)

Without it, TVM lowers `permute_dims` to a kernel of its own that holds the whole operand twice (its input
and its transposed copy): for a trainable weight that is the op that sets the floor. TVM 0.27's
`relax.transform.FuseTransposeMatmul` covers only the first form; this pass covers both (and both at once),
for a permute_dims that swaps the last two axes of an operand of rank >= 2. Run it before LegalizeOps.

The kernel is the legalized matmul (tvm/relax/transform/legalize_ops/linear_algebra.py) with the operand's
index swapped: the same products summed in the same order, so results are bitwise equal to transpose then
matmul. The permute_dims binding is left for DeadCodeElimination when nothing else reads it.
"""
from __future__ import annotations

import tvm
from tvm import relax, te, tirx
from tvm.relax.expr_functor import PyExprMutator, mutator

PRIMFUNC_NAME = "matmul_transposed"


def swaps_last_two(call) -> bool:
    """True for permute_dims that swaps the last two axes (and nothing else) of a tensor of rank >= 2."""
    if not isinstance(call, relax.Call) or not isinstance(call.op, tvm.ir.Op) or call.op.name != "relax.permute_dims":
        return False
    ndim = call.args[0].ty.ndim
    if ndim < 2:
        return False
    axes = list(range(ndim))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return (call.attrs.axes is None and ndim == 2) or (call.attrs.axes is not None
                                                        and [int(a) for a in call.attrs.axes] == axes)


def _static(ty) -> bool:
    return (isinstance(ty, relax.TensorType) and ty.shape is not None and ty.ndim >= 2
            and all(isinstance(d, tirx.IntImm) for d in ty.shape.values))


def _matmul_te(out_shape, a_t: bool, b_t: bool):
    """TE of matmul(A', B') where A' = A^T if a_t (last two axes) else A, B' likewise; broadcast batch dims
    indexed as the legalized matmul indexes them."""

    def compute(a: te.Tensor, b: te.Tensor) -> te.Tensor:
        a_shape, b_shape = list(a.shape), list(b.shape)
        if a_t:
            a_shape[-1], a_shape[-2] = a_shape[-2], a_shape[-1]
        if b_t:
            b_shape[-1], b_shape[-2] = b_shape[-2], b_shape[-1]
        nbatch = len(out_shape) - 2

        def batch_index(shape, idx):
            lead = nbatch - (len(shape) - 2)
            return [0 if int(shape[i - lead]) == 1 and int(out_shape[i]) != 1 else idx[i]
                    for i in range(lead, nbatch)]

        def body(*idx):
            k = te.reduce_axis((0, a_shape[-1]), name="k")
            i, j = idx[-2], idx[-1]
            ai = batch_index(a_shape, idx) + ([k, i] if a_t else [i, k])
            bi = batch_index(b_shape, idx) + ([j, k] if b_t else [k, j])
            return te.sum(a(*ai) * b(*bi), axis=k)

        return te.compute(out_shape, body, name="matmul")

    return compute


@mutator
class _Fuser(PyExprMutator):
    def __init__(self, mod, var2val):
        super().__init__(mod)
        self.var2val = var2val
        self.count = 0

    def _untransposed(self, arg):
        """(operand to read, True) when `arg` is bound to a fusable permute_dims, else (arg, False)."""
        value = self.var2val.get(arg) if isinstance(arg, relax.Var) else None
        if value is not None and swaps_last_two(value) and _static(value.args[0].ty):
            return value.args[0], True
        return arg, False

    def visit_call_(self, call):  # noqa: N802  (TVM's visitor naming)
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op) or call.op.name != "relax.matmul":
            return call
        out_dtype = call.attrs.out_dtype
        a, b = call.args
        if not (_static(a.ty) and _static(b.ty) and _static(call.ty)):
            return call
        if out_dtype is not None and str(out_dtype) not in ("", str(a.ty.dtype.dtype)):
            return call            # a mixed-precision matmul keeps TVM's own legalization
        a_src, a_t = self._untransposed(a)
        b_src, b_t = self._untransposed(b)
        if not (a_t or b_t):
            return call
        self.count += 1
        out_shape = [int(d) for d in call.ty.shape.values]
        return self.builder_.call_te(_matmul_te(out_shape, a_t, b_t), a_src, b_src, primfunc_name_hint=PRIMFUNC_NAME)


@tvm.transform.module_pass(opt_level=0, name="tvm_swap.FuseTransposedOperands")
class FuseTransposedOperands:
    """matmul reads an operand transposed in its last two axes in place (see the module docstring)."""

    def transform_module(self, mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        funcs = [(gv, f) for gv, f in mod.functions_items() if isinstance(f, relax.Function)]
        var2val = {}
        for _, f in funcs:
            var2val.update(relax.analysis.get_var2val(f))
        fuser = _Fuser(mod, var2val)
        for gv, f in funcs:
            fuser.builder_.update_func(gv, fuser.visit_expr(f))
        if not fuser.count:
            return mod
        return relax.transform.DeadCodeElimination()(fuser.builder_.get())
