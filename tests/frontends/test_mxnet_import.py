"""MXNet importer: every shipped fixture, Gluon-style architectures written here, each operator, the .params
reader, and the errors a user gets for bad input."""
from __future__ import annotations

import json
import math
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import tvm
from tvm import relax  # noqa: E402

from tvm_swap.errors import TvmSwapError, UnsupportedModelError  # noqa: E402
from tvm_swap.frontends import find_mxnet_params, from_mxnet, from_onnx, load_model  # noqa: E402
from tvm_swap.frontends.mxnet import random_params, supported_operators  # noqa: E402
from tvm_swap.frontends.mxnet_ops import infer_reshape  # noqa: E402
from tvm_swap.frontends.mxnet_params import (  # noqa: E402
    ParamsFileError, dump_params, load_params, parse_params, strip_prefixes)

DATA = Path(__file__).resolve().parents[1] / "data" / "mxnet"
sys.path.insert(0, str(DATA))
import make_symbols  # noqa: E402
from shared_fixtures import fixture_dir  # noqa: E402
from shared_fixtures import needs_fixtures as needs_mxnet_fixtures  # noqa: E402
import numpy_reference as ref  # noqa: E402

FIXTURES = fixture_dir("mxnet")
needs_fixtures = needs_mxnet_fixtures("mxnet")
WITH_PARAMS = ["mlp", "mlp_symbolic", "small_cnn", "lstm_lm_small", "transformer_encoder"]


def run_vm(mod, inputs: list, params: dict):
    """Build with the default llvm pipeline and run main(inputs..., params in signature order)."""
    f = mod["main"]
    k = int(f.attrs["num_input"])
    assert k == len(inputs)
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), tvm.cpu())
    args = [tvm.runtime.tensor(np.ascontiguousarray(x)) for x in inputs]
    args += [tvm.runtime.tensor(params[p.name]) for p in f.params[k:]]
    out = vm["main"](*args)
    return [out.numpy()] if hasattr(out, "numpy") else [o.numpy() for o in out]


def param_shapes(mod) -> dict:
    f = mod["main"]
    k = int(f.attrs["num_input"])
    return {p.name: tuple(int(d) for d in p.ty.shape.values) for p in f.params[k:]}


# ------------------------------------------------------------------ shipped fixtures
@needs_fixtures
@pytest.mark.parametrize("name", WITH_PARAMS)
def test_fixture_matches_mxnet_output(name):
    expected = np.load(FIXTURES / f"{name}.expected.npz")
    mod, params = from_mxnet(FIXTURES / f"{name}-symbol.json", FIXTURES / f"{name}-0000.params",
                             shapes={"data": expected["data"].shape})
    f = mod["main"]
    assert int(f.attrs["num_input"]) == 1 and f.params[0].name == "data"
    # Parameters are function parameters, not constants, and the dict holds exactly those.
    assert [p.name for p in f.params[1:]] == list(params)
    file_params = strip_prefixes(load_params(FIXTURES / f"{name}-0000.params"))
    for k, v in params.items():
        np.testing.assert_array_equal(v, file_params[k])
    (out,) = run_vm(mod, [expected["data"]], params)
    np.testing.assert_allclose(out, expected["output_0"], rtol=1e-5, atol=1e-5)


@needs_fixtures
@pytest.mark.parametrize("name", WITH_PARAMS)
def test_numpy_reference_matches_mxnet_output(name):
    """The float64 reference the extra models are checked against reproduces MXNet itself."""
    expected = np.load(FIXTURES / f"{name}.expected.npz")
    params = strip_prefixes(load_params(FIXTURES / f"{name}-0000.params"))
    (out,) = ref.run(str(FIXTURES / f"{name}-symbol.json"), {"data": expected["data"]}, params)
    np.testing.assert_allclose(out, expected["output_0"], rtol=1e-5, atol=2e-6)


@needs_fixtures
def test_param_order_is_deterministic_and_follows_nodes():
    sym = FIXTURES / "small_cnn-symbol.json"
    a, _ = from_mxnet(sym, FIXTURES / "small_cnn-0000.params", shapes={"data": (2, 3, 32, 32)})
    b, _ = from_mxnet(json.loads(sym.read_text()), FIXTURES / "small_cnn-0000.params",
                      shapes={"data": (2, 3, 32, 32)})
    names = [p.name for p in a["main"].params]
    assert names == [p.name for p in b["main"].params]
    order = [n["name"] for n in json.loads(sym.read_text())["nodes"] if n["op"] == "null"]
    assert names == [n for n in order if n in names]
    assert names[-4:] == ["smallcnn_dense0_weight", "smallcnn_dense0_bias",
                          "smallcnn_dense1_weight", "smallcnn_dense1_bias"]


@needs_fixtures
def test_mlp_symbolic_label_is_not_an_input():
    mod, params = from_mxnet(FIXTURES / "mlp_symbolic-symbol.json", FIXTURES / "mlp_symbolic-0000.params",
                             shapes={"data": (2, 784)})
    names = [p.name for p in mod["main"].params]
    assert "softmax_label" not in names and len(names) == 7


@needs_fixtures
def test_resnet18_graph_imports_builds_and_matches_reference():
    mod, params = from_mxnet(FIXTURES / "resnet18_v1-symbol.json", shapes={"data": (1, 3, 224, 224)})
    assert params == {}
    shapes = param_shapes(mod)
    # __shape__ has 0 (deferred) dims, e.g. (64, 0, 7, 7): they are inferred from the operators.
    assert shapes["resnetv10_conv0_weight"] == (64, 3, 7, 7)
    assert shapes["resnetv10_batchnorm0_gamma"] == (64,)
    assert len(shapes) == 102
    assert sum(math.prod(s) for s in shapes.values()) == 11_699_112  # resnet18_v1 incl. BN running stats
    assert mod["main"].ret_ty.shape.values[1] == 1000
    params = ref.random_inputs(None, shapes, seed=3)
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 224, 224)).astype("float32")
    (out,) = run_vm(mod, [x], params)
    (expect,) = ref.run(str(FIXTURES / "resnet18_v1-symbol.json"), {"data": x}, params)
    np.testing.assert_allclose(out, expect, rtol=1e-4, atol=1e-4 * np.abs(expect).max())


@needs_fixtures
def test_lstm_lm_graph_imports_and_builds():
    mod, params = from_mxnet(FIXTURES / "lstm_lm-symbol.json", shapes={"data": (35, 20)})
    shapes = param_shapes(mod)
    assert shapes["lstmlm_lstm0_l0_i2h_weight"] == (800, 200)
    assert len(shapes) == 11 and "data" not in shapes
    assert tuple(int(d) for d in mod["main"].ret_ty.shape.values) == (35, 20, 1000)
    relax.build(mod, "llvm")


@needs_fixtures
def test_random_params_fit_the_signature():
    mod, _ = from_mxnet(FIXTURES / "small_cnn-symbol.json", shapes={"data": (2, 3, 32, 32)})
    rp = random_params(mod, seed=1)
    assert {k: v.shape for k, v in rp.items()} == param_shapes(mod)
    assert (rp["smallcnn_batchnorm0_running_var"] > 0).all()


# ------------------------------------------------------------------ Gluon-style architectures written here
EXTRA = list(make_symbols.MODELS)


def test_symbol_files_are_up_to_date(tmp_path, monkeypatch):
    monkeypatch.setattr(make_symbols, "HERE", str(tmp_path))
    make_symbols.main()
    for name in EXTRA:
        assert (tmp_path / f"{name}-symbol.json").read_text() == (DATA / f"{name}-symbol.json").read_text(), \
            f"rerun python tests/data/mxnet/make_symbols.py ({name})"


@pytest.mark.parametrize("name", EXTRA)
def test_extra_architecture_matches_numpy_reference(name):
    sym = DATA / f"{name}-symbol.json"
    shapes = {i["name"]: tuple(i["shape"]) for i in json.loads((DATA / f"{name}.input.json").read_text())["inputs"]}
    graph_only, _ = from_mxnet(sym, shapes=shapes)
    params = ref.random_inputs(None, param_shapes(graph_only), seed=1)
    rng = np.random.default_rng(0)
    if name == "gru_lm":  # float token ids, the MXNet convention
        data = rng.integers(0, 20, shapes["data"]).astype("float32")
    else:
        data = rng.uniform(-1, 1, shapes["data"]).astype("float32")
    mod, used = from_mxnet(sym, params=params, shapes=shapes)
    assert set(used) == set(params)
    outs = run_vm(mod, [data], used)
    refs = ref.run(str(sym), {"data": data}, params)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5)


def test_rnn_uses_gluon_weights_unsliced():
    """With _rnn_param_concat the RNN reads each Gluon weight directly: no packed vector, no slicing."""
    mod, _ = from_mxnet(DATA / "gru_lm-symbol.json", shapes={"data": (5, 3)})
    f = mod["main"]
    weights = {p.name for p in f.params if p.name.endswith(("i2h_weight", "h2h_weight"))}
    assert len(weights) == 4
    transposed, packed = set(), []
    for blk in f.body.blocks:
        for b in blk.bindings:
            v = b.value
            if not (isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op)):
                continue
            if v.op.name == "relax.permute_dims" and isinstance(v.args[0], relax.Var):
                transposed.add(v.args[0].name)
            if v.op.name in ("relax.concat", "relax.split") and b.var.ty.__class__ is relax.TensorType \
                    and b.var.ty.ndim == 1:
                packed.append(b.var.name)
            if v.op.name == "relax.split" and v.args[0].ty.ndim == 1:
                packed.append(b.var.name)
    assert weights <= transposed
    assert packed == []


def test_rnn_flat_parameter_sizes_are_inferred():
    mod, _ = from_mxnet(DATA / "rnn_flat_params-symbol.json", shapes={"data": (4, 3, 2)})
    # rnn_tanh bidirectional H=4 C=2: 2 x (4*2 + 4*4 + 4 + 4); rnn_relu 2 layers H=3 in 8: (24+9+6) + (9+9+6)
    assert param_shapes(mod) == {"rnn1_parameters": (64,), "rnn2_parameters": (63,)}


# ------------------------------------------------------------------ every operator, one graph per group
class OpZoo:
    """Many single-op heads over shared inputs, built and run once; each head has a numpy expectation."""

    def __init__(self):
        self.b = make_symbols.SymbolBuilder("")
        self.inputs: dict[str, np.ndarray] = {}
        self.params: dict[str, np.ndarray] = {}
        self.heads, self.expect, self.names = [], [], []
        self.rng = np.random.default_rng(7)

    def data(self, name, value):
        self.inputs[name] = np.asarray(value, "float32")
        return self.b.data(name)

    def param(self, name, value):
        self.params[name] = np.asarray(value, "float32")
        return [self.b._add({"op": "null", "name": name, "inputs": []}, 1), 0]

    def case(self, label, entry, expected):
        self.heads.append(entry)
        self.expect.append(np.asarray(expected, np.float64))
        self.names.append(label)

    def op(self, label, op, inputs, expected, n_out=1, out=0, **attrs):
        e = self.b.op(op, label, inputs, n_out=n_out, **attrs)
        self.case(label, e[out] if n_out > 1 else e, expected)

    def run(self):
        sym = self.b.to_json(self.heads)
        shapes = {k: v.shape for k, v in self.inputs.items()}
        mod, params = from_mxnet(sym, self.params, shapes=shapes)
        names = [p.name for p in mod["main"].params]
        inputs = [self.inputs[n] for n in names if n in self.inputs]
        return run_vm(mod, inputs, params)


def _sig(v):
    return 1 / (1 + np.exp(-v))


def _softmax(v, axis):
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def elementwise_zoo():
    z = OpZoo()
    r = z.rng
    X = r.uniform(-1, 1, (2, 3, 4)); Y = r.uniform(-1, 1, (2, 3, 4)); P = r.uniform(0.5, 2, (2, 3, 4))
    B = r.uniform(0.5, 2, (1, 3, 1)); BIG = X * 30
    x, y, p, b, big = z.data("x", X), z.data("y", Y), z.data("p", P), z.data("b", B), z.data("big", BIG)
    X, Y, P, B, BIG = (z.inputs[k].astype(np.float64) for k in ("x", "y", "p", "b", "big"))
    for op, fn in [("elemwise_add", np.add), ("elemwise_sub", np.subtract), ("elemwise_mul", np.multiply),
                   ("elemwise_div", np.divide), ("_plus", np.add), ("_maximum", np.maximum)]:
        z.op(op, op, [x, y], fn(X, Y))
    for op, fn in [("broadcast_add", np.add), ("broadcast_sub", np.subtract), ("broadcast_mul", np.multiply),
                   ("broadcast_div", np.divide), ("broadcast_maximum", np.maximum),
                   ("broadcast_minimum", np.minimum), ("broadcast_power", np.power)]:
        z.op(op, op, [p, b], fn(P, B))
    z.op("broadcast_greater", "broadcast_greater", [x, y], (X > Y).astype(float))
    z.op("broadcast_equal", "broadcast_equal", [x, x], np.ones_like(X))
    z.op("broadcast_logical_and", "broadcast_logical_and", [x, big], ((X != 0) & (BIG != 0)).astype(float))
    s = 1.5
    for op, fn in [("_plus_scalar", lambda v: v + s), ("_minus_scalar", lambda v: v - s),
                   ("_rminus_scalar", lambda v: s - v), ("_mul_scalar", lambda v: v * s),
                   ("_div_scalar", lambda v: v / s), ("_rdiv_scalar", lambda v: s / v),
                   ("_power_scalar", lambda v: v ** s), ("_rpower_scalar", lambda v: s ** v),
                   ("_maximum_scalar", lambda v: np.maximum(v, s)), ("_minimum_scalar", lambda v: np.minimum(v, s)),
                   ("_greater_scalar", lambda v: (v > s).astype(float))]:
        z.op(op, op, [p], fn(P), scalar=s)
    z.op("clip", "clip", [x], np.clip(X, -0.3, 0.4), a_min=-0.3, a_max=0.4)
    for op, fn, src, v in [("relu", lambda v: np.maximum(v, 0), x, X), ("sigmoid", _sig, x, X),
                           ("tanh", np.tanh, x, X), ("exp", np.exp, x, X), ("log", np.log, p, P),
                           ("sqrt", np.sqrt, p, P), ("square", np.square, x, X), ("rsqrt", lambda v: v ** -0.5, p, P),
                           ("abs", np.abs, x, X), ("negative", np.negative, x, X), ("reciprocal", np.reciprocal, p, P),
                           ("log1p", np.log1p, p, P), ("expm1", np.expm1, x, X), ("erf", None, x, X),
                           ("softsign", lambda v: v / (1 + np.abs(v)), x, X), ("floor", np.floor, big, BIG)]:
        if fn is None:
            from scipy.special import erf as fn
        z.op(op, op, [src], fn(v))
    softrelu = np.where(BIG > 20, BIG, np.log1p(np.exp(np.minimum(BIG, 20))))
    for act, fn in [("relu", lambda v: np.maximum(v, 0)), ("sigmoid", _sig), ("tanh", np.tanh),
                    ("softrelu", lambda v: softrelu), ("softsign", lambda v: v / (1 + np.abs(v)))]:
        z.op(f"act_{act}", "Activation", [big], fn(BIG), act_type=act)
    z.op("leaky", "LeakyReLU", [x], np.where(X > 0, X, 0.1 * X), act_type="leaky", slope=0.1)
    z.op("leaky_default", "LeakyReLU", [x], np.where(X > 0, X, 0.25 * X))
    z.op("elu", "LeakyReLU", [x], np.where(X > 0, X, 0.3 * (np.exp(X) - 1)), act_type="elu", slope=0.3)
    z.op("selu", "LeakyReLU", [x], 1.0507009873554805 * np.where(X > 0, X, 1.6732632423543772 * np.expm1(X)),
         act_type="selu")
    from scipy.special import erf
    z.op("gelu", "LeakyReLU", [x], 0.5 * X * (1 + erf(X / np.sqrt(2))), act_type="gelu")
    G = np.array([0.1, 0.2, 0.3])
    z.op("prelu", "LeakyReLU", [x, z.param("prelu_gamma", G)],
         np.where(X > 0, X, G[None, :, None] * X), act_type="prelu")
    z.op("rrelu", "LeakyReLU", [x], np.where(X > 0, X, 0.2 * X), act_type="rrelu", lower_bound=0.1,
         upper_bound=0.3)
    z.op("softmax_t", "softmax", [x], _softmax(X / 2.0, 1), axis=1, temperature=2.0)
    z.op("log_softmax", "log_softmax", [x], np.log(_softmax(X, -1)))
    z.op("softmax_out", "SoftmaxOutput", [x], _softmax(X.reshape(2, 12), 1).reshape(2, 3, 4))
    z.op("softmax_multi", "SoftmaxOutput", [x], _softmax(X, 1), multi_output=True)
    z.op("softmax_keep", "SoftmaxOutput", [x], _softmax(X, -1), preserve_shape=True)
    z.op("dropout", "Dropout", [x], X, n_out=2, p=0.5)
    z.op("cast_trunc", "Cast", [z.b.op("Cast", "to_int", [big], dtype="int32")], np.trunc(BIG), dtype="float32")
    return z


def shape_zoo():
    z = OpZoo()
    r = z.rng
    x = z.data("x", r.uniform(-1, 1, (2, 3, 4)))
    y = z.data("y", r.uniform(-1, 1, (2, 3, 4)))
    X, Y = z.inputs["x"].astype(np.float64), z.inputs["y"].astype(np.float64)
    for label, spec, rev, shape in [("r_keep", (0, -1), False, (2, 12)), ("r_merge", (-3, 0), False, (6, 4)),
                                    ("r_split", (-4, 1, 2, 0, 0), False, (1, 2, 3, 4)),
                                    ("r_rest", (-2,), False, (2, 3, 4)), ("r_flat", -1, False, (24,)),
                                    ("r_reverse", (-1, 0), True, (6, 4))]:
        z.op(label, "Reshape", [x], X.reshape(shape), shape=spec, **({"reverse": True} if rev else {}))
    z.op("flatten", "Flatten", [x], X.reshape(2, 12))
    z.op("transpose", "transpose", [x], X.transpose())
    z.op("transpose_axes", "transpose", [x], X.transpose(1, 0, 2), axes=(1, 0, 2))
    z.op("swapaxis", "SwapAxis", [x], X.swapaxes(1, 2), dim1=1, dim2=2)
    z.op("concat", "Concat", [x, y], np.concatenate([X, Y], 2), dim=2, num_args=2)
    z.op("stack", "stack", [x, y], np.stack([X, Y], 1), axis=1, num_args=2)
    z.op("add_n", "add_n", [x, y, x], X + Y + X, num_args=3)
    for i in range(3):
        z.op(f"slicechannel{i}", "SliceChannel", [x], X[:, i], n_out=3, out=i, num_outputs=3, squeeze_axis=True)
    z.op("split_keep", "SliceChannel", [x], X[:, :, 2:], n_out=2, out=1, num_outputs=2, axis=-1)
    z.op("expand_dims", "expand_dims", [x], X[:, None], axis=1)
    z.op("squeeze", "squeeze", [z.b.op("slice_axis", "sa1", [x], axis=1, begin=1, end=2)], X[:, 1], axis=1)
    z.op("slice_axis", "slice_axis", [x], X[:, :, 1:], axis=2, begin=1, end=None)
    z.op("slice_axis_neg", "slice_axis", [x], X[:, -2:], axis=1, begin=-2, end=None)
    z.op("slice", "slice", [x], X[:, 1:3, ::2], begin=(None, 1, None), end=(None, 3, None), step=(None, 1, 2))
    for op, fn, kw in [("mean", lambda v: v.mean(1, keepdims=True), dict(axis=1, keepdims=True)),
                       ("sum", lambda v: v.sum((0, 2)), dict(axis=(0, 2))), ("max", lambda v: v.max(), {}),
                       ("min", lambda v: v.min(-1), dict(axis=-1)), ("prod", lambda v: v.prod(0), dict(axis=0))]:
        z.op(op, op, [x], fn(X), **kw)
    z.op("sum_exclude", "sum", [x], X.sum((0, 2)), axis=1, exclude=True)
    C = (X > 0).astype(float)
    z.op("where", "where", [z.data("cond", C), x, y], np.where(C != 0, X, Y))
    c1 = np.array([1.0, 0.0])
    z.op("where_rows", "where", [z.data("cond1", c1), x, y], np.where(c1[:, None, None] != 0, X, Y))
    ids = np.array([0.0, 2.0])
    z.op("take", "take", [x, z.data("ids", ids)], X[:, [0, 2]], axis=1)
    z.op("take_wrap", "take", [x, z.data("ids_wrap", np.array([4.0, -1.0]))], X[:, [1, 2]], axis=1, mode="wrap")
    z.op("take_clip", "take", [x, z.data("ids_clip", np.array([7.0]))], X[[1]])
    W = r.uniform(-1, 1, (5, 4))
    tok = np.array([[0.0, 4.0], [3.0, 3.0]])
    z.op("embedding", "Embedding", [z.data("tok", tok), z.param("emb_w", W)], W[tok.astype(int)],
         input_dim=5, output_dim=4)
    z.op("zeros_like", "zeros_like", [x], np.zeros_like(X))
    z.op("ones_like", "ones_like", [x], np.ones_like(X))
    z.op("ones_infer", "broadcast_add", [x, z.b.op("_ones", "ones0", [], shape=(0, 3, 4))], X + 1)
    z.op("full", "elemwise_mul", [z.b.op("_full", "full0", [], shape=(2, 3, 4), value=2.5), x], 2.5 * X)
    z.op("zeros", "elemwise_add", [z.b.op("_zeros", "zeros0", [], shape=(2, 3, 4)), x], X)
    z.op("batch_dot_ta", "batch_dot", [x, y], X.transpose(0, 2, 1) @ Y, transpose_a=True)
    z.op("batch_dot_tb", "batch_dot", [x, y], X @ Y.transpose(0, 2, 1), transpose_b=True)
    M = r.uniform(-1, 1, (4, 5))
    z.op("dot", "dot", [x, z.param("dot_m", M)], np.tensordot(X, M, 1))
    z.op("dot_t", "dot", [z.param("dot_a", M), z.param("dot_b", M)], M.T @ M, transpose_a=True)
    z.op("broadcast_to", "broadcast_to", [z.b.op("slice_axis", "sa2", [x], axis=0, begin=0, end=1)],
         np.broadcast_to(X[:1], (3, 3, 4)), shape=(3, 0, 0))
    z.op("tile", "tile", [x], np.tile(X, (1, 2, 1)), reps=(1, 2, 1))
    z.op("repeat", "repeat", [x], np.repeat(X, 2, 2), repeats=2, axis=2)
    z.op("argmax", "argmax", [x], X.argmax(1).astype(float), axis=1)
    return z


def layer_zoo():
    z = OpZoo()
    r = z.rng
    x = z.data("x", r.uniform(-1, 1, (2, 3, 4)))
    X = z.inputs["x"].astype(np.float64)
    g, bta = r.uniform(0.5, 1.5, (3,)), r.uniform(-1, 1, (3,))
    mean, var = r.uniform(-1, 1, (3,)), r.uniform(0.5, 1.5, (3,))
    pg, pb, pm, pv = (z.param(f"bn_{n}", v) for n, v in zip(["gamma", "beta", "mean", "var"], [g, bta, mean, var]))
    sh = (1, 3, 1)
    z.op("bn_gluon", "BatchNorm", [x, pg, pb, pm, pv],
         (X - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-5) * g.reshape(sh) + bta.reshape(sh),
         n_out=3, eps=1e-5, fix_gamma=False)
    z.op("bn_defaults", "BatchNorm", [x, pg, pb, pm, pv],  # fix_gamma=True, eps=1e-3
         (X - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-3) + bta.reshape(sh), n_out=3)
    g4, b4 = r.uniform(0.5, 1.5, (4,)), r.uniform(-1, 1, (4,))
    mu, va = X.mean(-1, keepdims=True), X.var(-1, keepdims=True)
    z.op("layernorm", "LayerNorm", [x, z.param("ln_g", g4), z.param("ln_b", b4)],
         (X - mu) / np.sqrt(va + 1e-5) * g4 + b4)
    mu1, va1 = X.mean(1, keepdims=True), X.var(1, keepdims=True)
    z.op("layernorm_axis1", "LayerNorm", [x, pg, pb], (X - mu1) / np.sqrt(va1 + 1e-3) * g.reshape(sh)
         + bta.reshape(sh), axis=1, eps=1e-3)
    W, Bv = r.uniform(-1, 1, (5, 12)), r.uniform(-1, 1, (5,))
    z.op("fc_flatten", "FullyConnected", [x, z.param("fc_w", W), z.param("fc_b", Bv)],
         X.reshape(2, 12) @ W.T + Bv, num_hidden=5)
    W2 = r.uniform(-1, 1, (6, 4))
    z.op("fc_3d_nobias", "FullyConnected", [x, z.param("fc2_w", W2)], X @ W2.T, num_hidden=6, flatten=False,
         no_bias=True)
    Wc, bc = r.uniform(-1, 1, (5, 3, 3)), r.uniform(-1, 1, (5,))
    conv1d = ref.conv2d(X[:, :, None], Wc[:, :, None], (1, 1), (0, 1), (1, 1), 1)[:, :, 0] + bc[None, :, None]
    z.op("conv1d", "Convolution", [x, z.param("c1_w", Wc), z.param("c1_b", bc)], conv1d, kernel=(3,), pad=(1,),
         num_filter=5)
    img = z.data("img", r.uniform(-1, 1, (1, 4, 7, 6)))
    I = z.inputs["img"].astype(np.float64)
    Wg = r.uniform(-1, 1, (6, 2, 3, 2))
    z.op("conv_group_nonsquare", "Convolution", [img, z.param("cg_w", Wg)],
         ref.conv2d(I, Wg, (2, 1), (1, 0), (1, 2), 2), kernel=(3, 2), stride=(2, 1), pad=(1, 0), dilate=(1, 2),
         num_filter=6, num_group=2, no_bias=True)
    Wd = r.uniform(-1, 1, (4, 2, 3, 3))
    z.op("deconv", "Deconvolution", [img, z.param("dc_w", Wd)], _deconv(I, Wd, 2, 1), kernel=(3, 3),
         stride=(2, 2), pad=(1, 1), num_filter=2)
    z.op("maxpool_full", "Pooling", [img], ref.pool2d(I, "max", (2, 2), (2, 2), (0, 0), True, True),
         kernel=(2, 2), stride=(2, 2), pool_type="max", pooling_convention="full")
    z.op("avgpool_pad", "Pooling", [img], ref.pool2d(I, "avg", (3, 3), (2, 2), (1, 1), False, True),
         kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg")
    z.op("avgpool_nopad", "Pooling", [img], ref.pool2d(I, "avg", (3, 3), (2, 2), (1, 1), True, False),
         kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg", count_include_pad=False, pooling_convention="full")
    z.op("sumpool", "Pooling", [img], ref.pool2d(I, "avg", (2, 3), (1, 1), (0, 0), False, True) * 6,
         kernel=(2, 3), pool_type="sum")
    z.op("global_max", "Pooling", [img], I.max((2, 3), keepdims=True), kernel=(1, 1), global_pool=True)
    z.op("global_avg", "Pooling", [img], I.mean((2, 3), keepdims=True), kernel=(3, 3), global_pool=True,
         pool_type="avg")
    z.op("pad_const", "Pad", [img], np.pad(I, ((0, 0), (0, 0), (1, 1), (2, 2)), constant_values=0.5),
         mode="constant", pad_width=(0, 0, 0, 0, 1, 1, 2, 2), constant_value=0.5)
    z.op("pad_edge", "Pad", [img], np.pad(I, ((0, 0), (0, 0), (1, 1), (2, 2)), mode="edge"),
         mode="edge", pad_width=(0, 0, 0, 0, 1, 1, 2, 2))
    z.op("upsampling", "UpSampling", [img], I.repeat(2, 2).repeat(2, 3), scale=2, sample_type="nearest",
         num_args=1)
    return z


def _deconv(x, w, stride, pad):
    n, c, h, wd = x.shape
    _, f, kh, kw = w.shape
    full = np.zeros((n, f, (h - 1) * stride + kh, (wd - 1) * stride + kw))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw] += np.einsum(
                "nc,cfkl->nfkl", x[:, :, i, j], w)
    return full[:, :, pad:full.shape[2] - pad, pad:full.shape[3] - pad]


@pytest.mark.parametrize("zoo", [elementwise_zoo, shape_zoo, layer_zoo], ids=lambda f: f.__name__)
def test_operator(zoo):
    z = zoo()
    outs = z.run()
    bad = []
    for label, out, exp in zip(z.names, outs, z.expect):
        if out.shape != exp.shape or not np.allclose(out, exp, rtol=1e-5, atol=1e-5):
            err = np.abs(out - exp).max() if out.shape == exp.shape else "shape"
            bad.append(f"{label}: got {out.shape}, want {exp.shape}, max err {err}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("spec,src,reverse,want", [
    ((4, 0, 2), (2, 3, 4), False, (4, 3, 2)), ((2, 0, 0), (2, 3, 4), False, (2, 3, 4)),
    ((6, 1, -1), (2, 3, 4), False, (6, 1, 4)), ((3, -1, 8), (2, 3, 4), False, (3, 1, 8)),
    ((-1,), (2, 3, 4), False, (24,)), ((-2,), (2, 3, 4), False, (2, 3, 4)),
    ((2, -2), (2, 3, 4), False, (2, 3, 4)), ((-2, 1, 1), (2, 3, 4), False, (2, 3, 4, 1, 1)),
    ((-3, 4), (2, 3, 4), False, (6, 4)), ((-3, -2), (2, 3, 4, 5), False, (6, 4, 5)),
    ((0, -3), (2, 3, 4), False, (2, 12)), ((-3, -3), (2, 3, 4, 5), False, (6, 20)),
    ((-4, 1, 2, -2), (2, 3, 4), False, (1, 2, 3, 4)), ((2, -4, -1, 3, -2), (2, 3, 4), False, (2, 1, 3, 4)),
    ((-1, 0), (10, 5, 4), False, (40, 5)), ((-1, 0), (10, 5, 4), True, (50, 4)),
])
def test_reshape_codes_follow_mxnet_docs(spec, src, reverse, want):
    assert infer_reshape(spec, src, reverse) == want


@pytest.mark.parametrize("spec,src", [((-1, -1), (2, 3)), ((5,), (2, 3)), ((-4, -1, -1), (6,)), ((-3,), (6,))])
def test_reshape_bad_codes_raise(spec, src):
    with pytest.raises(ValueError):
        infer_reshape(spec, src)


# ------------------------------------------------------------------ the .params reader
@needs_fixtures
@pytest.mark.parametrize("name", WITH_PARAMS)
def test_params_reader_round_trips_byte_exact(name):
    raw = (FIXTURES / f"{name}-0000.params").read_bytes()
    params = parse_params(raw)
    assert all(k.startswith(("arg:", "aux:")) for k in params)
    assert dump_params(params) == raw


def test_params_dtypes_round_trip():
    arrays = {"arg:a": np.arange(6, dtype=np.float64).reshape(2, 3), "arg:b": np.array([1, -2], np.int64),
              "aux:c": np.ones((1, 1, 2), np.float16), "arg:d": np.array([3], np.uint8),
              "arg:e": np.zeros((0, 4), np.float32)}
    back = parse_params(dump_params(arrays))
    assert list(back) == list(arrays)
    for k, v in arrays.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape
        np.testing.assert_array_equal(back[k], v)
    assert list(strip_prefixes(back)) == ["a", "b", "c", "d", "e"]


def _small_params_file():
    return dump_params({"arg:w": np.arange(12, dtype=np.float32).reshape(3, 4), "aux:m": np.ones(3, np.float32)})


@pytest.mark.parametrize("cut", [0, 4, 8, 20, 30, 40, 60, 80, -1])
def test_truncated_params_file_is_a_clear_error(cut):
    raw = _small_params_file()
    with pytest.raises(ParamsFileError, match="truncated|unexpected end"):
        parse_params(raw[:cut] if cut >= 0 else raw[:-1])


@pytest.mark.parametrize("offset,value,match", [
    (0, 0x113, "bad file magic"), (24, 0xDEADBEEF, "bad magic"),
])
def test_corrupt_params_magic_is_a_clear_error(offset, value, match):
    raw = bytearray(_small_params_file())
    raw[offset:offset + 4] = struct.pack("<I", value)
    with pytest.raises(ParamsFileError, match=match):
        parse_params(bytes(raw))


def test_corrupt_params_fields_are_clear_errors():
    raw = _small_params_file()
    # Header 24 bytes; array: magic 4, stype 4, ndim 4 ...
    bad_ndim = raw[:32] + struct.pack("<I", 99) + raw[36:]
    with pytest.raises(ParamsFileError, match="ndim"):
        parse_params(bad_ndim)
    sparse = raw[:28] + struct.pack("<i", 1) + raw[32:]
    with pytest.raises(ParamsFileError, match="sparse"):
        parse_params(sparse)
    dtype_at = 24 + 12 + 16 + 8
    bad_dtype = raw[:dtype_at] + struct.pack("<i", 42) + raw[dtype_at + 4:]
    with pytest.raises(ParamsFileError, match="dtype flag 42"):
        parse_params(bad_dtype)
    with pytest.raises(ParamsFileError, match="trailing"):
        parse_params(raw + b"\0")
    unnamed = dump_params({"a": np.ones(2, np.float32)})
    unnamed = unnamed[:-(8 + 8 + 1)] + struct.pack("<Q", 0)
    with pytest.raises(ParamsFileError, match="names"):
        parse_params(unnamed)


def test_corrupt_params_file_through_from_mxnet(tmp_path):
    path = tmp_path / "m-0000.params"
    path.write_bytes(_small_params_file()[:50])
    sym = _graph([("FullyConnected", {"num_hidden": "3"}, ["data", "w"])])
    with pytest.raises(ParamsFileError, match=str(path)):
        from_mxnet(sym, path, shapes={"data": (1, 4)})
    with pytest.raises(ParamsFileError, match="cannot read"):
        from_mxnet(sym, tmp_path / "missing.params", shapes={"data": (1, 4)})


# ------------------------------------------------------------------ errors for bad models and bad input
def _graph(ops, extra_vars=()):
    """ops: [(op, attrs, [input names or op indices])]; names become variables. Heads: the last op."""
    nodes, index = [], {}
    for op, attrs, inputs in ops:
        ins = []
        for i in inputs:
            if isinstance(i, int):
                ins.append([i, 0, 0])
                continue
            if i not in index:
                index[i] = len(nodes)
                nodes.append({"op": "null", "name": i, "inputs": []})
            ins.append([index[i], 0, 0])
        nodes.append({"op": op, "name": f"{op.lower()}{len(nodes)}", "attrs": attrs, "inputs": ins})
    return {"nodes": nodes, "arg_nodes": [], "heads": [[len(nodes) - 1, 0, 0]]}


def test_supported_operators_cover_the_fixtures_and_the_brief():
    brief = {"Convolution", "BatchNorm", "Activation", "LeakyReLU", "Pooling", "FullyConnected", "Flatten",
             "Reshape", "Concat", "SliceChannel", "transpose", "SwapAxis", "softmax", "log_softmax",
             "SoftmaxOutput", "Dropout", "Embedding", "LayerNorm", "batch_dot", "clip", "relu", "sigmoid", "tanh",
             "exp", "log", "sqrt", "square", "RNN", "_rnn_param_concat", "_zeros", "_ones", "zeros_like",
             "ones_like", "mean", "sum", "max", "expand_dims", "squeeze", "slice_axis", "where", "take", "stack",
             "add_n", "_plus_scalar", "_mul_scalar", "_div_scalar", "_rdiv_scalar", "_minus_scalar",
             "_rminus_scalar", "_power_scalar", "elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div",
             "broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_maximum",
             "broadcast_minimum"}
    assert brief <= set(supported_operators())
    symbols = list(FIXTURES.glob("*-symbol.json"))
    assert len(symbols) >= 10, f"only {len(symbols)} symbols in {FIXTURES}"
    used = {n["op"] for f in symbols for n in json.loads(f.read_text())["nodes"]}
    assert used - {"null"} <= set(supported_operators())


def test_nodes_are_keyed_by_index_not_name():
    """Two different nodes may share a name (Gluon reuses a block): both must be converted."""
    sym = _graph([("relu", {}, ["x"]), ("_mul_scalar", {"scalar": "3"}, [1])])
    sym["nodes"][2]["name"] = sym["nodes"][1]["name"]
    mod, _ = from_mxnet(sym, shapes={"x": (3,)})
    x = np.array([-1.0, 0.5, 2.0], "float32")
    (out,) = run_vm(mod, [x], {})
    np.testing.assert_allclose(out, np.maximum(x, 0) * 3)


def test_data_dtype_per_input():
    sym = _graph([("Embedding", {"input_dim": "4", "output_dim": "2"}, ["ids", "w"])])
    w = np.arange(8, dtype="float32").reshape(4, 2)
    mod, params = from_mxnet(sym, {"w": w}, shapes={"ids": (3,)}, dtype={"ids": "int32"})
    assert str(mod["main"].params[0].ty.dtype.dtype) == "int32"
    (out,) = run_vm(mod, [np.array([3, 0, 1], "int32")], params)
    np.testing.assert_array_equal(out, w[[3, 0, 1]])


def test_unknown_operator_names_op_and_node():
    sym = _graph([("FancyOp", {}, ["data"])])
    with pytest.raises(UnsupportedModelError, match=r"'FancyOp' \(node 'fancyop1'\) is not supported"):
        from_mxnet(sym, shapes={"data": (2, 3)})


@pytest.mark.parametrize("op,attrs,attr", [
    ("Activation", {"act_type": "swishy"}, "act_type"),
    ("Pooling", {"pool_type": "lp", "kernel": "(2, 2)"}, "pool_type"),
    ("Pooling", {"kernel": "(2, 2)", "pooling_convention": "same"}, "pooling_convention"),
    ("Pooling", {"kernel": "(2, 2)", "layout": "NHWC"}, "layout"),
    ("LeakyReLU", {"act_type": "crelu"}, "act_type"),
    ("Dropout", {"mode": "always", "p": "0.5"}, "mode"),
    ("softmax", {"use_length": "True"}, "use_length"),
    ("Reshape", {"shape": "(5, 7)"}, "shape"),
])
def test_unsupported_attribute_names_op_node_and_attribute(op, attrs, attr):
    sym = _graph([(op, attrs, ["data"])])
    with pytest.raises(UnsupportedModelError) as e:
        from_mxnet(sym, shapes={"data": (1, 2, 4, 4)})
    msg = str(e.value)
    assert repr(op) in msg and f"{op.lower()}1" in msg and attr in msg


def test_unsupported_rnn_attribute():
    sym = _graph([("RNN", {"mode": "lstm", "state_size": "4", "projection_size": "2"}, ["data", "p", "h", "c"])])
    with pytest.raises(UnsupportedModelError, match="projection_size"):
        from_mxnet(sym, shapes={"data": (2, 1, 3)})


def test_bad_attribute_value_is_named():
    sym = _graph([("Convolution", {"kernel": "(3, x)", "num_filter": "2"}, ["data", "w"])])
    with pytest.raises(UnsupportedModelError, match="'kernel'.*not a valid tuple"):
        from_mxnet(sym, shapes={"data": (1, 1, 5, 5)})
    sym = _graph([("Convolution", {"kernel": "(3, 3)"}, ["data", "w"])])
    with pytest.raises(UnsupportedModelError, match="required attribute 'num_filter'"):
        from_mxnet(sym, shapes={"data": (1, 1, 5, 5)})


@needs_fixtures
def test_missing_input_shape_names_the_input():
    with pytest.raises(UnsupportedModelError, match=r"missing input shape for 'data'.*shapes=\{'data'"):
        from_mxnet(FIXTURES / "mlp-symbol.json", FIXTURES / "mlp-0000.params")


@needs_fixtures
def test_bad_shapes_argument():
    sym = FIXTURES / "mlp-symbol.json"
    with pytest.raises(TvmSwapError, match="'dta'.*does not have"):
        from_mxnet(sym, shapes={"dta": (2, 784)})
    with pytest.raises(TvmSwapError, match="positive ints"):
        from_mxnet(sym, shapes={"data": (2, -1)})


@needs_fixtures
def test_param_missing_or_misshapen_in_params():
    params = strip_prefixes(load_params(FIXTURES / "mlp-0000.params"))
    partial = {k: v for k, v in params.items() if k != "mlp_dense1_bias"}
    with pytest.raises(UnsupportedModelError, match="'mlp_dense1_bias'.*not in the params"):
        from_mxnet(FIXTURES / "mlp-symbol.json", partial, shapes={"data": (2, 784)})
    wrong = dict(params, mlp_dense0_weight=np.zeros((128, 100), np.float32))
    with pytest.raises(UnsupportedModelError, match=r"shape \(128, 100\).*needs \(128, 784\)"):
        from_mxnet(FIXTURES / "mlp-symbol.json", wrong, shapes={"data": (2, 784)})


def test_bad_symbol_json(tmp_path):
    with pytest.raises(TvmSwapError, match="not valid JSON"):
        from_mxnet("{not json")
    with pytest.raises(TvmSwapError, match="'nodes' and 'heads'"):
        from_mxnet({"nodes": []})
    with pytest.raises(TvmSwapError, match="not before it"):
        from_mxnet({"nodes": [{"op": "relu", "name": "r", "inputs": [[0, 0, 0]]}], "heads": [[0, 0, 0]]})
    with pytest.raises(TvmSwapError, match="cannot read"):
        from_mxnet(str(tmp_path / "nope-symbol.json"))


def test_unused_output_index_is_an_error():
    sym = _graph([("BatchNorm", {"fix_gamma": "False"}, ["data", "g", "b", "m", "v"]), ("relu", {}, [])])
    sym["nodes"][-1]["inputs"] = [[5, 1, 0]]  # BatchNorm's batch mean
    with pytest.raises(UnsupportedModelError, match="output 1 of 'BatchNorm'"):
        from_mxnet(sym, shapes={"data": (1, 2, 3, 3)})


# ------------------------------------------------------------------ load_model dispatcher
@needs_fixtures
def test_load_model_finds_params_beside_symbol(tmp_path):
    mod, params = load_model(FIXTURES / "mlp-symbol.json", shapes={"data": (2, 784)})
    assert len(params) == 6
    assert find_mxnet_params(str(FIXTURES / "mlp-symbol.json")).endswith("mlp-0000.params")
    mod, params = load_model(str(FIXTURES / "resnet18_v1-symbol.json"), shapes={"data": (1, 3, 32, 32)})
    assert params == {} and len(mod["main"].params) == 103
    # Another epoch than 0000, alone beside the symbol, is found too.
    shutil.copy(FIXTURES / "mlp-symbol.json", tmp_path / "net-symbol.json")
    shutil.copy(FIXTURES / "mlp-0000.params", tmp_path / "net-0007.params")
    _, params = load_model(tmp_path / "net-symbol.json", shapes={"data": (2, 784)})
    assert len(params) == 6


def test_load_model_rejects_unknown_files(tmp_path):
    with pytest.raises(TvmSwapError, match="does not exist"):
        load_model(tmp_path / "model.onnx")
    with pytest.raises(TvmSwapError, match="does not exist"):
        load_model(tmp_path / "nothing.bin")
    other = tmp_path / "weights.txt"
    other.write_text("hello")
    with pytest.raises(TvmSwapError, match="cannot tell what kind"):
        load_model(other)
