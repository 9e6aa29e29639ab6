"""The zoo: the paper's workloads load at any batch, at the paper's scale, without TVM."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tvm_swap.errors import GraphError, TvmSwapError
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.zoo import FORMULA, ZOO, ZooError, load_zoo, parse_zoo_spec, zoo_path
from tvm_swap.zoo.affine import AffineFitError, fit, instantiate
from tvm_swap.zoo.stats import memory_stats, peak_bytes

ROOT = Path(__file__).resolve().parents[2]
# Models written from formulas at load time (zoo.FORMULA) have no data file; every other zoo model has its file.
STORED = {n: i for n, i in ZOO.items() if n not in FORMULA}
PAPER_POINTS = [(n, i["paper"]["batch"]) for n, i in ZOO.items() if i["paper"]]
ALL_PAPER_BATCHES = [(n, b) for n, i in ZOO.items() for b in i["paper_batches"]]
TRAIN_PAPER_BATCHES = [(n, b) for n, b in ALL_PAPER_BATCHES if not ZOO[n].get("inference")]
INFERENCE = [n for n, i in ZOO.items() if i.get("inference")]


def linear_scan_peak(g: DataflowGraph) -> int:
    """Independent of tvm_swap.zoo.stats: walk the default order op by op, params resident all the time,
    a tensor allocated when written and freed after its last reader; updates are in place."""
    persistent = {t.id for t in g.tensors if t.kind in ("param", "optimizer_state")} - set(g.updates)
    last_use = {}
    for op in g.ops:
        for t in op.inputs:
            last_use[t] = op.id
    outputs = set(g.outputs)
    live = {t for t in range(g.num_tensors) if t not in persistent and g.tensors[t].kind == "input"
            and t in last_use}
    cur = sum(g.tensors[t].nbytes for t in live)
    base = sum(g.tensors[t].nbytes for t in persistent if g.producer()[t] < 0)
    peak = 0
    for op in g.ops:
        for t in op.outputs:
            if t not in persistent and t not in g.updates:
                live.add(t)
                cur += g.tensors[t].nbytes
        peak = max(peak, cur + op.workspace)
        for t in set(op.inputs) | set(op.outputs):
            if t in live and t not in outputs and last_use.get(t, op.id) <= op.id:
                live.discard(t)
                cur -= g.tensors[t].nbytes
    return base + peak


# ---- the stored graphs ----

@pytest.mark.parametrize("name,batch", TRAIN_PAPER_BATCHES)
def test_every_model_loads_at_its_paper_batches(name, batch):
    g = load_zoo(f"zoo:{name}@batch={batch}")
    g.validate()
    assert g.name == f"{name}@batch={batch}" and g.meta["batch"] == batch
    assert 1000 <= g.num_ops <= 30000, "the paper's graphs have 10^3..10^4 ops (ours up to 4x: see the zoo)"
    kinds = {t.kind for t in g.tensors}
    assert {"param", "input", "activation", "gradient"} <= kinds
    # every weight (and optimizer state) is updated exactly once by this iteration
    persistent = [t.id for t in g.tensors if t.kind in ("param", "optimizer_state") and g.producer()[t.id] < 0]
    assert sorted(g.updates.values()) == sorted(persistent)
    assert g.total_flops() > 0


@pytest.mark.parametrize("name", INFERENCE)
@pytest.mark.parametrize("batch", [1, 16, 64])
def test_inference_graphs_are_one_forward_pass(name, batch):
    g = load_zoo(f"zoo:{name}@batch={batch}")
    g.validate()
    kinds = {t.kind for t in g.tensors}
    assert kinds == {"param", "input", "activation", "output"}, "no gradients, no optimizer state"
    assert not g.updates and len(g.outputs) == 1
    convs = [o for o in g.ops if "conv2d" in o.kernel]
    assert len(convs) == 155, "ResNet-152: 150 convs in 50 bottlenecks, 4 projections, the stem"
    params = sum(t.nbytes for t in g.tensors if t.kind == "param")
    assert 0.22e9 < params < 0.25e9, "ResNet-152 has about 60M weights"


@pytest.mark.parametrize("name,batch", PAPER_POINTS)
def test_memory_need_is_the_papers(name, batch):
    g = load_zoo(f"{name}@batch={batch}")
    paper = ZOO[name]["paper"]["memory_need_bytes"]
    peak = linear_scan_peak(g)
    assert peak == peak_bytes(g), "the two liveness scans disagree"
    total = memory_stats(g)["total_bytes"]
    print(f"{name}@{batch}: peak {peak / 1e9:.1f} GB = {peak / paper:.2f}x paper, "
          f"sum {total / 1e9:.1f} GB = {total / paper:.2f}x, {g.num_ops} ops")
    assert 0.5 <= peak / paper <= 2.0
    assert total >= peak


@pytest.mark.parametrize("name,batch", ALL_PAPER_BATCHES)
def test_largest_op_fits_a_16gb_gpu(name, batch):
    """The paper trains every model on a 16 GB V100: no single kernel may need more than half of it."""
    g = load_zoo(f"zoo:{name}@batch={batch}")
    nb = g.tensor_bytes()
    need = max(int(nb[list(set(o.inputs) | set(o.outputs))].sum()) + o.workspace for o in g.ops)
    assert need <= 8e9, f"{name}@{batch}: an op needs {need / 1e9:.1f} GB"


@pytest.mark.parametrize("name", [n for n in ZOO if n.startswith(("rnn", "brnn"))])
def test_rnn_graphs_are_unrolled(name):
    g = load_zoo(f"zoo:{name}")
    assert g.num_ops >= 5000, "an unrolled 8K LSTM has thousands of kernels"
    assert memory_stats(g)["unique_sizes"] <= 20, "an RNN has few distinct tensor sizes"


def test_only_formula_models_lack_a_data_file():
    missing = {n for n in ZOO if not zoo_path(n).exists()}
    assert missing == set(FORMULA), "a generated model lost its file: regenerate it with scripts/gen_zoo.py"


@pytest.mark.parametrize("name", list(ZOO))
def test_batch_scaling_is_linear(name):
    g2, g4 = load_zoo(f"zoo:{name}@batch=2"), load_zoo(f"zoo:{name}@batch=4")
    assert g2.fingerprint() != g4.fingerprint()
    assert [(o.inputs, o.outputs) for o in g2.ops] == [(o.inputs, o.outputs) for o in g4.ops]
    b2, b4 = g2.tensor_bytes(), g4.tensor_bytes()
    scales = b4 != b2
    # everything that depends on the batch is proportional to it (activations, their gradients, inputs)
    np.testing.assert_array_equal(b4[scales], 2 * b2[scales])
    acts = [t.id for t in g2.tensors if t.kind == "activation"]
    assert scales[acts].mean() > 0.5
    # weights and optimizer state do not depend on the batch
    persistent = [t.id for t in g2.tensors if t.kind in ("param", "optimizer_state")]
    assert not scales[persistent].any()
    f2 = np.array([o.flops for o in g2.ops])
    f4 = np.array([o.flops for o in g4.ops])
    assert f4.sum() == pytest.approx(2 * f2.sum(), rel=0.05)


def test_stored_files_match_the_zoo_table():
    """The data files were generated from the sizes ZOO states (regenerate after changing them)."""
    total = 0
    for name, info in STORED.items():
        path = zoo_path(name)
        total += path.stat().st_size
        with gzip.open(path, "rt") as f:
            doc = json.load(f)
        assert doc["model"] == name
        for k, v in info["config"].items():
            assert doc["meta"]["config"][k] == v, f"{name}: {k} differs; run scripts/gen_zoo.py --models {name}"
        assert len(doc["check_batches"]) >= 1
    assert total < 5e6, "committed zoo data should stay a few MB"


def test_loader_does_not_import_tvm():
    code = ("import sys; sys.modules['tvm'] = None\n"       # any `import tvm` now raises ImportError
            "from tvm_swap.zoo import load_zoo\n"
            "g = load_zoo('zoo:bert-large@batch=3'); g.validate()\n"
            "print(g.num_ops)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-c", "import sys; from tvm_swap.zoo import load_zoo; "
                        "load_zoo('rnn-8-8k@batch=1'); print('tvm' in sys.modules)"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


# ---- specs ----

@pytest.mark.parametrize("spec,want", [
    ("zoo:bert-large", ("bert-large", 32)),
    ("zoo:WResNet-152-10@batch=16", ("wresnet-152-10", 16)),
    ("inception-4@batch=7", ("inception-4", 7)),
    ("RNN-8-8K", ("rnn-8-8k", 256)),
    ("zoo:brnn_4_8k@batch= 64", ("brnn-4-8k", 64)),
])
def test_spec_parsing(spec, want):
    assert parse_zoo_spec(spec) == want


@pytest.mark.parametrize("spec,msg", [
    ("zoo:resnet-50", "unknown zoo model"),
    ("zoo:", "unknown zoo model"),
    ("zoo:bert-large@batch=0", "positive integer"),
    ("zoo:bert-large@batch=-4", "positive integer"),
    ("zoo:bert-large@batch=big", "positive integer"),
    ("zoo:bert-large@batch=", "batch=B"),
    ("zoo:bert-large@bs=4", "batch=B"),
])
def test_bad_specs_name_the_models(spec, msg):
    with pytest.raises(ZooError, match=msg) as e:
        load_zoo(spec)
    assert isinstance(e.value, TvmSwapError)
    if "unknown" in msg:
        assert all(n in str(e.value) for n in ZOO)


# ---- the affine format ----

def _toy(batch: int, quirk=None) -> DataflowGraph:
    """x (B,8) -> matmul w (8,4) -> y (B,4) -> sgd on w."""
    tensors = [TensorInfo(0, "x", 32 * batch, (batch, 8), "float32", "input"),
               TensorInfo(1, "w", 128, (8, 4), "float32", "param"),
               TensorInfo(2, "y", 16 * batch, (batch, 4), "float32", "activation", ("lv",)),
               TensorInfo(3, "w_new", 128, (8, 4), "float32", "param")]
    if quirk == "square":
        tensors[2] = TensorInfo(2, "y", 16 * batch * batch, (batch * batch, 4), "float32", "activation", ("lv",))
    kernel = "other" if quirk == "kernel" and batch >= 7 else "sgd_update"
    ops = [OpInfo(0, "mm", "matmul", (0, 1), (2,), 64.0 * batch),
           OpInfo(1, "upd", kernel, (1, 2), (3,), 2.0 * 32 + batch)]
    return DataflowGraph("toy", tensors, ops, outputs=[3], updates={3: 1}, meta={"tensor_source": [1, 2]})


def test_fit_and_instantiate_round_trip():
    doc = fit({b: _toy(b) for b in (2, 3, 5)}, "toy")
    assert doc["tensors"][0][1] == [32, 0] and doc["tensors"][1][1] == 128
    assert doc["tensors"][0][2] == [[1, 0], 8] and "tensor_source" not in doc["meta"]
    for b in (1, 4, 1000):
        g = instantiate(doc, b)
        assert g.fingerprint() == _toy(b).fingerprint()
        assert [o.flops for o in g.ops] == [o.flops for o in _toy(b).ops]
        assert g.tensors[0].shape == (b, 8) and g.tensors[2].views == ("lv",)
    json.dumps(doc)  # the document is plain JSON


def test_fit_rejects_non_affine_sizes_and_changing_structure():
    with pytest.raises(AffineFitError, match="not affine"):
        fit({b: _toy(b, "square") for b in (2, 3, 5)}, "toy")
    with pytest.raises(AffineFitError, match="structure must not depend on the batch"):
        fit({b: _toy(b, "kernel") for b in (2, 3, 7)}, "toy")
    with pytest.raises(ValueError, match="three"):
        fit({b: _toy(b) for b in (2, 3)}, "toy")


def test_instantiate_rejects_bad_input():
    doc = fit({b: _toy(b) for b in (2, 3, 5)}, "toy")
    for bad in (0, -1, 2.5, "4", True):
        with pytest.raises(GraphError, match="positive integer"):
            instantiate(doc, bad)
    with pytest.raises(GraphError, match="not a tvm_swap zoo file"):
        instantiate({"format": "tvm_swap.graph"}, 2)
    with pytest.raises(GraphError, match="malformed"):
        instantiate({**doc, "tensors": [["x", 1]]}, 2)


def test_scan_counts_workspace_and_frees_after_last_use():
    g = _toy(10)
    # x (320) and y (160) overlap at op 0; w (128) resident; w_new updates w in place
    assert linear_scan_peak(g) == peak_bytes(g) == 128 + 320 + 160


# ---- the TVM side: the train step is right, and the model code builds (tiny sizes, seconds) ----

def _mlp_loss(net):
    from tvm.relax import op as R

    x = net.input("x", (4, 8))
    y = net.input("y", (4,), "int64")
    h = net.emit(R.nn.gelu(net.dense(x, 16, "fc1")))     # gelu: its gradient is registered by us
    return net.softmax_cross_entropy(net.dense(h, 3, "fc2"), y)


def _numpy_step(x, y, ps):
    from scipy.special import erf

    w1, b1, w2, b2 = ps
    a = x @ w1 + b1
    h = 0.5 * a * (1 + erf(a / np.sqrt(2)))
    z = h @ w2 + b2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    loss = -np.log(p[np.arange(len(y)), y]).mean()
    d = p.copy()
    d[np.arange(len(y)), y] -= 1
    d /= len(y)
    da = (d @ w2.T) * (0.5 * (1 + erf(a / np.sqrt(2))) + a * np.exp(-a * a / 2) / np.sqrt(2 * np.pi))
    return loss, [x.T @ da, da.sum(0), h.T @ d, d.sum(0)]


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_train_step_matches_numpy(optimizer):
    import tvm
    from tvm import relax

    from tvm_swap.zoo.models.net import register_gelu_gradient
    from tvm_swap.zoo.models.training import OPTIMIZER_STATES, train_step_module

    register_gelu_gradient()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype("float32")
    y = np.array([0, 2, 1, 2])
    ps = [(rng.standard_normal(s) * 0.3).astype("float32") for s in [(8, 16), (16,), (16, 3), (3,)]]
    states = [(rng.standard_normal(p.shape) ** 2).astype("float32") for _ in OPTIMIZER_STATES[optimizer] for p in ps]
    mod = train_step_module(_mlp_loss, optimizer, lr=0.1)
    ex = relax.build(mod, "llvm", relax_pipeline=relax.get_default_pipeline(tvm.target.Target("llvm")))
    out = relax.VirtualMachine(ex, tvm.cpu())["train_step"](*[tvm.runtime.tensor(a) for a in [x, y, *ps, *states]])
    out = [o.numpy() for o in out]
    loss, grads = _numpy_step(x.astype("float64"), y, [p.astype("float64") for p in ps])
    if optimizer == "sgd":
        want = [p - 0.1 * g for p, g in zip(ps, grads)]
    elif optimizer == "momentum":
        v = [0.9 * v + g for v, g in zip(states, grads)]
        want = [p - 0.1 * vi for p, vi in zip(ps, v)] + v
    else:
        m = [0.9 * m + 0.1 * g for m, g in zip(states[:4], grads)]
        v = [0.999 * v + 0.001 * g * g for v, g in zip(states[4:], grads)]
        want = [p - 0.1 * mi / (np.sqrt(vi) + 1e-8) for p, mi, vi in zip(ps, m, v)] + m + v
    assert out[0] == pytest.approx(loss, abs=1e-5)
    assert len(out) == 1 + len(want)
    for got, exp in zip(out[1:], want):
        np.testing.assert_allclose(got, exp, rtol=1e-4, atol=1e-5)


def test_train_step_keeps_exactly_what_tvms_dead_code_elimination_keeps():
    """train_step drops dead bindings with its own linear sweep (TVM's DCE is superlinear); on a tiny
    NASNet with dead gradient aliases, TVM's DCE must find nothing left to remove."""
    import tvm
    from tvm import relax

    from tvm_swap.zoo.models import training_module
    from tvm_swap.zoo.models.training import TRAIN_FUNC

    mod = training_module("nasnet-25", 2, repeats=1, filters=8, stem_filters=6, image=32, classes=10)
    tvm.ir.assert_structural_equal(mod, relax.transform.DeadCodeElimination([TRAIN_FUNC])(mod))


@pytest.mark.parametrize("name,overrides", [
    ("wresnet-152-10", dict(blocks=(1, 1, 1, 1), width=1, image=32, classes=10)),
    ("rnn-8-8k", dict(layers=2, hidden=16, seq_len=3, vocab=11, embed=8)),
    ("brnn-4-8k", dict(layers=2, hidden=16, seq_len=3, vocab=11, embed=8)),
    ("bert-large", dict(layers=1, hidden=32, heads=2, ffn=64, seq_len=8, vocab=50)),
    ("nasnet-25", dict(repeats=1, filters=8, stem_filters=6, image=32, classes=10)),
])
def test_tiny_models_lower_and_extract(name, overrides):
    import tvm  # noqa: F401
    from relay_passes.lower import lower
    from tvm_swap.graph import from_relax
    from tvm_swap.zoo.models import MODELS, training_module

    mod = training_module(name, 2, **overrides)
    g = from_relax(lower(mod, "llvm", fuse_max_depth=MODELS[name].fuse_max_depth), "train_step")
    g.validate()
    weights = [t for t in g.tensors if t.kind == "param" and g.producer()[t.id] < 0]
    states = [t for t in g.tensors if t.kind == "optimizer_state" and g.producer()[t.id] < 0]
    n_slots = {"sgd": 0, "momentum": 1, "adam": 2}[MODELS[name].optimizer]
    assert len(states) == n_slots * len(weights)
    assert len(g.updates) == len(weights) + len(states)
    assert [t.kind for t in g.tensors if t.kind == "input"] and g.total_flops() > 0


def test_tiny_inference_model_lowers_to_a_forward_graph():
    import tvm  # noqa: F401
    from relay_passes.lower import lower
    from tvm_swap.graph import from_relax
    from tvm_swap.zoo.models import entry_function, training_module

    name = "resnet-152-inference"
    mod = training_module(name, 2, depth=50, image=32, classes=10)
    g = from_relax(lower(mod, "llvm"), entry_function(name))
    g.validate()
    assert entry_function(name) == "forward" and not g.updates
    assert {t.kind for t in g.tensors} == {"param", "input", "activation", "output"}
    assert len([o for o in g.ops if "conv2d" in o.kernel]) == 53   # ResNet-50: 48 + 4 projections + stem
