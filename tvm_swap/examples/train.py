"""Turn a Relax loss function into ONE flat training step: forward + loss + backward + SGD.

Uses relax.transform.Gradient on the loss function, then a `main` that calls the adjoint and applies
`p - lr * grad` to every parameter; the callee is inlined (notes/tvm-0.27.md §2) so `main` is a single
dataflow function the swap planner sees whole.

    main(*inputs, *params) -> (loss, *new_params)
    attrs: num_input = len(inputs), tvm_swap.updates = [[1 + i, num_inputs + i] for each param i]
"""
from __future__ import annotations

UPDATES_ATTR = "tvm_swap.updates"


def sgd_train_step(loss_func, num_inputs: int, lr: float = 0.01):
    """An IRModule with only `main`: one SGD step of `loss_func(*inputs, *params) -> scalar loss`.

    `loss_func` must be a relax.Function with a single dataflow block and a 0-d float result.
    """
    import tvm
    from tvm import relax

    params = list(loss_func.params)
    weights = params[num_inputs:]
    mod = tvm.IRModule({"loss": loss_func.without_attr("global_symbol")})
    mod = relax.transform.Gradient("loss", require_grads=weights)(mod)
    adjoint = mod["loss_adjoint"]

    bb = relax.BlockBuilder()
    adj_gv = bb.add_func(adjoint.without_attr("global_symbol"), "loss_adjoint")
    new_params = [relax.Var(p.name, p.ty) for p in params]
    with bb.function("main", new_params):
        with bb.dataflow():
            res = bb.emit(relax.Call(adj_gv, new_params))
            loss = bb.emit(relax.TupleGetItem(res, 0))
            grads = bb.emit(relax.TupleGetItem(res, 1))
            outs = [loss]
            for i, w in enumerate(new_params[num_inputs:]):
                g = bb.emit(relax.TupleGetItem(grads, i))
                step = relax.const(lr, str(w.ty.dtype.dtype))
                outs.append(bb.emit(relax.op.subtract(w, relax.op.multiply(step, g))))
            gv = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(gv)
    mod = bb.get()
    mod = tvm.transform.Sequential([
        relax.transform.InlinePrivateFunctions(),
        relax.transform.DeadCodeElimination(["main"]),
        relax.transform.ConvertToDataflow(),
        relax.transform.CanonicalizeBindings(),
    ])(mod)
    n = len(weights)
    updates = [[1 + i, num_inputs + i] for i in range(n)]
    func = mod["main"].with_attr("num_input", num_inputs).with_attr(UPDATES_ATTR, updates)
    return tvm.IRModule({"main": func})
