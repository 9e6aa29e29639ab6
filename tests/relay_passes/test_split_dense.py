"""Dense layers split by output features (issue 26, item 3; relay_passes.split_dense, tvm_swap.limits.split_to_fit): the
weight pre-chunked at compile time into K parameters, each slice a kernel the planner schedules, swaps and
places; results bitwise equal to the unsplit build; K the smallest that fits the limit."""
from __future__ import annotations

import numpy as np
import pytest

import tvm_swap
from relay_passes.param_layout import FoldParamLayouts, folded_layouts
from relay_passes.split_dense import SplitDenseByOutputFeatures, chunk_bounds, splittable
from tests.relay_passes.test_param_layout import BATCH, HID, IN, linear_model, plain_run
from tvm_swap.errors import InfeasibleLimitError
from tvm_swap.pipeline import compile_model


def test_chunks_cover_the_columns_in_order():
    assert chunk_bounds(40, 3) == [(0, 14), (14, 27), (27, 40)]
    assert chunk_bounds(8, 8) == [(i, i + 1) for i in range(8)]


def test_split_is_bitwise_equal_and_the_user_keeps_the_whole_weight(tmp_path):
    mod, params = linear_model()
    folded = FoldParamLayouts()(mod)
    assert splittable(folded["main"]) == {"w1_T": (IN, HID), "w2_T": (HID, 8)}
    split = SplitDenseByOutputFeatures({"w1_T": 3})(folded)
    names = [p.name for p in split["main"].params]
    assert names == ["x", "w1_T_s0", "w1_T_s1", "w1_T_s2", "b1", "w2_T"]
    layouts = folded_layouts(split["main"])
    compute = layouts.to_compute(params)
    assert np.array_equal(np.concatenate([compute[f"w1_T_s{i}"] for i in range(3)], axis=1), params["w1"].T)
    back = layouts.to_user(compute)
    assert all(np.array_equal(back[n], params[n]) for n in params)


def test_a_limit_below_the_unsplit_floor_is_met_by_the_fewest_slices_bitwise(tmp_path):
    """A limit below what the whole first weight needs: compile splits it (K the smallest that fits), plans,
    runs bitwise equal to the unsplit, unfused build, and the library gives the user's weights back."""
    mod, params = linear_model()
    unsplit = compile_model(mod, mem_limit=None, profile=False, graph_cache=False).graph
    from tvm_swap.limits.mem_limit import floor_op

    name, need, _ = floor_op(unsplit)
    assert "w1_T" in {unsplit.tensors[t].name for t in next(o for o in unsplit.ops if o.name == name).inputs}
    limit = int(need * 0.6)
    # (before lowering: the weight alone is too big; after a lowering this session cached: the exact floor's hint)
    with pytest.raises(InfeasibleLimitError, match=r"split_dense=True (cuts it|runs it in \d+ slices)"):
        tvm_swap.build(mod, mem_limit=limit, params=params, profile=False, generations=2)     # not asked to split
    m = tvm_swap.build(mod, mem_limit=limit, params=params, profile=False, generations=2, split_dense=True)
    splits = m.compiled.info["dense_splits"]
    k = splits["w1_T"]
    assert k >= 2 and m.plan.verified
    from tvm_swap.verify import verify_plan

    assert verify_plan(m.compiled.graph, m.plan, limit) == []           # the independent verifier, again
    ops = [o.name for o in m.compiled.graph.ops]
    assert sum("matmul" in o for o in ops) >= k + 1                         # K slices + the second dense
    x = np.random.default_rng(1).standard_normal((BATCH, IN)).astype("float32")
    assert np.array_equal(m(x), plain_run(mod, params, x, fuse_transpose=False)[0])
    assert m.stats()["device_peak_bytes"] <= limit
    # the smallest K: one slice fewer does not fit
    from tvm_swap.planner.api import infeasible_floor

    fewer = compile_model(SplitDenseByOutputFeatures({"w1_T": k - 1})(FoldParamLayouts()(mod)), mem_limit=None,
                          profile=False, graph_cache=False).graph if k > 2 else unsplit
    assert infeasible_floor(fewer, limit, "arena") is not None
    m2 = tvm_swap.load(m.export_library(tmp_path / "m.so"))
    assert all(np.array_equal(m2.params()[n], params[n]) for n in params) and np.array_equal(m2(x), m(x))


def test_a_training_step_is_not_split_and_a_limit_no_split_meets_is_refused():
    mod, params = linear_model()
    with pytest.raises(InfeasibleLimitError) as e:
        compile_model(mod, mem_limit=2000, profile=False, graph_cache=False, split_dense=True)
    assert "op" in str(e.value)
    with pytest.raises(ValueError, match="inference"):
        from tvm_swap.training import train_step

        step, _ = train_step(mod, params, loss="mse", optimizer="sgd", frozen=("w1",))
        SplitDenseByOutputFeatures({"w1_T": 2})(FoldParamLayouts()(step))
