"""ONNX and PyTorch importers (tvm_swap.frontends.onnx_import / torch_import), the rewrites they apply
(weight-broadcast folding, tied-weight de-duplication), clear errors for what is unsupported, and the CLI
(`tvm-swap plan` / `compile` / `run`) on an ONNX file and a module:factory spec."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvm
from tvm import relax  # noqa: E402

from tvm_swap.errors import TvmSwapError, UnsupportedModelError  # noqa: E402
from tvm_swap.frontends import from_onnx, from_torch, from_torch_factory, load_model  # noqa: E402
from tvm_swap.frontends.rewrites import dedupe_params, fold_weight_broadcasts  # noqa: E402

RNG = np.random.default_rng(0)

# a module:factory file for the factory and CLI tests: 16 equal layers, so params dominate and 50% plans exist
FACTORY_SRC = textwrap.dedent('''
    import torch

    class DeepMLP(torch.nn.Module):
        def __init__(self, width=128, depth=16):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(width, width) for _ in range(depth)])

        def forward(self, x):
            for layer in self.layers:
                x = torch.relu(layer(x))
            return x

    def make():
        torch.manual_seed(0)
        return DeepMLP(), (torch.randn(16, 128),)

    def make_with_attribute():
        m = DeepMLP(depth=2)
        m.example_inputs = (torch.randn(4, 128),)
        return m

    def make_wrong():
        return 42
''')


def _run(mod, params, inputs, func="main"):
    f = mod[func]
    n_in = int(f.attrs["num_input"])
    vm = relax.VirtualMachine(relax.build(mod, target="llvm"), tvm.cpu())
    args = [tvm.runtime.tensor(np.ascontiguousarray(x)) for x in inputs]
    args += [tvm.runtime.tensor(params[p.name]) for p in f.params[n_in:]]
    out = vm[func](*args)
    return out.numpy() if hasattr(out, "numpy") else [o.numpy() for o in out]


def _count(mod, op_name, func="main"):
    n = [0]

    def visit(e):
        if isinstance(e, relax.Call) and isinstance(e.op, tvm.ir.Op) and e.op.name == op_name:
            n[0] += 1

    relax.analysis.post_order_visit(mod[func].body, visit)
    return n[0]


@pytest.fixture(scope="module")
def factory_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("factory") / "tiny_factory.py"
    path.write_text(FACTORY_SRC)
    return path


# ---------------------------------------------------------------- rewrites (no torch needed)
def _matmul_module(x_shape, w_shape, bcast_shape, reshape_to=None, weight_left=False):
    x = relax.Var("x", relax.TensorType(list(x_shape), "float32"))
    w = relax.Var("w", relax.TensorType(list(w_shape), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            wb = bb.emit(relax.op.broadcast_to(w, bcast_shape))
            if reshape_to is not None:
                wb = bb.emit(relax.op.reshape(wb, reshape_to))
            y = bb.emit(relax.op.matmul(wb, x) if weight_left else relax.op.matmul(x, wb))
            out = bb.emit_output(relax.op.add(y, relax.op.broadcast_to(y, [int(d) for d in y.ty.shape.values])))
        bb.emit_func_output(out)
    return tvm.IRModule({"main": bb.get()["main"].with_attr("num_input", 1)})


@pytest.mark.parametrize("case", [
    dict(x_shape=(3, 5, 4), w_shape=(4, 6), bcast_shape=(3, 4, 6)),
    dict(x_shape=(6, 5, 4), w_shape=(4, 6), bcast_shape=(2, 3, 4, 6), reshape_to=(6, 4, 6)),   # expand + bmm
    dict(x_shape=(3, 4, 5), w_shape=(6, 4), bcast_shape=(3, 6, 4), weight_left=True),
])
def test_weight_broadcast_folds_into_matmul(case):
    mod = _matmul_module(**case)
    x = RNG.standard_normal(case["x_shape"]).astype("float32")
    params = {"w": RNG.standard_normal(case["w_shape"]).astype("float32")}
    fixed = fold_weight_broadcasts(mod)
    assert _count(mod, "relax.broadcast_to") == 2 and _count(fixed, "relax.broadcast_to") == 0
    np.testing.assert_allclose(_run(fixed, params, [x]), _run(mod, params, [x]), rtol=1e-6)


def test_broadcast_that_changes_the_result_is_kept():
    mod = _matmul_module(x_shape=(1, 5, 4), w_shape=(4, 6), bcast_shape=(3, 4, 6))   # output batch comes from W
    fixed = fold_weight_broadcasts(mod)
    assert _count(fixed, "relax.broadcast_to") == 1                                 # only the identity one went
    x = RNG.standard_normal((1, 5, 4)).astype("float32")
    params = {"w": RNG.standard_normal((4, 6)).astype("float32")}
    np.testing.assert_allclose(_run(fixed, params, [x]), _run(mod, params, [x]), rtol=1e-6)


def test_dedupe_params_binds_aliases_to_the_first():
    x = relax.Var("x", relax.TensorType([2, 3], "float32"))
    a = relax.Var("a", relax.TensorType([3, 3], "float32"))
    b = relax.Var("b", relax.TensorType([3, 3], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, a, b]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(relax.op.matmul(x, a), b))
        bb.emit_func_output(out)
    mod = tvm.IRModule({"main": bb.get()["main"].with_attr("num_input", 1)})
    w = RNG.standard_normal((3, 3)).astype("float32")
    new, params = dedupe_params(mod, [["a", "b"]], {"a": w, "b": w})
    assert [p.name for p in new["main"].params] == ["x", "a"] and list(params) == ["a"]
    xv = RNG.standard_normal((2, 3)).astype("float32")
    np.testing.assert_allclose(_run(new, params, [xv]), xv @ w @ w, rtol=1e-5)


# ---------------------------------------------------------------- PyTorch
def _torch():
    return pytest.importorskip("torch")


def _mlp():
    torch = _torch()
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def test_from_torch_matches_torch_and_restores_mode():
    torch = _torch()
    net = _mlp().train()
    x = torch.randn(2, 8)
    mod, params = from_torch(net, (x,))
    assert net.training
    assert len(params) == 4 and all(n.startswith("p_") for n in params)
    np.testing.assert_allclose(_run(mod, params, [x.numpy()]), net(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_from_torch_ties_shared_weights():
    torch = _torch()

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.out = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10)
            self.out.weight = self.emb.weight

        def forward(self, ids):
            return self.out(self.emb(ids))

    net = Tied()
    ids = torch.tensor([[1, 2, 3]])
    mod, params = from_torch(net, (ids,))
    assert sorted(params) == ["p_emb_weight", "p_out_bias"]
    np.testing.assert_allclose(_run(mod, params, [ids.numpy()]), net(ids).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_from_torch_warns_about_embedding_padding_rows():
    torch = _torch()
    net = torch.nn.Sequential(torch.nn.Embedding(10, 4, padding_idx=0), torch.nn.Linear(4, 2))
    with pytest.warns(UserWarning, match=r"0 \(padding_idx=0\): a training step will update the padding row"):
        from_torch(net, (torch.tensor([[1, 0, 2]]),))


def test_from_torch_transformer_has_no_materialised_broadcasts():
    """torch's decomposition of scaled_dot_product_attention expanded q/k/v into batched matmuls
    (broadcast_to: 12 of them here, kept alive for the backward pass); the attention is now converted whole
    (tvm_swap.frontends.torch_converters), so there are none even before fold_weight_broadcasts."""
    torch = _torch()
    torch.manual_seed(0)
    net = torch.nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                               dim_feedforward=32, dropout=0.0)

    class Causal(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.t = net

        def forward(self, src, tgt):
            mask = torch.nn.Transformer.generate_square_subsequent_mask(tgt.shape[0])
            return self.t(src, tgt, tgt_mask=mask, tgt_is_causal=True)

    src, tgt = torch.randn(6, 2, 16), torch.randn(4, 2, 16)
    raw, _ = from_torch(Causal(), (src, tgt), fix_broadcasts=False)
    mod, params = from_torch(Causal(), (src, tgt))
    assert _count(raw, "relax.broadcast_to") == 0 and _count(mod, "relax.broadcast_to") == 0
    want = Causal().eval()(src, tgt).detach().numpy()
    np.testing.assert_allclose(_run(mod, params, [src.numpy(), tgt.numpy()]), want, rtol=1e-4, atol=1e-5)


def test_from_torch_unsupported_operator_is_named():
    torch = _torch()

    class FFT(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs()

    with pytest.raises(UnsupportedModelError, match="no converter for _fft_r2c"):
        from_torch(FFT(), (torch.randn(4, 8),))


def test_from_torch_untraceable_model_is_a_clear_error():
    torch = _torch()

    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x - 1

    with pytest.raises(UnsupportedModelError, match="torch.export could not trace Branchy"):
        from_torch(Branchy(), (torch.randn(3),))
    with pytest.raises(TvmSwapError, match="torch.nn.Module"):
        from_torch(lambda x: x, (torch.randn(3),))


def test_from_torch_factory_forms(factory_file, monkeypatch):
    _torch()
    mod, params, inputs = from_torch_factory(f"{factory_file}:make")
    assert list(inputs) == ["x"] and inputs["x"].shape == (16, 128) and len(params) == 32
    monkeypatch.syspath_prepend(str(factory_file.parent))
    mod2, params2, inputs2 = from_torch_factory("tiny_factory:make_with_attribute")
    assert inputs2["x"].shape == (4, 128) and len(params2) == 4
    assert _run(mod2, params2, [inputs2["x"]]).shape == (4, 128)
    mod3, params3 = load_model("tiny_factory:make_with_attribute")
    assert sorted(params3) == sorted(params2)
    with pytest.raises(TvmSwapError, match="must return"):
        from_torch_factory("tiny_factory:make_wrong")
    with pytest.raises(TvmSwapError, match="no callable 'nope'"):
        from_torch_factory("tiny_factory:nope")
    with pytest.raises(TvmSwapError, match="cannot import 'no_such_module_xyz'"):
        from_torch_factory("no_such_module_xyz:make")


# ---------------------------------------------------------------- ONNX
def _export_onnx(net, args, path, **kw):
    torch = _torch()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, args, str(path), dynamo=False, input_names=["x"], **kw)
    return path


def test_from_onnx_matches_torch(tmp_path):
    pytest.importorskip("onnx")
    torch = _torch()
    net = _mlp().eval()
    x = torch.randn(2, 8)
    path = _export_onnx(net, (x,), tmp_path / "mlp.onnx")
    mod, params = from_onnx(path, {"x": (2, 8)})
    assert len(params) == 4
    np.testing.assert_allclose(_run(mod, params, [x.numpy()]), net(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    import onnx

    mod2, params2 = from_onnx(onnx.load(str(path)))             # a ModelProto; static shapes need no dict
    assert sorted(params2) == sorted(params)


def test_from_onnx_symbolic_batch_needs_a_shape(tmp_path):
    pytest.importorskip("onnx")
    torch = _torch()
    path = _export_onnx(_mlp().eval(), (torch.randn(2, 8),), tmp_path / "dyn.onnx",
                        dynamic_axes={"x": {0: "batch"}})
    with pytest.raises(TvmSwapError, match=r"shapes=\{'x'"):      # the Python API speaks of its arguments
        from_onnx(path)
    mod, _ = from_onnx(path, {"x": (5, 8)})
    assert [int(d) for d in mod["main"].params[0].ty.shape.values] == [5, 8]
    with pytest.raises(TvmSwapError, match="not inputs of the ONNX graph"):
        from_onnx(path, {"y": (5, 8)})


def test_from_onnx_unsupported_operator_is_named():
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Det", ["h"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(UnsupportedModelError, match=r"no converter for Det \(x1\)"):
        from_onnx(model)
    assert onnx is not None


def test_from_onnx_bad_files(tmp_path):
    pytest.importorskip("onnx")
    with pytest.raises(TvmSwapError, match="does not exist"):
        from_onnx(tmp_path / "missing.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00not an onnx model")
    with pytest.raises(TvmSwapError, match="not a readable ONNX model"):
        from_onnx(junk)


# ---------------------------------------------------------------- CLI end to end
def _cli(*args, cwd):
    code = "import sys; from tvm_swap.cli import main; sys.exit(main())"
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=300)
    assert r.returncode == 0, f"tvm-swap {' '.join(args)} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


# a fixed generation count, not a time budget: the plan must not depend on how loaded the machine is
PLAN_ARGS = ("--mem-limit", "50%", "--generations", "14", "--seed", "0", "--workers", "1", "--json", "--quiet")


@pytest.mark.slow
def test_cli_plans_and_compiles_an_onnx_file(tmp_path, factory_file):
    pytest.importorskip("onnx")
    torch = _torch()
    sys.path.insert(0, str(factory_file.parent))
    try:
        import tiny_factory
    finally:
        sys.path.pop(0)
    net, args = tiny_factory.make()
    onnx_path = _export_onnx(net.eval(), args, tmp_path / "deep_mlp.onnx")
    plan = _cli("plan", str(onnx_path), *PLAN_ARGS, cwd=tmp_path)
    assert plan["verified"] and plan["peak_bytes"] <= plan["mem_limit_bytes"] and plan["swap_in_count"] > 0
    out = _cli("compile", str(onnx_path), *PLAN_ARGS, "-o", str(tmp_path / "onnx.so"), cwd=tmp_path)
    assert (tmp_path / "onnx.so").is_file() and out["mem_limit_bytes"] == plan["mem_limit_bytes"]
    assert torch is not None


@pytest.mark.slow
def test_cli_plans_compiles_and_runs_a_torch_factory(tmp_path, factory_file):
    _torch()
    spec = f"{factory_file}:make"
    plan = _cli("plan", spec, *PLAN_ARGS, cwd=tmp_path)
    assert plan["verified"] and plan["peak_bytes"] <= plan["mem_limit_bytes"]
    lib = tmp_path / "factory.so"
    _cli("compile", spec, *PLAN_ARGS, "-o", str(lib), cwd=tmp_path)
    run = _cli("run", str(lib), "--compare-unlimited", "--repeat", "1", "--json", "--quiet", cwd=tmp_path)
    assert run["outputs_bitwise_equal"] and run["within_limit"]


def test_a_node_tvm_cannot_convert_is_named_with_what_to_do(capsys):
    """TVM 0.27's ONNX importer fails on ConstantOfShape of a 0-d shape (what torch's TorchScript exporter writes
    for BERT's mask): the refusal names the operator and the way around it, and TVM's print of the node's
    inputs stays off stdout."""
    import numpy as np
    import onnx  # noqa: F401
    from onnx import TensorProto, helper, numpy_helper

    from tvm_swap.errors import UnsupportedModelError
    from tvm_swap.frontends import from_onnx

    shape = numpy_helper.from_array(np.array([], dtype=np.int64), name="s")
    fill = helper.make_node("ConstantOfShape", ["s"], ["c"],
                            value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0]))
    add = helper.make_node("Add", ["x", "c"], ["y"])
    g = helper.make_graph([fill, add], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], initializer=[shape])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedModelError, match=r"on ONNX operator 'ConstantOfShape'.*from_torch"):
        from_onnx(model, {"x": [3]})
    assert "Error converting operator" not in capsys.readouterr().out
