"""Regions of ops split in slices (issue 26, item 3; relay_passes.split_region, split_choice,
tvm_swap.limits.split_to_fit.split_regions_to_fit): batch, channels (a conv by output channels, its weight cut at
compile time) or rows; results bitwise equal to the unsplit build; each slice an op the planner places."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tvm
from tvm import relax

from relay_passes.param_layout import folded_layouts
from relay_passes.split_region import Region, SplitRefused, SplitRegions, chunk_bounds
from tests.shared_fixtures import needs_fixtures

SMALL_CNN_REGIONS = {
    "batch": [Region("lv", "smallcnn_pool1_fwd", 0, 3)],
    "channels": [Region("lv", "smallcnn_pool0_fwd", 1, 4)],
    "rows+channels": [Region("smallcnn_conv0_fwd", "smallcnn_hybridlambda0_relu0", 2, 3),
                      Region("lv3", "smallcnn_pool1_fwd", 1, 5)],
    # rows through 3x3 convs and 2x2 pools: each slice recomputes the rows under its windows (the halo)
    "rows through windows": [Region("lv", "smallcnn_pool1_fwd", 2, 3)],
    "rows through windows x5": [Region("lv", "smallcnn_pool0_fwd", 2, 5)],
}


def _small_cnn(batch):
    from tests.relay_passes.test_micro_batch import _small_cnn as load
    from tvm_swap.pipeline import fold_frozen_layouts

    mod, prm = load(batch)
    prm = {k: (v.numpy() if hasattr(v, "numpy") else np.asarray(v)) for k, v in prm.items()}
    return fold_frozen_layouts(mod)[0], prm


def _run(mod, user_params, x):
    """The unlimited build with TVM's own memory plan, fed the user's params through the module's layouts."""
    from relay_passes.lower import lower_unlimited_build

    lay = folded_layouts(mod["main"])
    p = lay.to_compute(user_params) if lay is not None else user_params
    vm = relax.VirtualMachine(lower_unlimited_build(mod, "llvm"), tvm.cpu())
    args = [x] + [p[q.name] for q in mod["main"].params[1:]]
    return vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()


def test_blocks_cover_the_axis_in_order():
    assert chunk_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert chunk_bounds(4, 4) == [(i, i + 1) for i in range(4)]


@needs_fixtures("mxnet")
@pytest.mark.parametrize("which", sorted(SMALL_CNN_REGIONS))
def test_split_regions_are_bitwise_the_unsplit_model(which):
    mod, prm = _small_cnn(8)
    x = np.random.default_rng(0).standard_normal([8, 3, 32, 32]).astype("float32")
    split = SplitRegions(SMALL_CNN_REGIONS[which])(mod)
    assert len(split["main"].body.blocks[0].bindings) > len(mod["main"].body.blocks[0].bindings)
    np.testing.assert_array_equal(_run(split, prm, x), _run(mod, prm, x))


@needs_fixtures("mxnet")
def test_weights_read_by_channel_slices_are_cut_at_compile_time_and_given_back_whole():
    mod, prm = _small_cnn(8)
    split = SplitRegions(SMALL_CNN_REGIONS["channels"])(mod)
    names = [p.name for p in split["main"].params]
    assert [f"smallcnn_conv0_weight_c{i}" for i in range(4)] == [n for n in names if n.startswith("smallcnn_conv0_w")]
    lay = folded_layouts(split["main"])
    compute = lay.to_compute(prm)
    assert compute["smallcnn_conv0_weight_c1"].shape == (4, 3, 3, 3)
    assert np.array_equal(compute["smallcnn_conv0_weight_c1"], prm["smallcnn_conv0_weight"][4:8])
    back = lay.to_user(compute)
    assert all(np.array_equal(back[n], prm[n]) for n in prm)


@needs_fixtures("mxnet")
def test_ops_that_mix_slices_are_refused_by_name():
    mod, _ = _small_cnn(8)
    # channels through conv1: a conv reduces over its input channels, a channel slice cannot feed it
    with pytest.raises(SplitRefused, match=r"relax.nn.conv2d.*'lv3'.*axis 1.*whole"):
        SplitRegions([Region("lv", "lv3", 1, 2)])(mod)
    # a dense layer mixes all rows of its input
    with pytest.raises(SplitRefused, match=r"relax.reshape.*axis 2"):
        SplitRegions([Region("lv", "smallcnn_flatten0_flatten0", 2, 2)])(mod)
    with pytest.raises(SplitRefused, match="overlap"):
        SplitRegions([Region("lv", "lv2", 0, 2), Region("lv2", "smallcnn_pool0_fwd", 0, 2)])(mod)


def _training_step():
    from tests.relay_passes.test_param_layout import linear_model
    from tvm_swap.training import train_step

    mod, params = linear_model()
    return train_step(mod, params, loss="mse", optimizer="sgd")[0]


def test_a_training_step_is_split_along_the_batch_only():
    with pytest.raises(SplitRefused, match="along the batch"):
        SplitRegions([Region("a", "b", 1, 2)])(_training_step())


@needs_fixtures("mxnet")
def test_the_chosen_regions_lower_the_exact_floor():
    """small_cnn at batch 128: its max pool holds an 8 MiB input and a 2 MiB output; the regions chosen for
    a room of a third of that bring the lowered graph's floor below the unsplit one's largest op."""
    from relay_passes.lower import lower
    from relay_passes.split_choice import choose_regions
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.planner.api import feasible_floor

    mod, _ = _small_cnn(128)
    floors = []
    for m in (mod, SplitRegions(choose_regions(mod["main"], 4 << 20))(mod)):
        floors.append(feasible_floor(graph_from_relax(lower(m, "llvm"), "main", target="llvm"), "arena")[0])
    assert floors[0] > 8 << 20 and floors[1] <= 4 << 20 + 4096


@pytest.mark.slow
@needs_fixtures("mxnet")
def test_build_below_the_unsplit_floor_with_split_ops_runs_bitwise_within_the_limit():
    import tvm_swap
    from tvm_swap.errors import InfeasibleLimitError
    from tvm_swap.verify import verify_plan

    from tests.relay_passes.test_micro_batch import _small_cnn as load

    mod, prm = load(8)
    prm = {k: (v.numpy() if hasattr(v, "numpy") else np.asarray(v)) for k, v in prm.items()}
    limit = "35%"         # unsplit floor: ~62% of the no-swap need (its first conv's input and output)
    with pytest.raises(InfeasibleLimitError):
        tvm_swap.build(mod, mem_limit=limit, params=prm, profile=False, generations=2, graph_cache=False)
    m = tvm_swap.build(mod, mem_limit=limit, params=prm, profile=False, generations=2, split_ops=True,
                       graph_cache=False)
    assert m.compiled.info["split_regions"] and m.plan.verified
    assert verify_plan(m.compiled.graph, m.plan, m.plan.mem_limit) == []
    x = np.random.default_rng(2).standard_normal([8, 3, 32, 32]).astype("float32")
    np.testing.assert_array_equal(m(x), _run(_small_cnn(8)[0], prm, x))
    assert m.stats()["device_peak_bytes"] <= m.plan.mem_limit


@needs_fixtures("mxnet")
def test_the_verifier_refuses_two_live_slices_in_overlapping_bytes():
    """Slices are ordinary ops with their own tensors: the verifier's rule that tensors live at once never
    share bytes is what keeps slices apart. Two slices' results, both live until they are joined, put at one
    offset: refused."""
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.planner.api import plan_graph
    from tvm_swap.verify import verify_plan

    mod, _ = _small_cnn(8)
    split = SplitRegions([Region("lv", "smallcnn_pool0_fwd", 0, 2)])(mod)
    g = graph_from_relax(lower(split, "llvm"), "main", target="llvm")
    plan = plan_graph(g, "100%", planner="swapadvisor-nosearch", device="cpu", pool="arena")
    join = next(o for o in g.ops if "concatenate" in o.kernel)
    a, b = join.inputs[:2]
    obj = {}
    for act in plan.actions:
        if act.op >= 0 and act.out_objs:
            for t, o in zip(g.ops[act.op].outputs, act.out_objs):
                obj[t] = o
    offsets = list(plan.pool.offsets)
    assert offsets[obj[a]] != offsets[obj[b]] and verify_plan(g, plan) == []
    offsets[obj[b]] = offsets[obj[a]]
    bad = dataclasses.replace(plan, pool=dataclasses.replace(plan.pool, offsets=offsets))
    assert any("overlap" in p or "live" in p for p in verify_plan(g, bad))


@pytest.mark.slow
def test_a_limit_that_needs_no_split_plans_the_same_with_split_ops():
    """split_ops only acts below the unsplit floor: above it the plan is the one compiled without it."""
    from tvm_swap.examples import get_example
    from tvm_swap.pipeline import compile_model

    def stable(plan):        # (as scripts/plan_hashes.py: all but the search's wall-clock fields)
        d = plan.to_dict()
        d.pop("search", None)
        return d

    ex = get_example("cnn")
    cms = [compile_model(ex.mod, mem_limit="60%", profile=False, generations=2, graph_cache=False, split_ops=s)
           for s in (False, True)]
    assert "split_regions" not in cms[1].info and stable(cms[0].plan) == stable(cms[1].plan)


@pytest.mark.slow
@needs_fixtures("mxnet")
def test_batch_one_splits_by_channels_or_rows_and_the_library_gives_the_whole_weights_back(tmp_path):
    import tvm_swap

    from tests.relay_passes.test_micro_batch import _small_cnn as load

    mod, prm = load(1)
    prm = {k: (v.numpy() if hasattr(v, "numpy") else np.asarray(v)) for k, v in prm.items()}
    limit = 78_000        # unsplit floor 533,248 bytes (dense0's weight); dense split alone: 82,176 (pool0)
    m = tvm_swap.build(mod, mem_limit=limit, params=prm, profile=False, generations=2, split_ops=True,
                       graph_cache=False)
    regions = m.compiled.info["split_regions"]
    assert m.compiled.info["dense_splits"] and regions and all(axis in (1, 2) for _, _, axis, _ in regions)
    x = np.random.default_rng(3).standard_normal([1, 3, 32, 32]).astype("float32")
    np.testing.assert_array_equal(m(x), _run(_small_cnn(1)[0], prm, x))
    assert m.stats()["device_peak_bytes"] <= limit
    m2 = tvm_swap.load(m.export_library(tmp_path / "m.so"))
    assert all(np.array_equal(m2.params()[n], prm[n]) for n in prm) and np.array_equal(m2(x), m(x))


def _residual_block():
    """x -> conv3x3 -> relu -> conv3x3 (stride 1) -> + x -> relu -> max_pool 2x2: a residual block in NCHW."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([1, 4, 13, 9], "float32"))
    w1 = relax.Var("w1", relax.TensorType([4, 4, 3, 3], "float32"))
    w2 = relax.Var("w2", relax.TensorType([4, 4, 3, 3], "float32"))
    with bb.function("main", [x, w1, w2], attrs={"num_input": 1}):
        with bb.dataflow():
            h = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, w1, padding=[1, 1, 1, 1])), name_hint="h")
            y = bb.emit(relax.op.nn.conv2d(h, w2, padding=[1, 1, 1, 1]), name_hint="y")
            s = bb.emit(relax.op.nn.relu(relax.op.add(y, x)), name_hint="s")
            out = bb.emit_output(relax.op.nn.max_pool2d(s, pool_size=[2, 2], strides=[2, 2]))
        bb.emit_func_output(out)
    rng = np.random.default_rng(4)
    return bb.get(), {n: rng.standard_normal(s).astype("float32") for n, s in (("w1", (4, 4, 3, 3)),
                                                                                ("w2", (4, 4, 3, 3)))}


@pytest.mark.parametrize("k", [2, 3, 5])
def test_rows_through_a_residual_block_recompute_the_halo_bitwise(k):
    """Two 3x3 convs in a row: each slice needs two more rows on each side of its input (the halo grows), and
    the residual add reads the block's input at the slice's own rows."""
    mod, prm = _residual_block()
    names = [b.var.name for b in mod["main"].body.blocks[0].bindings]
    split = SplitRegions([Region(names[0], names[-1], 2, k)])(mod)
    x = np.random.default_rng(5).standard_normal([1, 4, 13, 9]).astype("float32")
    np.testing.assert_array_equal(_run(split, prm, x), _run(mod, prm, x))
