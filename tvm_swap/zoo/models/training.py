"""One training iteration as ONE Relax function: forward + loss + backward + optimizer update.

    mod = train_step_module(build_loss, optimizer="momentum")

`build_loss(net)` writes the forward pass and loss with a `Net` and returns the scalar loss. The module
holds one Relax function (plus the optimizer's PrimFuncs)

    train_step(inputs..., params..., states...) -> (loss, new_params..., new_states...)

where output 1 + i replaces parameter i and output 1 + P + j replaces optimizer state j. Function attrs
record that layout as tvm_swap.graph.extract reads it: `num_input`, `tvm_swap.updates` ([output index,
parameter index] pairs) and `tvm_swap.param_kinds` (the states are "optimizer_state"), so the graph
marks weights, states and their updates without guessing.

Route: relax.transform.Gradient on the scalar loss function, then the optimizer's kernels appended to
the adjoint's single dataflow block, each right after the last binding of its gradient (so the default
order frees a gradient as soon as it is applied; the function does not return gradients).
Checked numerically against numpy for all three optimizers in tests/zoo/test_zoo.py.

Optimizers (one elementwise kernel per parameter with all its outputs; lr etc. are constants):
- "sgd":      p' = p - lr*g
- "momentum": v' = mu*v + g;  p' = p - lr*v'                      (MXNet's SGD with momentum)
- "adam":     m' = b1*m + (1-b1)*g;  v' = b2*v + (1-b2)*g*g;  p' = p - lr*m'/(sqrt(v') + eps)
              (bias correction folded into lr: without a step counter it is a per-step constant)
"""
from __future__ import annotations

import tvm
from tvm import relax, te

from .net import Net

LOSS_FUNC = "loss"
TRAIN_FUNC = "train_step"
OPTIMIZER_STATES = {"sgd": (), "momentum": ("momentum",), "adam": ("adam_m", "adam_v")}


def loss_module(build_loss, dtype: str = "float32") -> tuple[tvm.IRModule, Net]:
    bb = relax.BlockBuilder()
    net = Net(bb, dtype)
    with bb.function(LOSS_FUNC):
        with bb.dataflow():
            loss = build_loss(net)
            if list(loss.ty.shape.values):
                raise ValueError(f"build_loss must return a scalar loss, got shape {loss.ty.shape}")
            out = bb.emit_output(loss)
        bb.emit_func_output(out, params=net.inputs + net.params)
    return bb.get(), net


def train_step_module(build_loss, optimizer: str = "momentum", lr: float = 0.01,
                      dtype: str = "float32") -> tvm.IRModule:
    if optimizer not in OPTIMIZER_STATES:
        raise ValueError(f"unknown optimizer {optimizer!r}; choose one of {sorted(OPTIMIZER_STATES)}")
    mod, net = loss_module(build_loss, dtype)
    # layer_norm and friends have no gradient of their own; this rewrites them into ops that do.
    mod = relax.transform.DecomposeOpsForTraining(LOSS_FUNC)(mod)
    mod = relax.transform.Gradient(LOSS_FUNC, require_grads=net.params, target_index=0)(mod)
    adj = mod[f"{LOSS_FUNC}_adjoint"]
    # The gradient emits one transpose of a weight per use (e.g. every RNN step); share one copy.
    adj = relax.transform.EliminateCommonSubexpr()(tvm.IRModule({"f": adj}))["f"]
    return _append_optimizer(adj, net, optimizer, lr)


def _update_te(optimizer: str, lr: float):
    """A TE function (p, *states, g) -> (p', *states'): ONE kernel per parameter, like MXNet's
    sgd_mom_update / adam_update (FuseOps may still fuse it into the op that makes g)."""
    def sgd(p, g):
        return te.compute(p.shape, lambda *i: p(*i) - lr * g(*i), name="sgd_update")

    def momentum(p, v, g):
        def f(*i):
            v2 = 0.9 * v(*i) + g(*i)
            return p(*i) - lr * v2, v2
        return te.compute(p.shape, f, name="sgd_mom_update")

    def adam(p, m, v, g):
        def f(*i):
            m2 = 0.9 * m(*i) + 0.1 * g(*i)
            v2 = 0.999 * v(*i) + 0.001 * g(*i) * g(*i)
            return p(*i) - lr * m2 / (te.sqrt(v2) + 1e-8), m2, v2
        return te.compute(p.shape, f, name="adam_update")

    return {"sgd": sgd, "momentum": momentum, "adam": adam}[optimizer]


def _emit_update(bb, update, p, g, states):
    """Emit one parameter's update; returns (new_param, new_states) as block outputs."""
    r = bb.emit_te(update, p, *states, g, primfunc_name_hint=update.__name__ + "_update")
    if not states:
        return bb.emit_output(r), []
    outs = [bb.emit_output(relax.TupleGetItem(r, k)) for k in range(1 + len(states))]
    return outs[0], outs[1:]


def _grad_positions(bindings, grads):
    """For each gradient: the variable that really holds it and the index of its binding."""
    where = {b.var: i for i, b in enumerate(bindings)}
    alias = {b.var: b.value for b in bindings if isinstance(b.value, relax.Var)}
    out = []
    for k, g in enumerate(grads):
        while g in alias:
            g = alias[g]
        if not isinstance(g, relax.Var) or g not in where:
            raise ValueError(f"gradient {k} is not a variable bound in the adjoint: {g}")
        out.append((g, where[g]))
    return out


def _live_bindings(bindings, roots) -> list[bool]:
    """Which bindings the roots need, transitively: one backward sweep (the function's own dead-code
    elimination, relax.transform.DeadCodeElimination, is superlinear in the block's length: ~110 s on
    NASNet-A's 100k-binding training block at R = 12, where this takes a second)."""
    need = {v for v in roots if isinstance(v, relax.Var)}
    live = [False] * len(bindings)
    for i in range(len(bindings) - 1, -1, -1):
        b = bindings[i]
        if b.var in need:
            live[i] = True
            need.update(relax.analysis.free_vars(b.value))
    return live


def _append_optimizer(adj: relax.Function, net: Net, optimizer: str, lr: float) -> tvm.IRModule:
    body = adj.body
    if len(body.blocks) != 1 or not isinstance(body.blocks[0], relax.DataflowBlock):
        raise ValueError("the adjoint function must be a single dataflow block")
    loss_expr, grads_expr = body.body.fields[0], body.body.fields[1]
    grads = list(grads_expr.fields) if isinstance(grads_expr, relax.Tuple) else None
    if grads is None or len(grads) != len(net.params):
        raise ValueError("the adjoint must return (loss, (one gradient per parameter))")
    n_in, n_p = len(net.inputs), len(net.params)
    params = list(adj.params)
    slots = OPTIMIZER_STATES[optimizer]
    states = [relax.Var(f"{p.name}.{s}", p.ty) for s in slots for p in params[n_in:]]   # slot-major
    n_s = len(states)
    attrs = {
        "num_input": n_in,
        "tvm_swap.updates": [[1 + i, n_in + i] for i in range(n_p + n_s)],
        "tvm_swap.param_kinds": {s.name: "optimizer_state" for s in states},
    }
    bindings = body.blocks[0].bindings
    after: dict[int, list[int]] = {}
    for k, (g, pos) in enumerate(_grad_positions(bindings, grads)):
        grads[k] = g
        after.setdefault(pos, []).append(k)
    update = _update_te(optimizer, lr)
    new_p: list = [None] * n_p
    new_s: list = [None] * n_s
    # Drop what nothing returns any more (the adjoint's own outputs: the gradient aliases).
    live = _live_bindings(bindings, [loss_expr, *grads])
    bb = relax.BlockBuilder()
    with bb.function(TRAIN_FUNC, params=params + states, attrs=attrs):
        with bb.dataflow():
            for i, binding in enumerate(bindings):
                if live[i]:
                    bb.emit_normalized(binding)
                for k in after.get(i, ()):
                    mine = [k + j * n_p for j in range(len(slots))]
                    new_p[k], ns = _emit_update(bb, update, params[n_in + k], grads[k],
                                                [states[m] for m in mine])
                    for m, v in zip(mine, ns):
                        new_s[m] = v
            loss = bb.emit_output(loss_expr) if isinstance(loss_expr, relax.DataflowVar) else loss_expr
        bb.emit_func_output(relax.Tuple([loss, *new_p, *new_s]))
    mod = bb.get()
    relax.analysis.well_formed(mod)  # raises on the first violation
    return mod
