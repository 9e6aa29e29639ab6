"""Regions of a training step split along the batch (issue 26; relay_passes.split_region, split_rules,
tvm_swap.limits.split_to_fit): only per-sample ops (elementwise, comparisons and `where`, pools and their
gradients, a conv's forward, a dense layer's dX) are split; every op that reduces over the batch (batch norm's
statistics, a parameter's gradient, the loss) is refused. Results bitwise equal to the unsplit step over three
chained steps (llvm)."""
from __future__ import annotations

import numpy as np
import pytest

from relay_passes.param_layout import folded_layouts
from relay_passes.split_region import Region, SplitRefused, SplitRegions, _flat_bindings, activations
from tests.relay_passes.test_split_dense_train import chained_steps
from tests.shared_fixtures import needs_fixtures


def _cnn_step(batch: int):
    from tests.relay_passes.test_micro_batch import _small_cnn
    from tvm_swap.pipeline import fold_frozen_layouts
    from tvm_swap.training import train_step

    mod, prm = _small_cnn(batch)
    step, state = train_step(mod, prm, loss="cross_entropy", optimizer="sgd")
    state = {k: (v.numpy() if hasattr(v, "numpy") else np.asarray(v)) for k, v in state.items()}
    return fold_frozen_layouts(step)[0], state


def _inputs(batch: int, seed: int = 3):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((batch, 3, 32, 32)).astype("float32"), rng.integers(0, 10, batch).astype("int64")]


def _assert_bitwise(step, split, state, inputs):
    want_losses, want = chained_steps(step, state, inputs)
    lay = folded_layouts(split["main"])
    got_losses, got = chained_steps(split, lay.to_compute(state) if lay is not None else state, inputs)
    got = lay.to_user(got) if lay is not None else got
    assert all(np.array_equal(a, b) for a, b in zip(want_losses, got_losses))
    assert sorted(want) == sorted(got)
    for k in want:
        assert np.array_equal(want[k], got[k]), k


def _each_splittable_op(step):
    """[Region] of every single binding of the step that SplitRegions takes along the batch (K=2), and the
    names of the ops it refused: each rule the training step enables, applied on its own."""
    func = step["main"]
    bindings = _flat_bindings(func)
    act = activations(func, bindings)
    names = [b.var.name for b in bindings]
    taken, refused = [], set()
    for b in bindings:
        if b.var not in act or names.count(b.var.name) > 1 or not hasattr(b.value, "op"):
            continue
        region = Region(b.var.name, b.var.name, 0, 2)
        try:
            SplitRegions([region])(step)
        except SplitRefused:
            refused.add(b.value.op.name)
            continue
        taken.append(region)
    return taken, refused


@needs_fixtures("mxnet")
def test_every_op_a_training_step_splits_keeps_it_bitwise_over_three_steps():
    """small_cnn's training step (conv, batch norm in training mode, ReLU, max pool, dense, cross entropy,
    SGD) with every op the rules take split along the batch at once: the three chained steps' losses and
    parameters are bitwise the unsplit step's. A rule that let a batch-reducing op be split would change a
    gradient's summation order (or its shape) and fail here."""
    step, state = _cnn_step(4)
    regions, refused = _each_splittable_op(step)
    split_ops = {b.value.op.name for b in _flat_bindings(step["main"])
                 if any(b.var.name == r.start for r in regions)}
    # the backward's per-sample ops are among them: the pool's gradient and ReLU's
    assert {"relax.grad.max_pool2d_backward", "relax.where", "relax.less", "relax.nn.max_pool2d",
            "relax.nn.relu", "relax.matmul", "relax.reshape"} <= split_ops
    # what reduces over the batch is refused: parameter gradients, batch statistics
    assert {"relax.collapse_sum_to", "relax.sum", "relax.matmul", "relax.nn.conv2d"} <= refused
    _assert_bitwise(step, SplitRegions(regions)(step), state, _inputs(4))


@needs_fixtures("mxnet")
@pytest.mark.parametrize("k", [2, 3])
def test_the_pool_backward_region_in_slices_is_bitwise_over_three_steps(k):
    """The region that set small_cnn@128's training floor (max pool's backward fused with ReLU's), as
    split_choice picks it, in K slices of an uneven batch."""
    step, state = _cnn_step(5)
    split = SplitRegions([Region("smallcnn_hybridlambda0_relu0_adjoint", "lv9_adjoint1", 0, k)])(step)
    _assert_bitwise(step, split, state, _inputs(5))


@needs_fixtures("mxnet")
def test_ops_that_reduce_over_the_batch_are_never_split():
    """Batch norm's batch statistics, a bias's and a conv weight's gradient (collapse_sum over the batch, a
    conv in CNHW), a dense weight's gradient (dY^T X): each refused by name along the batch;
    a training step is refused along channels or rows (a channel slice would cut batch norm's per-channel sums)."""
    step, _ = _cnn_step(4)
    names = {b.var.name: b.value.op.name for b in _flat_bindings(step["main"]) if hasattr(b.value, "op")}
    reducing = {"lv44": "relax.sum", "smallcnn_conv0_bias_adjoint": None, "lv1_adjoint3": "relax.collapse_sum_to",
                "smallcnn_conv0_weight_adjoint": "relax.nn.conv2d", "smallcnn_dense0_weight_adjoint": "relax.matmul",
                "smallcnn_dense1_bias_adjoint": "relax.collapse_sum_to"}
    for name, op in reducing.items():
        if op is not None:
            assert names[name] == op, name
        with pytest.raises(SplitRefused, match=f"cannot split .*{name}"):
            SplitRegions([Region(name, name, 0, 2)])(step)
    with pytest.raises(SplitRefused, match=r"cannot split 'relax.sum' .*'lv44'"):
        SplitRegions([Region("lv43", "lv44", 0, 2)])(step)
    with pytest.raises(SplitRefused, match="along the batch .axis 0. only"):
        SplitRegions([Region("smallcnn_hybridlambda0_relu0_adjoint", "lv9_adjoint1", 1, 2)])(step)


@needs_fixtures("mxnet")
def test_the_chosen_training_regions_are_along_the_batch_and_lower_the_floor():
    """split_regions_floor on small_cnn's training step at batch 32: regions along the batch only, a lower
    arena floor than the unsplit step's (whose floor is the pool backward fused with ReLU's)."""
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.limits.split_to_fit import split_regions_floor
    from tvm_swap.planner.api import feasible_floor

    step, _ = _cnn_step(32)

    def lower_graph(m):
        low = lower(m, "llvm")
        return low, graph_from_relax(low, "main", target="llvm")

    before = feasible_floor(lower_graph(step)[1], "arena")[0]
    _, graph, regions = split_regions_floor(step, lower_graph)
    assert regions and all(r.axis == 0 for r in regions)
    assert feasible_floor(graph, "arena")[0] < 0.85 * before
