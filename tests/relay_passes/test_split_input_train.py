"""A training step's input read in batch slices (issue 26, mlp at batch 128; relay_passes.split_input_train):
the forward matmul per slice, the weight gradient one sum continued slice to slice in the unsplit order;
results bitwise equal to the unsplit step over three chained steps (llvm), with and without the weight in row
chunks; no kernel reads the whole input; any other reader of the input is refused by name."""
from __future__ import annotations

import json

import numpy as np
import pytest

from relay_passes.split_dense_train import SplitTrainableDense
from relay_passes.split_input_train import INPUT_SPLITS_ATTR, InputSplitRefused, SplitInputBatch
from tests.relay_passes.test_split_dense_train import chained_steps
from tests.shared_fixtures import needs_fixtures

B = 12


def _mlp_step(batch: int = B):
    from bench.min_limit import mxnet_module
    from tvm_swap.pipeline import fold_frozen_layouts
    from tvm_swap.training import train_step

    mod, prm = mxnet_module("mlp", batch)
    step, state = train_step(mod, prm, loss="cross_entropy", optimizer="sgd")
    state = {k: (v.numpy() if hasattr(v, "numpy") else np.asarray(v)) for k, v in state.items()}
    rng = np.random.default_rng(4)
    x = rng.standard_normal((batch, 784)).astype("float32")
    labels = rng.integers(0, 10, batch).astype("int64")
    return fold_frozen_layouts(step)[0], state, x, labels


def _sliced(split, x):
    rec = json.loads(str(split["main"].attrs[INPUT_SPLITS_ATTR]))
    return [x[lo:hi] for _, lo, hi in rec["data"]]


@needs_fixtures("mxnet")
@pytest.mark.parametrize("k, chunks", [(2, 1), (5, 1), (3, 4)])
def test_input_slices_are_bitwise_the_unsplit_step_over_three_steps(k, chunks):
    from relay_passes.param_layout import folded_layouts

    step, state, x, labels = _mlp_step()
    split = SplitTrainableDense({"mlp_dense0_weight": chunks})(step) if chunks > 1 else step
    split = SplitInputBatch({"data": k})(split)
    names = [p.name for p in split["main"].params]
    assert [n for n in names if n.startswith("data")] == [f"data_b{c}" for c in range(k)]
    assert int(split["main"].attrs["num_input"]) == k + 1
    want_losses, want = chained_steps(step, state, [x, labels])
    lay = folded_layouts(split["main"])
    got_losses, got = chained_steps(split, lay.to_compute(state) if lay is not None else state,
                                    [*_sliced(split, x), labels])
    got = lay.to_user(got) if lay is not None else got
    assert all(np.array_equal(a, b) for a, b in zip(want_losses, got_losses))
    assert sorted(want) == sorted(got) and all(np.array_equal(want[n], got[n]) for n in want)


@needs_fixtures("mxnet")
def test_no_kernel_reads_the_whole_input_and_the_floor_drops():
    """mlp at batch 32: each kernel of the split step reads one slice of `data` (the graph has no `data`); the
    arena floor with the input in 4 slices is below the one with the weight in chunks alone."""
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.planner.api import feasible_floor

    step, _, _, _ = _mlp_step(32)
    chunked = SplitTrainableDense({"mlp_dense0_weight": 8})(step)
    split = SplitInputBatch({"data": 4})(chunked)
    graphs = [graph_from_relax(lower(m, "llvm"), "main", target="llvm") for m in (chunked, split)]
    names = {t.name for t in graphs[1].tensors}
    assert "data" not in names and {f"data_b{c}" for c in range(4)} <= names
    assert feasible_floor(graphs[1], "arena")[0] < feasible_floor(graphs[0], "arena")[0]


def test_other_readers_of_the_input_are_refused_by_name():
    from tests.relay_passes.test_split_dense_train import seq_model
    from tvm_swap.training import train_step

    mod, params = seq_model()            # x (B, S, IN): a 3-D matmul reads it
    step, _ = train_step(mod, params, loss="mse", optimizer="sgd")
    with pytest.raises(InputSplitRefused, match=r"cannot read input 'x' in batch slices at binding"):
        SplitInputBatch({"x": 2})(step)
    with pytest.raises(InputSplitRefused, match="not an input"):
        SplitInputBatch({"w1": 2})(step)
    with pytest.raises(InputSplitRefused, match="training step"):
        SplitInputBatch({"x": 2})(mod)


@needs_fixtures("mxnet")
def test_a_step_built_below_its_floor_takes_the_whole_input_and_runs_bitwise(tmp_path):
    """tvm_swap.build with split_dense=True at a limit the weight's row chunks alone do not reach: the input in
    batch slices too (build_info["input_splits"]); the user gives `data` whole (also to an exported library),
    three chained steps bitwise equal to the unlimited build, the device peak within the limit."""
    import tvm_swap

    step, state, x, labels = _mlp_step(64)
    ref = tvm_swap.build(step, mem_limit=None, params=state, profile=False)
    m = tvm_swap.build(step, mem_limit="22%", params=state, profile=False, generations=2, split_dense=True,
                       graph_cache=False)
    assert m.compiled.info["input_splits"]["data"] >= 2 and m.input_names == ["data", "labels"]
    for _ in range(3):
        assert np.array_equal(ref(x, labels)[0], m(x, labels)[0])
    want, got = ref.params(), m.params()
    assert all(np.array_equal(want[k], got[k]) for k in want)
    assert m.stats()["device_peak_bytes"] <= m.plan.mem_limit
    m2 = tvm_swap.load(m.export_library(tmp_path / "step.so"))
    assert m2.input_names == ["data", "labels"]
    assert np.isfinite(m2(x, labels)[0]).all()          # (takes the whole input too)


@needs_fixtures("mxnet")
def test_the_budget_bounds_the_input_slices_and_their_product_with_the_chunks():
    """split_train's chunk budget: the fewest slices of the input within it, at most MAX_INPUT_SLICES, and at
    most MAX_SLICE_PAIRS over the weight's chunks (each chunk's kernels run once per slice)."""
    from tvm_swap.limits.split_train import MAX_INPUT_SLICES, MAX_SLICE_PAIRS, input_slices_for_budget

    f = _mlp_step(128)[0]["main"]               # data: 128 x 784 f32 = 392 KiB
    assert input_slices_for_budget(f, 200 * 1024, {"w": 2}) == {"data": 2}
    assert input_slices_for_budget(f, 1024, {}) == {"data": MAX_INPUT_SLICES}
    assert input_slices_for_budget(f, 1024, {"w": MAX_SLICE_PAIRS // 2}) == {"data": 2}
    assert input_slices_for_budget(f, 1 << 20, {}) == {}
