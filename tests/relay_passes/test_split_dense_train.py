"""Trainable dense weights in row chunks through the training step (issue 26; relay_passes.split_dense_train,
tvm_swap.limits.split_train): forward, dX, dW and the optimizer update each read one chunk; results bitwise
equal to the unsplit step over chained steps; the user gives and gets the whole weight; a training step below
its unsplit floor compiles with split_dense=True."""
from __future__ import annotations

import numpy as np
import pytest

import tvm
from tvm import relax

import tvm_swap
from relay_passes.lower import build_lowered, lower
from relay_passes.param_layout import folded_layouts
from relay_passes.split_dense_train import SplitTrainableDense, plan_split, trainable_splittable
from tvm_swap.errors import InfeasibleLimitError
from tvm_swap.training import train_step

B, S, IN, HID, OUT = 2, 3, 12, 20, 6


def seq_model(extra_read: bool = False):
    """x (B, S, IN) -> linear(W1, b1) -> relu -> linear(W2): 3-D activations, so dW goes through a batched
    matmul and collapse_sum (as a transformer's). extra_read: W2 also read elementwise (not splittable)."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([B, S, IN], "float32"))
    w1 = relax.Var("w1", relax.TensorType([HID, IN], "float32"))
    b1 = relax.Var("b1", relax.TensorType([HID], "float32"))
    w2 = relax.Var("w2", relax.TensorType([OUT, HID], "float32"))
    with bb.function("main", [x, w1, b1, w2], attrs={"num_input": 1}):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.relu(relax.op.linear(x, w1, b1)))
            y = relax.op.linear(h, w2)
            if extra_read:
                y = relax.op.add(y, relax.op.sum(relax.op.multiply(w2, w2)))
            y = bb.emit_output(y)
        bb.emit_func_output(y)
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((HID, IN)).astype("float32"),
              "b1": rng.standard_normal(HID).astype("float32"),
              "w2": rng.standard_normal((OUT, HID)).astype("float32")}
    return bb.get(), params


def chained_steps(step, state: dict, inputs: list, n: int = 3):
    """(losses, state after n steps): the step run with TVM's own memory plan, each step's new params fed to
    the next (tvm_swap.updates)."""
    vm = relax.VirtualMachine(build_lowered(lower(step, "llvm"), "llvm"), tvm.cpu())
    f = step["main"]
    k = int(f.attrs["num_input"])
    names = [p.name for p in f.params[k:]]
    state, losses = dict(state), []
    for _ in range(n):
        out = vm["main"](*[tvm.runtime.tensor(x) for x in inputs], *[tvm.runtime.tensor(state[m]) for m in names])
        losses.append(out[0].numpy())
        for o, p in f.attrs["tvm_swap.updates"]:
            state[f.params[int(p)].name] = out[int(o)].numpy()
    return losses, state


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_split_step_is_bitwise_equal_to_the_unsplit_over_three_steps(optimizer):
    mod, params = seq_model()
    step, state = train_step(mod, params, loss="mse", optimizer=optimizer, lr=0.05)
    assert set(trainable_splittable(step["main"])) == {"w1", "w2"}
    split = SplitTrainableDense({"w1": 3, "w2": 4})(step)
    names = [p.name for p in split["main"].params]
    assert [n for n in names if n.startswith("w1_s")] == ["w1_s0", "w1_s1", "w1_s2"] and "w1" not in names
    if optimizer == "adam":        # its state of the weight's shape is cut with it
        assert "w2__adam_m_s3" in names and "w2__adam_m" not in names
    rng = np.random.default_rng(1)
    x = rng.standard_normal((B, S, IN)).astype("float32")
    labels = rng.standard_normal((B, S, OUT)).astype("float32")
    state = {k: (v if np.any(v) else np.abs(rng.standard_normal(v.shape)).astype(v.dtype)) for k, v in state.items()}
    want_losses, want = chained_steps(step, state, [x, labels])
    layouts = folded_layouts(split["main"])
    got_losses, got = chained_steps(split, layouts.to_compute(state), [x, labels])
    got = layouts.to_user(got)
    assert all(np.array_equal(a, b) for a, b in zip(want_losses, got_losses))
    assert sorted(got) == sorted(want) and all(np.array_equal(want[k], got[k]) for k in want)
    assert want_losses[2] != want_losses[0]       # (the steps did train)


def test_each_kernel_reads_one_chunk_of_the_weight():
    """No kernel of the split step reads the whole weight: the floor op holds a chunk."""
    from tvm_swap.graph.extract import graph_from_relax

    mod, params = seq_model()
    step, _ = train_step(mod, params, loss="mse", optimizer="sgd")
    g = graph_from_relax(lower(SplitTrainableDense({"w1": 4})(step), "llvm"), "main")
    w1 = [t for t in g.tensors if t.name.startswith("w1")]
    assert sorted(t.name for t in w1) == [f"w1_s{k}" for k in range(4)]
    assert all(t.shape[0] == HID // 4 for t in w1)
    for op in g.ops:
        assert sum(g.tensors[t].name.startswith("w1_s") for t in op.inputs) <= 1, op.name


def test_a_weight_read_otherwise_is_not_split_and_says_why():
    mod, params = seq_model(extra_read=True)
    step, _ = train_step(mod, params, loss="mse", optimizer="sgd")
    assert set(trainable_splittable(step["main"])) == {"w1"}
    plan, why = plan_split(step["main"], "w2")
    assert plan is None and "read" in why
    with pytest.raises(ValueError, match="cannot split 'w2'"):
        SplitTrainableDense({"w2": 2})(step)


def test_a_training_step_below_its_floor_compiles_split_and_runs_bitwise(tmp_path):
    """The bundled mlp's training step at 30% of its no-swap need (its unsplit floor is ~92%, set by the
    first layer's dW and update): refused without split_dense; with it, the first weight in K row chunks,
    a verified plan, three chained steps bitwise equal to the unlimited build, device peak within the limit,
    and the user's whole weights back (also from an exported library)."""
    from bench.min_limit import mxnet_module

    mod, prm = mxnet_module("mlp", 1)
    step, state = train_step(mod, prm, loss="cross_entropy", optimizer="sgd")
    rng = np.random.default_rng(0)
    x, labels = rng.standard_normal((1, 784)).astype("float32"), np.array([3], "int64")
    with pytest.raises(InfeasibleLimitError, match=r"split_dense=True runs the weight through the step"):
        tvm_swap.build(step, mem_limit="30%", params=state, profile=False, generations=2, graph_cache=False)
    ref = tvm_swap.build(step, mem_limit=None, params=state, profile=False)
    m = tvm_swap.build(step, mem_limit="30%", params=state, profile=False, generations=2, split_dense=True)
    splits = m.compiled.info["dense_splits"]
    assert splits.get("mlp_dense0_weight", 1) >= 2 and m.plan.verified
    for _ in range(3):
        assert np.array_equal(ref(x, labels)[0], m(x, labels)[0])
    want, got = ref.params(), m.params()
    assert sorted(want) == sorted(got) and all(np.array_equal(want[k], got[k]) for k in want)
    assert m.stats()["device_peak_bytes"] <= int(0.3 * m.compiled.info["unsplit_no_swap_bytes"]) + 256
    m2 = tvm_swap.load(m.export_library(tmp_path / "step.so"))
    assert all(np.array_equal(m2.params()[k], got[k]) for k in got)


@pytest.mark.slow       # a compile and a run with the unlimited build, each in its own process (~40 s loaded)
def test_cli_compiles_a_split_training_step_and_run_compares_it_bitwise(tmp_path):
    """`tvm-swap compile ... --train --init random --split-dense --mem-limit 30%` + `tvm-swap run
    --compare-unlimited`: the chunk results joined into the user's weights line up with the unsplit build's
    (cli/run_steps.result_groups), every chained step bitwise equal, the device peak within the limit."""
    import json
    from pathlib import Path

    from tests.cli.test_cli import tvm_swap as cli

    sym = Path(__file__).resolve().parents[1] / "data" / "mxnet" / "mlp-symbol.json"
    lib = str(tmp_path / "step.so")
    r = cli("compile", str(sym), "--shape", "data=1,784", "--train", "--init", "random", "--mem-limit", "30%",
            "--split-dense", "--generations", "2", "-o", lib, "--json", "-q")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["dense_splits"]["mlp_dense0_weight"] >= 2
    r = cli("run", lib, "--compare-unlimited", "--repeat", "3", "--json", "-q")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["bitwise_equal_per_step"] == [True, True, True] and out["within_limit"]


def test_one_chunk_budget_gives_each_weight_its_smallest_k():
    from tvm_swap.limits.split_train import splits_for_budget

    cands = {"a": (64, 100), "b": (10, 10), "c": (3, 1000)}          # 25600, 400, 12000 bytes
    assert splits_for_budget(cands, 10000) == {"a": 3, "c": 2}
    assert splits_for_budget(cands, 100) == {"a": 64, "b": 4, "c": 3}  # (at most one row per chunk)


@pytest.mark.slow       # up to 8 lowerings of the step (~40 s loaded)
def test_split_floor_of_a_training_step_splits_its_trainable_weights():
    """tvm_swap.limits.split_to_fit.split_floor (bench min_limit's "with splits" column, split_dense=True's
    search) on a training step: its trainable weights in row chunks, a lower arena floor than unsplit."""
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.limits.split_to_fit import split_floor
    from tvm_swap.planner.api import feasible_floor

    def lower_graph(m):
        low = lower(m, "llvm")
        return low, graph_from_relax(low, "main", target="llvm")

    from bench.min_limit import mxnet_module

    mod, prm = mxnet_module("mlp", 1)
    step, _ = train_step(mod, prm, loss="cross_entropy", optimizer="sgd")
    before = feasible_floor(lower_graph(step)[1], "arena")[0]
    _, graph, splits = split_floor(step, lower_graph)
    assert splits.get("mlp_dense0_weight", 1) >= 2
    assert feasible_floor(graph, "arena")[0] < 0.3 * before
