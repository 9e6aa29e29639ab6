"""One flat training step: forward + loss + backward + optimizer update in ONE Relax function.

    step_mod, state = train_step(mod, params, loss="cross_entropy", optimizer="adam", lr=1e-3)
    m = tvm_swap.build(step_mod, mem_limit="50%", params=state)
    loss, *_ = m(x, labels)        # each call is one step; the module keeps the updated params and state

The step function `main` takes

    (*inputs, labels, *params, *optimizer_state) -> (loss, *new_trainable_params, *new_optimizer_state)

and carries `num_input` (= inputs + labels), `tvm_swap.updates` (which result replaces which parameter, so
graph extraction and SwapModule chain steps) and `tvm_swap.param_kinds` (optimizer state is
"optimizer_state"); see tvm_swap.graph.extract. `state` holds the params and the initial optimizer state
by name, in main's parameter order.

How it is made: the forward is inlined into a loss function, `DecomposeOpsForTraining` runs (BatchNorm
then normalises with **batch statistics**, as torch's train mode does; running statistics are not
updated), `relax.transform.Gradient` differentiates it (with tvm_swap.training.gradients registered), and the
optimizer update is written out per parameter. Parameters the loss never reads (BatchNorm running
statistics, unused tied aliases) are left out of the step. The optimizers follow torch's formulas
(torch.optim.SGD with momentum/nesterov/weight_decay, torch.optim.Adam with L2 weight_decay); they are
written here rather than taken from relax.training.optimizer, whose Adam.init crashes in TVM 0.27
(`self.dtype` is a PrimType) and whose state tuples would give the planner tuple parameters.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import gradients
from ..errors import TvmSwapError, UnsupportedModelError
from ..graph.ir import relax_function
from .grad_scope import split_by_dependence

UPDATES_ATTR = "tvm_swap.updates"
PARAM_KINDS_ATTR = "tvm_swap.param_kinds"
LOSSES = ("cross_entropy", "mse", "output")
OWN_LOSS = "output"           # the model computes its loss itself (transformers' `labels=`): no labels input
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")
ADAM_KINDS = ("adam", "adamw")
LABELS_NAME = "labels"


@dataclass(frozen=True)
class Optimizer:
    """Hyper-parameters of one of OPTIMIZERS (torch's names and defaults)."""
    kind: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9          # "momentum" only
    nesterov: bool = False         # "momentum" only
    betas: tuple = (0.9, 0.999)    # "adam" / "adamw" only
    eps: float = 1e-8              # "adam" / "adamw" only
    weight_decay: float = 0.0      # L2 penalty added to the gradient, as torch.optim.SGD / Adam; "adamw":
                                   # decoupled (param *= 1 - lr * weight_decay first), as torch.optim.AdamW

    def state_of(self, name: str, shape, dtype) -> dict:
        """Initial per-parameter state, name -> array."""
        zeros = np.zeros(tuple(shape), dtype)
        if self.kind == "momentum":
            return {f"{name}__momentum": zeros}
        if self.kind in ADAM_KINDS:
            return {f"{name}__adam_m": zeros, f"{name}__adam_v": zeros.copy()}
        return {}

    def shared_state(self, dtype) -> dict:
        """Initial state shared by all parameters: Adam's running beta powers for bias correction, shaped
        (1,) rather than () because SwapModule's param loading turns 0-d arrays into (1,)."""
        if self.kind in ADAM_KINDS:
            return {"adam__beta1_power": np.ones((1,), dtype), "adam__beta2_power": np.ones((1,), dtype)}
        return {}


def train_step(mod, params=None, loss: str = "cross_entropy", optimizer: str | Optimizer = "sgd",
               lr: float = 0.01, func_name: str = "main", num_inputs: int | None = None,
               label_shape=None, label_dtype: str | None = None, output_index: int = 0, label_name: str = "labels",
               trainable=None, frozen=(), **optimizer_options):
    """-> (IRModule with the one function `main`, {name: np.ndarray} params then optimizer state).

    mod: an IRModule whose `func_name(*inputs, *params)` returns the prediction (a tensor, or a tuple:
         `output_index` picks the prediction). num_inputs defaults to the `num_input` attribute, else 1.
    params: {name: array} (or a list in parameter order) for the params; needed only to be returned
         with the state (the state's shapes come from the function), so None gives the state alone.
    loss: "cross_entropy" (prediction = logits (..., C), labels int64 (...), mean over all positions,
         torch's F.cross_entropy with ignore_index -100) or "mse" (labels shaped like the prediction,
         mean over all elements, torch's F.mse_loss). label_shape / label_dtype override the labels var,
         label_name names it. "output": the model's output (`output_index`) is the loss itself, a float
         scalar, as a transformers model returns it when called with `labels=`; its labels are one of the
         model's own inputs and the step adds none.
    optimizer: "sgd" | "momentum" | "adam" | "adamw" (lr and **optimizer_options: momentum, nesterov, betas, eps,
         weight_decay), or an Optimizer.
    trainable: names of the params to update (default: every floating-point param the loss reads);
         frozen: names to keep fixed.
    """
    import tvm
    from tvm import relax

    gradients.register()          # idempotent; also done on import below
    opt = _optimizer(optimizer, lr, optimizer_options)
    if loss not in LOSSES:
        raise TvmSwapError(f"unknown loss {loss!r}; choose one of {', '.join(LOSSES)}")
    if not isinstance(mod, tvm.IRModule):
        raise TvmSwapError(f"train_step needs a Relax tvm.IRModule, got {type(mod).__name__}")
    fwd = relax_function(mod, func_name, TvmSwapError)
    if num_inputs is None:
        attr = fwd.attrs.get("num_input") if fwd.attrs is not None else None
        num_inputs = int(attr) if attr is not None else 1
    if not 0 <= num_inputs <= len(fwd.params):
        raise TvmSwapError(f"num_inputs={num_inputs} but {func_name!r} has {len(fwd.params)} parameters")

    loss_mod = _loss_module(func_name, fwd, num_inputs, loss, output_index, label_shape, label_dtype, label_name)
    loss_fn = loss_mod["loss"]
    n_data = num_inputs + (loss != OWN_LOSS)       # inputs + labels
    weights = list(loss_fn.params[n_data:])
    used = _used_vars(loss_fn)
    kept = [w for w in weights if w in used]       # unused params are dropped from the step
    if len(kept) < len(weights):
        loss_fn = relax.Function([*loss_fn.params[:n_data], *kept], loss_fn.body, loss_fn.ret_ty)
        loss_mod = tvm.IRModule({"loss": loss_fn})
    chosen = _trainable(kept, trainable, frozen)
    dtypes = {str(w.ty.dtype.dtype) for w in chosen}
    if len(dtypes) > 1:
        raise UnsupportedModelError(f"trainable params mix dtypes {sorted(dtypes)}; train_step needs one "
                                    "floating-point dtype (freeze or cast the others)")
    step = step_from_loss(loss_fn, n_data, opt, chosen, split=True)
    state = _initial_state(step, n_data, params, weights, chosen, opt)
    return step, state


def step_from_loss(loss_func, num_inputs: int, optimizer: Optimizer, trainable=None, split: bool = False):
    """The one training-step builder (train_step and the bundled examples use it): an IRModule whose only
    function `main(*inputs, *params, *optimizer_state) -> (loss, *new trainable params, *new state)` runs
    `loss_func(*inputs, *params) -> scalar` (a relax.Function with one dataflow block), its gradient and the
    optimizer update, inlined into one dataflow function; attrs num_input, tvm_swap.updates and
    tvm_swap.param_kinds. trainable: the params (relax Vars of loss_func) to update; default all. split:
    differentiate only the bindings that depend on a trainable param (grad_scope: masks, position ids and
    other integer work go to a prelude that needs no gradient)."""
    import tvm

    params = list(loss_func.params)
    kept = params[num_inputs:]
    chosen = kept if trainable is None else list(trainable)
    if split:
        parts = split_by_dependence(loss_func, chosen)
        adjoint = _differentiate(tvm.IRModule({"loss": parts.core}), chosen)
        return _assemble(adjoint, params[:num_inputs], kept, chosen, optimizer, parts.prelude)
    loss_mod = tvm.IRModule({"loss": loss_func.without_attr("global_symbol")})
    return _assemble(_differentiate(loss_mod, chosen), params[:num_inputs], kept, chosen, optimizer)


# ---------------------------------------------------------------- pieces
def _optimizer(optimizer, lr, options) -> Optimizer:
    if isinstance(optimizer, Optimizer):
        return optimizer
    if optimizer not in OPTIMIZERS:
        raise TvmSwapError(f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}")
    allowed = {"momentum": {"momentum", "nesterov", "weight_decay"}, "adam": {"betas", "eps", "weight_decay"},
               "adamw": {"betas", "eps", "weight_decay"}, "sgd": {"weight_decay"}}[optimizer]
    bad = sorted(set(options) - allowed)
    if bad:
        raise TvmSwapError(f"optimizer {optimizer!r} takes {sorted(allowed)} besides lr, not {bad}")
    if optimizer == "adamw":
        options = {"weight_decay": 0.01, **options}      # torch.optim.AdamW's default
    return Optimizer(kind=optimizer, lr=float(lr), **options)


def _static_dims(ty, what) -> list[int]:
    from tvm import tirx

    if not hasattr(ty, "shape") or ty.shape is None or not all(isinstance(d, tirx.IntImm) for d in ty.shape.values):
        raise UnsupportedModelError(f"{what} needs a static shape, got {ty}; import the model with fixed shapes")
    return [int(d) for d in ty.shape.values]


def _prediction_ty(fwd, output_index):
    from tvm import relax

    ret = fwd.ret_ty
    if isinstance(ret, relax.TupleType):
        if not -len(ret.fields) <= output_index < len(ret.fields):
            raise TvmSwapError(f"output_index={output_index} but the model returns {len(ret.fields)} outputs")
        ret = ret.fields[output_index]
        return ret, output_index
    if not isinstance(ret, relax.TensorType):
        raise UnsupportedModelError(f"the model returns {ret}; train_step needs a tensor prediction")
    return ret, None


def _labels_var(loss, pred_ty, label_shape, label_dtype, taken, name=LABELS_NAME):
    from tvm import relax

    dims = _static_dims(pred_ty, "the prediction")
    if loss == "cross_entropy":
        if len(dims) < 2:
            raise UnsupportedModelError(f"cross_entropy needs logits of shape (..., classes), got {dims}")
        shape, dtype = dims[:-1], "int64"
    else:
        shape, dtype = dims, str(pred_ty.dtype.dtype)
    shape = list(label_shape) if label_shape is not None else shape
    return relax.Var(_unique(name, taken), relax.TensorType(shape, label_dtype or dtype))


def _emit_loss(bb, loss, pred, labels):
    from tvm.relax import op

    dims = [int(d) for d in pred.ty.shape.values]
    if loss == "cross_entropy":
        if len(dims) > 2:                           # (B, S, C) -> (B*S, C): nll_loss wants (N, C)
            n = int(np.prod(dims[:-1]))
            pred = bb.emit(op.reshape(pred, [n, dims[-1]]))
            labels = bb.emit(op.reshape(labels, [n]))
        logp = bb.emit(op.nn.log_softmax(pred, axis=-1))
        return bb.emit(op.nn.nll_loss(logp, labels, reduction="mean"))
    diff = bb.emit(op.subtract(pred, labels))
    return bb.emit(op.mean(op.multiply(diff, diff)))


def _check_own_loss(pred_ty, label_shape, label_dtype) -> None:
    """loss="output": the picked output must be a float scalar (the model's loss), and there are no labels."""
    if label_shape is not None or label_dtype is not None:
        raise TvmSwapError('loss="output" trains on the model\'s own loss output and adds no labels input: '
                           "drop label_shape / label_dtype (pass the labels to the model as one of its inputs)")
    dims = _static_dims(pred_ty, "the model's loss output")
    if any(d != 1 for d in dims) or not str(pred_ty.dtype.dtype).startswith("float"):
        raise TvmSwapError(f'loss="output" needs the model to return its loss as a float scalar, but output is '
                           f"{pred_ty.dtype.dtype}{dims}; pick the loss with output_index (e.g. return "
                           "model(input_ids=ids, labels=labels).loss), or use loss=\"cross_entropy\" on logits")


def _loss_module(func_name, fwd, num_inputs, loss, output_index, label_shape, label_dtype, label_name=LABELS_NAME):
    """IRModule with only `loss(*inputs, labels, *params) -> scalar`: the forward inlined, one dataflow
    block, training-mode decompositions applied."""
    import tvm
    from tvm import relax

    pred_ty, index = _prediction_ty(fwd, output_index)
    if loss == OWN_LOSS:
        _check_own_loss(pred_ty, label_shape, label_dtype)
        labels = []
    else:
        labels = [_labels_var(loss, pred_ty, label_shape, label_dtype, {p.name for p in fwd.params}, label_name)]
    bb = relax.BlockBuilder()
    callee = fwd
    for key in ("global_symbol", "num_input", "params", "tvm_swap.updates", "tvm_swap.param_kinds"):
        if callee.attrs is not None and key in callee.attrs:
            callee = callee.without_attr(key)
    fwd_gv = bb.add_func(callee, "forward")
    ps = [relax.Var(p.name, p.ty) for p in fwd.params]
    inputs, weights = ps[:num_inputs], ps[num_inputs:]
    with bb.function("loss", [*inputs, *labels, *weights]):
        with bb.dataflow():
            out = bb.emit(relax.Call(fwd_gv, ps))
            pred = bb.emit(relax.TupleGetItem(out, index)) if index is not None else out
            if loss == OWN_LOSS:                    # a (1,)-shaped loss as the scalar Gradient wants
                value = bb.emit(relax.op.reshape(pred, [])) if pred_ty.ndim else pred
            else:
                value = _emit_loss(bb, loss, pred, labels[0])
            gv = bb.emit_output(value)
        bb.emit_func_output(gv)
    seq = tvm.transform.Sequential([
        *_inline_passes("loss"),
        relax.transform.DecomposeOpsForTraining("loss"),
        relax.transform.CanonicalizeBindings(),     # folds tuple-of-known-fields lookups ...
        relax.transform.DeadCodeElimination(["loss"]),   # ... so unused BN running-stat updates go
    ])
    try:
        out_mod = seq(bb.get())
    except Exception as e:  # TVM raises TVMError / ValueError with C++ traces
        raise UnsupportedModelError(f"could not prepare {func_name!r} for training: "
                                    f"{str(e).strip().splitlines()[-1]}") from None
    func = out_mod["loss"]
    blocks = func.body.blocks
    if len(blocks) != 1 or not isinstance(blocks[0], relax.DataflowBlock):
        raise UnsupportedModelError(f"{func_name!r} does not reduce to one dataflow block (it has control flow "
                                    "or impure calls); relax.transform.Gradient cannot differentiate it")
    return tvm.IRModule({"loss": func})


def _used_vars(func) -> set:
    from tvm import relax

    seen = set()

    def visit(e):
        if isinstance(e, relax.Var):
            seen.add(e)

    relax.analysis.post_order_visit(func.body, visit)
    return seen


def _trainable(kept, trainable, frozen):
    names = [w.name for w in kept]
    frozen = set(frozen or ())
    if trainable is not None:
        unknown = sorted(set(trainable) - set(names))
        if unknown:
            raise TvmSwapError(f"trainable names {unknown}, which the loss does not read; params: {names}")
        chosen = [w for w in kept if w.name in set(trainable)]
    else:
        chosen = [w for w in kept if "float" in str(w.ty.dtype.dtype)]
    chosen = [w for w in chosen if w.name not in frozen]
    if not chosen:
        raise TvmSwapError("no parameter to train: the loss reads no floating-point parameter "
                           f"(params it reads: {names}, frozen: {sorted(frozen)})")
    return chosen


def _ops_without_gradient(func) -> list[str]:
    import tvm
    from tvm import relax

    missing = set()

    def visit(e):
        if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op):
            if e.op.get_attr("FPrimalGradient") is None:
                missing.add(e.op.name)

    relax.analysis.post_order_visit(func.body, visit)
    return sorted(missing)


def _differentiate(loss_mod, chosen):
    from tvm import relax

    try:
        return relax.transform.Gradient("loss", require_grads=chosen)(loss_mod)["loss_adjoint"]
    except Exception as e:  # TVM raises TVMError with a C++ trace
        msg = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        missing = _ops_without_gradient(loss_mod["loss"])
        if missing:
            raise UnsupportedModelError(
                f"no gradient for operator(s) {', '.join(missing)} (TVM 0.27 has none and tvm_swap.training.gradients "
                "does not add one); register one with tvm.relax.op.register_gradient, or freeze the params "
                f"whose gradient passes through them (TVM said: {msg})") from None
        raise UnsupportedModelError(f"relax.transform.Gradient failed: {msg}") from None


def _update(bb, opt, w, g, state, shared):
    """Emit torch's update of one parameter; returns (new param, [new per-param state])."""
    from tvm import relax
    from tvm.relax import op

    dt = str(w.ty.dtype.dtype)
    wname = w.name

    def c(v):
        return relax.const(float(v), dt)

    if opt.weight_decay and opt.kind == "adamw":      # decoupled: shrink the param, leave the gradient
        w = bb.emit(op.multiply(w, c(1 - opt.lr * opt.weight_decay)))
    elif opt.weight_decay:
        g = bb.emit(op.add(g, op.multiply(c(opt.weight_decay), w)))
    if opt.kind == "sgd":
        return bb.emit(op.subtract(w, op.multiply(c(opt.lr), g)), wname + "_new"), []
    if opt.kind == "momentum":
        v = bb.emit(op.add(op.multiply(c(opt.momentum), state[0]), g), state[0].name + "_new")
        d = bb.emit(op.add(g, op.multiply(c(opt.momentum), v))) if opt.nesterov else v
        return bb.emit(op.subtract(w, op.multiply(c(opt.lr), d)), wname + "_new"), [v]
    b1, b2 = opt.betas
    b1p, b2p = (op.reshape(p, []) for p in shared)          # (1,) -> () so a 0-d param keeps its shape
    m = bb.emit(op.add(op.multiply(c(b1), state[0]), op.multiply(c(1 - b1), g)), state[0].name + "_new")
    v = bb.emit(op.add(op.multiply(c(b2), state[1]), op.multiply(c(1 - b2), op.multiply(g, g))),
                state[1].name + "_new")
    step_size = op.divide(c(opt.lr), op.subtract(c(1), b1p))             # lr / (1 - beta1^t)
    denom = op.add(op.divide(op.sqrt(v), op.sqrt(op.subtract(c(1), b2p))), c(opt.eps))
    new_w = bb.emit(op.subtract(w, op.multiply(step_size, op.divide(m, denom))), wname + "_new")
    return new_w, [m, v]


def _assemble(adjoint, data_params, kept, chosen, opt, prelude=None):
    """main(*inputs, labels, *kept, *state) -> (loss, *new chosen, *new state), with the attrs. prelude:
    the loss's part that needs no gradient (grad_scope), whose results are the adjoint's last arguments."""
    import tvm
    from tvm import relax

    bb = relax.BlockBuilder()
    adj_gv = bb.add_func(adjoint.without_attr("global_symbol"), "loss_adjoint")
    pre_gv = bb.add_func(prelude, "loss_prelude") if prelude is not None else None
    data = [relax.Var(p.name, p.ty) for p in data_params]
    mine = {w: relax.Var(w.name, w.ty) for w in kept}
    dt = str(chosen[0].ty.dtype.dtype)
    taken = {v.name for v in data} | {w.name for w in kept}
    per_param = {}
    for w in chosen:
        per_param[w] = [relax.Var(_unique(n, taken), relax.TensorType(a.shape, a.dtype))
                        for n, a in opt.state_of(w.name, _static_dims(w.ty, w.name), dt).items()]
    shared = [relax.Var(_unique(n, taken), relax.TensorType(a.shape, a.dtype))
              for n, a in opt.shared_state(dt).items()]
    state_vars = [s for w in chosen for s in per_param[w]] + shared
    params = [*data, *[mine[w] for w in kept], *state_vars]
    with bb.function("main", params):
        with bb.dataflow():
            args = [*data, *[mine[w] for w in kept]]
            if pre_gv is not None:
                pre = bb.emit(relax.Call(pre_gv, args))
                args += [bb.emit(relax.TupleGetItem(pre, i)) for i in range(len(prelude.ret_ty.fields))]
            res = bb.emit(relax.Call(adj_gv, args))
            loss = bb.emit(relax.TupleGetItem(res, 0), "loss")
            grads = bb.emit(relax.TupleGetItem(res, 1))
            new_shared = []
            if opt.kind in ADAM_KINDS:
                b1, b2 = opt.betas
                new_shared = [bb.emit(relax.op.multiply(shared[0], relax.const(b1, dt)), shared[0].name + "_new"),
                              bb.emit(relax.op.multiply(shared[1], relax.const(b2, dt)), shared[1].name + "_new")]
            new_params, new_state = [], []
            for i, w in enumerate(chosen):
                g = bb.emit(relax.TupleGetItem(grads, i))
                nw, ns = _update(bb, opt, mine[w], g, per_param[w], new_shared)
                new_params.append(nw)
                new_state += ns
            gv = bb.emit_output(relax.Tuple([loss, *new_params, *new_state, *new_shared]))
        bb.emit_func_output(gv)
    mod = tvm.transform.Sequential(_inline_passes("main"))(bb.get())
    n_data, n_kept = len(data), len(kept)
    index = {w: n_data + k for k, w in enumerate(kept)}
    updates = [[1 + i, index[w]] for i, w in enumerate(chosen)]
    first_state = n_data + n_kept
    updates += [[1 + len(chosen) + j, first_state + j] for j in range(len(state_vars))]
    kinds = {s.name: "optimizer_state" for s in state_vars}
    func = mod["main"].with_attr("num_input", n_data).with_attr(UPDATES_ATTR, updates)
    if kinds:
        func = func.with_attr(PARAM_KINDS_ATTR, kinds)
    return tvm.IRModule({"main": func})


def _inline_passes(func_name: str) -> list:
    """Make `func_name` one dataflow function: inline its callees (notes/tvm-0.27.md §2), drop the rest."""
    from tvm import relax

    return [relax.transform.InlinePrivateFunctions(), relax.transform.DeadCodeElimination([func_name]),
            relax.transform.ConvertToDataflow(), relax.transform.CanonicalizeBindings()]


def _unique(name, taken: set) -> str:
    out, k = name, 1
    while out in taken:
        out, k = f"{name}_{k}", k + 1
    taken.add(out)
    return out


def _initial_state(step, n_data, params, weights, chosen, opt) -> dict:
    """{name: array} for main's params after the data: the given param values, then the zero/one state."""
    func = step["main"]
    names = [w.name for w in weights]
    if params is None:
        given = {}
    elif isinstance(params, dict):
        given = dict(params)
    else:
        params = list(params)
        if len(params) != len(names):
            raise TvmSwapError(f"got {len(params)} params, the model has {len(names)}: {names}")
        given = dict(zip(names, params))
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise TvmSwapError(f"unknown params {unknown}; the model's params are {names}")
    dt = str(chosen[0].ty.dtype.dtype)
    init = {}
    for w in chosen:
        init.update(opt.state_of(w.name, _static_dims(w.ty, w.name), dt))
    init_values = list(init.values()) + list(opt.shared_state(dt).values())
    out = {}
    state_params = func.params[len(func.params) - len(init_values):]
    for p in func.params[n_data:len(func.params) - len(init_values)]:
        if p.name in given:
            out[p.name] = _as_numpy(given[p.name])
    for p, v in zip(state_params, init_values):
        out[p.name] = v
    return out


def _as_numpy(v):
    if isinstance(v, np.ndarray):
        return v
    if hasattr(v, "numpy"):
        return v.numpy()
    return np.asarray(v)


try:                                  # our gradients are in place as soon as training is imported
    gradients.register()
except ImportError:                   # no TVM: train_step will say so when called
    pass
