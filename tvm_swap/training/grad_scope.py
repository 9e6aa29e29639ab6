"""Which part of a loss function needs differentiating: the bindings that depend on a trainable parameter.

relax.transform.Gradient walks every binding whose result reaches the loss, so it asks for the gradient of
ops no gradient ever flows through: the arange / bitwise_and / index_tensor that build a causal mask and
position ids, integer work on token ids, anything computed from shapes, constants, inputs or frozen params.
`split_by_dependence` moves those bindings into a separate function (the prelude) whose results enter the
differentiated part (the core) as plain parameters, which Gradient treats as leaves:

    prelude(*data, *params) -> (b_1, ..., b_k)          # everything that does not depend on a trainable param
    core(*data, *params, b_1, ..., b_k) -> loss         # the rest; Gradient only sees this

Both are private functions; the training step calls the prelude, then the core's adjoint, and inlining makes
it one flat function again, so the step computes exactly what the unsplit loss did.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import TvmSwapError


@dataclass
class Split:
    prelude: object | None      # relax.Function returning a Tuple of the boundary values, or None (nothing to hoist)
    core: object                # relax.Function(*params of the loss, *boundary params) -> loss
    n_boundary: int             # how many boundary values the prelude hands to the core


def dependent_vars(func, seeds) -> set:
    """Binding vars of `func`'s (single) dataflow block whose value depends, transitively, on a var in seeds."""
    from tvm import relax

    dep = set(seeds)
    for binding in func.body.blocks[0].bindings:
        if any(v in dep for v in relax.analysis.free_vars(binding.value)):
            dep.add(binding.var)
    return dep


def split_by_dependence(func, trainable) -> Split:
    """Split a one-dataflow-block loss function into prelude and core (see the module docstring)."""
    from tvm import relax

    (block,) = func.body.blocks
    dep = dependent_vars(func, trainable)
    ret = func.body.body
    if not any(v in dep for v in relax.analysis.free_vars(ret)):
        raise TvmSwapError("the loss does not depend on any trainable parameter; nothing to train")
    hoisted = [b for b in block.bindings if b.var not in dep]
    if not hoisted:
        return Split(None, func, 0)
    kept = [b for b in block.bindings if b.var in dep]
    hoisted_vars = {b.var for b in hoisted}
    boundary, seen = [], set()
    for b in kept:
        for v in relax.analysis.free_vars(b.value):
            if v in hoisted_vars and v not in seen:
                seen.add(v)
                boundary.append(v)
    # the prelude returns the boundary values (bound to non-dataflow vars, as emit_output does); it is a
    # copy with fresh vars, since a Relax var must be bound exactly once across the module
    pre_out = [relax.Var(v.name + "_out", v.ty) for v in boundary]
    pre_block = relax.DataflowBlock(list(hoisted) + [relax.VarBinding(o, v) for o, v in zip(pre_out, boundary)])
    prelude = relax.utils.copy_with_new_vars(relax.Function(
        list(func.params), relax.SeqExpr([pre_block], relax.Tuple(pre_out)),
        relax.TupleType([v.ty for v in boundary])))
    # the core takes each boundary value as a parameter and binds the old var to it (CanonicalizeBindings folds it)
    leaves = [relax.Var(v.name, v.ty) for v in boundary]
    core_block = relax.DataflowBlock([relax.VarBinding(v, leaf) for v, leaf in zip(boundary, leaves)] + kept)
    core = relax.Function([*func.params, *leaves], relax.SeqExpr([core_block], ret), func.ret_ty)
    return Split(prelude, core, len(boundary))

