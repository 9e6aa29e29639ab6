"""tvm_swap.training.train_step: the one-function step's signature and attrs, each optimizer against a numpy
re-implementation of torch's formulas over chained steps, both losses, parameter selection, and errors."""
from __future__ import annotations

import numpy as np
import pytest

import tvm
from tvm import relax  # noqa: E402

from tvm_swap.errors import TvmSwapError, UnsupportedModelError  # noqa: E402
from tvm_swap.training.step import train_step  # noqa: E402
from shared_fixtures import fixture_dir, needs_fixtures  # noqa: E402

FIXTURES = fixture_dir("mxnet")
RNG = np.random.default_rng(0)
N, D, C = 6, 5, 4


def _linear(act=None, extra_param=False):
    """main(x, w, b[, unused]) = act(x @ w + b): a model whose gradient numpy can write down."""
    x = relax.Var("x", relax.TensorType([N, D], "float32"))
    w = relax.Var("w", relax.TensorType([D, C], "float32"))
    b = relax.Var("b", relax.TensorType([C], "float32"))
    ps = [x, w, b] + ([relax.Var("unused", relax.TensorType([3], "float32"))] if extra_param else [])
    bb = relax.BlockBuilder()
    with bb.function("main", ps):
        with bb.dataflow():
            y = bb.emit(relax.op.add(relax.op.matmul(x, w), b))
            if act is not None:
                y = bb.emit(act(y))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    mod = bb.get()
    return tvm.IRModule({"main": mod["main"].with_attr("num_input", 1)})


def _params():
    return {"w": RNG.standard_normal((D, C)).astype("float32"), "b": RNG.standard_normal(C).astype("float32")}


def _vm(mod):
    return relax.VirtualMachine(relax.build(mod, target="llvm"), tvm.cpu())["main"]


def _run_steps(step, state, data, steps=3):
    """Chain `steps` calls the way SwapModule does: results named by tvm_swap.updates replace params."""
    f = step["main"]
    names = [p.name for p in f.params]
    n_in = int(f.attrs["num_input"])
    updates = {int(o): int(p) for o, p in f.attrs["tvm_swap.updates"]}
    call = _vm(step)
    values = dict(state)
    losses = []
    for _ in range(steps):
        out = call(*[tvm.runtime.tensor(a) for a in data], *[tvm.runtime.tensor(values[n]) for n in names[n_in:]])
        out = [o.numpy() for o in out]
        losses.append(float(out[0]))
        for o, p in updates.items():
            values[names[p]] = out[o]
    return losses, values


def _softmax_ce_grad(logits, labels):
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(len(labels)), labels]).mean()
    g = p.copy()
    g[np.arange(len(labels)), labels] -= 1
    return loss, g / len(labels)


def _numpy_steps(params, x, labels, kind, lr, steps=3, momentum=0.9, nesterov=False, betas=(0.9, 0.999),
                 eps=1e-8, weight_decay=0.0):
    """torch.optim.SGD / Adam on the linear model with cross entropy, in float64."""
    p = {k: v.astype("float64") for k, v in params.items()}
    state = {k: np.zeros_like(v) for k, v in p.items()}
    state2 = {k: np.zeros_like(v) for k, v in p.items()}
    losses = []
    for t in range(1, steps + 1):
        loss, gz = _softmax_ce_grad(x @ p["w"] + p["b"], labels)
        losses.append(loss)
        grads = {"w": x.T @ gz, "b": gz.sum(axis=0)}
        for k in p:
            g = grads[k] + weight_decay * p[k]
            if kind == "sgd":
                p[k] = p[k] - lr * g
            elif kind == "momentum":
                state[k] = momentum * state[k] + g
                d = g + momentum * state[k] if nesterov else state[k]
                p[k] = p[k] - lr * d
            else:
                b1, b2 = betas
                state[k] = b1 * state[k] + (1 - b1) * g
                state2[k] = b2 * state2[k] + (1 - b2) * g * g
                denom = np.sqrt(state2[k]) / np.sqrt(1 - b2 ** t) + eps
                p[k] = p[k] - lr / (1 - b1 ** t) * state[k] / denom
    return losses, p


OPTIMIZER_CASES = [
    ("sgd", {}),
    ("sgd", {"weight_decay": 0.1}),
    ("momentum", {"momentum": 0.9}),
    ("momentum", {"momentum": 0.8, "nesterov": True}),
    ("adam", {}),
    ("adam", {"betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.01}),
]


@pytest.mark.parametrize("kind,options", OPTIMIZER_CASES)
def test_optimizer_matches_torch_formulas(kind, options):
    params = _params()
    x = RNG.standard_normal((N, D)).astype("float32")
    labels = RNG.integers(0, C, N).astype("int64")
    lr = 0.1
    step, state = train_step(_linear(), params, loss="cross_entropy", optimizer=kind, lr=lr, **options)
    got, values = _run_steps(step, state, [x, labels])
    want, want_params = _numpy_steps(params, x.astype("float64"), labels, kind, lr, **options)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for k in ("w", "b"):
        np.testing.assert_allclose(values[k], want_params[k], rtol=1e-4, atol=1e-5)
    assert got[2] < got[0]          # it learns


def test_step_signature_and_attrs():
    step, state = train_step(_linear(), _params(), optimizer="adam", lr=1e-3)
    assert [gv.name_hint for gv in step.functions] == ["main"]
    f = step["main"]
    names = [p.name for p in f.params]
    assert names == ["x", "labels", "w", "b", "w__adam_m", "w__adam_v", "b__adam_m", "b__adam_v",
                     "adam__beta1_power", "adam__beta2_power"]
    assert int(f.attrs["num_input"]) == 2
    assert [[int(a) for a in pair] for pair in f.attrs["tvm_swap.updates"]] == [[1 + i, 2 + i] for i in range(8)]
    kinds = {str(k): str(v) for k, v in f.attrs["tvm_swap.param_kinds"].items()}
    assert kinds == {n: "optimizer_state" for n in names[4:]}
    assert list(state) == names[2:]
    assert state["w__adam_m"].shape == (D, C) and not state["w__adam_m"].any()
    assert state["adam__beta1_power"].tolist() == [1.0]
    ret = f.ret_ty
    assert len(ret.fields) == 1 + 8 and ret.fields[0].ndim == 0


def test_graph_extraction_sees_updates_and_optimizer_state():
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax

    step, _ = train_step(_linear(), _params(), optimizer="momentum", lr=0.1)
    g = graph_from_relax(lower(step, "llvm"))
    kinds = {t.name: t.kind for t in g.tensors if t.kind in ("input", "param", "optimizer_state")}
    assert kinds["x"] == kinds["labels"] == "input"
    assert kinds["w"] == kinds["b"] == "param"
    assert kinds["w__momentum"] == kinds["b__momentum"] == "optimizer_state"


def test_mse_loss_is_torch_mean():
    params = _params()
    x = RNG.standard_normal((N, D)).astype("float32")
    y = RNG.standard_normal((N, C)).astype("float32")
    step, state = train_step(_linear(), params, loss="mse", optimizer="sgd", lr=0.05)
    labels_ty = step["main"].params[1].ty
    assert str(labels_ty.dtype.dtype) == "float32" and [int(d) for d in labels_ty.shape.values] == [N, C]
    got, values = _run_steps(step, state, [x, y], steps=2)
    p = {k: v.astype("float64") for k, v in params.items()}
    for t in range(2):
        pred = x @ p["w"] + p["b"]
        assert got[t] == pytest.approx(((pred - y) ** 2).mean(), rel=1e-5)
        gz = 2 * (pred - y) / pred.size
        p = {"w": p["w"] - 0.05 * x.T @ gz, "b": p["b"] - 0.05 * gz.sum(axis=0)}
    np.testing.assert_allclose(values["w"], p["w"], rtol=1e-4, atol=1e-6)


def test_cross_entropy_over_sequence_positions_with_ignored_labels():
    """(B, S, C) logits are flattened; label -100 is ignored (torch's default ignore_index)."""
    B, S = 2, 3
    x = relax.Var("x", relax.TensorType([B, S, D], "float32"))
    w = relax.Var("w", relax.TensorType([D, C], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(x, w))
        bb.emit_func_output(out)
    mod = tvm.IRModule({"main": bb.get()["main"].with_attr("num_input", 1)})
    wv = RNG.standard_normal((D, C)).astype("float32")
    xv = RNG.standard_normal((B, S, D)).astype("float32")
    labels = RNG.integers(0, C, (B, S)).astype("int64")
    labels[0, 1] = labels[1, 2] = -100
    step, state = train_step(mod, {"w": wv}, optimizer="sgd", lr=0.5)
    assert [int(d) for d in step["main"].params[1].ty.shape.values] == [B, S]
    got, values = _run_steps(step, state, [xv, labels], steps=1)
    keep = labels.reshape(-1) != -100
    logits = (xv.reshape(-1, D) @ wv.astype("float64"))[keep]
    loss, gz = _softmax_ce_grad(logits, labels.reshape(-1)[keep])
    assert got[0] == pytest.approx(loss, rel=1e-5)
    np.testing.assert_allclose(values["w"], wv - 0.5 * xv.reshape(-1, D)[keep].T @ gz, rtol=1e-4, atol=1e-6)


def test_unused_params_are_dropped_and_frozen_params_kept_fixed():
    step, state = train_step(_linear(extra_param=True), {**_params(), "unused": np.zeros(3, "float32")},
                             optimizer="momentum", lr=0.1, frozen=["b"])
    f = step["main"]
    assert [p.name for p in f.params] == ["x", "labels", "w", "b", "w__momentum"]
    assert [[int(a) for a in p] for p in f.attrs["tvm_swap.updates"]] == [[1, 2], [2, 4]]
    assert "unused" not in state
    step2, _ = train_step(_linear(), _params(), trainable=["b"])
    assert [[int(a) for a in p] for p in step2["main"].attrs["tvm_swap.updates"]] == [[1, 3]]


def test_tuple_output_picks_the_prediction():
    x = relax.Var("x", relax.TensorType([N, D], "float32"))
    w = relax.Var("w", relax.TensorType([D, C], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(relax.op.matmul(x, w))
            out = bb.emit_output(relax.Tuple([relax.op.sum(y), y]))
        bb.emit_func_output(out)
    mod = tvm.IRModule({"main": bb.get()["main"].with_attr("num_input", 1)})
    step, _ = train_step(mod, None, loss="mse", output_index=1)
    assert [int(d) for d in step["main"].params[1].ty.shape.values] == [N, C]
    with pytest.raises(TvmSwapError, match="output_index=5"):
        train_step(mod, None, output_index=5)


@needs_fixtures("mxnet")
def test_mxnet_batchnorm_model_trains_on_batch_statistics():
    """Running statistics are not read in training mode, so they leave the step."""
    from tvm_swap.frontends import from_mxnet

    mod, params = from_mxnet(f"{FIXTURES}/small_cnn-symbol.json", params=f"{FIXTURES}/small_cnn-0000.params",
                             shapes={"data": (2, 3, 32, 32)})
    step, state = train_step(mod, params, optimizer="sgd")
    names = [p.name for p in step["main"].params]
    assert not [n for n in names if "running" in n]
    assert "smallcnn_batchnorm0_gamma" in names and len(state) == len(params) - 4
    ops = set()
    relax.analysis.post_order_visit(step["main"].body, lambda e: ops.add(e.op.name) if isinstance(
        e, relax.Call) and isinstance(e.op, tvm.ir.Op) else None)
    assert "relax.nn.batch_norm" not in ops and "relax.variance" in ops


def test_bad_arguments_are_clear_errors():
    mod, params = _linear(), _params()
    with pytest.raises(TvmSwapError, match="unknown loss 'hinge'"):
        train_step(mod, params, loss="hinge")
    with pytest.raises(TvmSwapError, match="unknown optimizer 'rmsprop'"):
        train_step(mod, params, optimizer="rmsprop")
    with pytest.raises(TvmSwapError, match="betas"):
        train_step(mod, params, optimizer="sgd", betas=(0.9, 0.99))
    with pytest.raises(TvmSwapError, match="no function 'forward'"):
        train_step(mod, params, func_name="forward")
    with pytest.raises(TvmSwapError, match="unknown params"):
        train_step(mod, {"w2": params["w"]})
    with pytest.raises(TvmSwapError, match="trainable names"):
        train_step(mod, params, trainable=["nope"])
    with pytest.raises(TvmSwapError, match="no parameter to train"):
        train_step(mod, params, frozen=["w", "b"])
    with pytest.raises(TvmSwapError, match="tvm.IRModule"):
        train_step("model.onnx", params)


def test_missing_gradient_names_the_operator():
    mod = _linear(act=lambda y: relax.op.nn.leakyrelu(y, 0.1))
    with pytest.raises(UnsupportedModelError, match=r"no gradient for operator\(s\) relax\.nn\.leakyrelu"):
        train_step(mod, _params())


def test_importing_training_registers_the_gradients():
    import subprocess
    import sys

    code = ("import tvm; gelu = tvm.ir.Op.get('relax.nn.gelu'); assert gelu.get_attr('FPrimalGradient') is None; "
            "import tvm_swap.training; assert gelu.get_attr('FPrimalGradient') is not None")
    subprocess.run([sys.executable, "-c", code], check=True)
