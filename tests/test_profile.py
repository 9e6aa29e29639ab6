"""tvm_swap.cost.profile: the cost table and kernels timed on llvm."""
import numpy as np
import pytest

from tvm_swap.cost import profile
from tvm_swap.errors import TvmSwapError
from tvm_swap.graph import DataflowGraph
from tvm_swap.cost.profile import CostTable


def test_cost_table_round_trip_and_bad_file(tmp_path):
    table = CostTable()
    key = CostTable.key("llvm:cpu(0)", "relu", {"args": [[[4], "float32"]], "hash": "ab"})
    table.put(key, 1.5e-6)
    table.save(tmp_path / "c.json")
    assert CostTable.load(tmp_path / "c.json").get(key) == 1.5e-6
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(TvmSwapError, match="not a tvm_swap cost table"):
        CostTable.load(tmp_path / "bad.json")
    with pytest.raises(TvmSwapError, match="does not exist"):
        CostTable.load(tmp_path / "missing.json")


# ---- profiling (needs TVM) ----
@pytest.fixture(scope="module")
def lowered_train_step():
    import tvm  # noqa: F401
    from relay_passes import lower
    from tvm_swap.examples import mlp_train_step
    from tvm_swap.graph import from_relax

    lowered = lower(mlp_train_step(batch=16, in_features=32, hidden=(64, 64), classes=4).mod)
    return lowered, from_relax(lowered)


def test_profile_times_positive_per_op_and_shared_by_kernel(lowered_train_step):
    lowered, g = lowered_train_step
    table = CostTable()
    times = profile.profile_times(lowered, g, "llvm", cache=table)
    assert times.shape == (g.num_ops,) and np.all(times > 0) and np.all(np.isfinite(times))
    kernels = [op.kernel for op in g.ops]
    assert len(set(kernels)) < len(kernels)                 # some kernel runs twice (relu, transpose)
    for k in set(kernels):
        assert len({times[i] for i, name in enumerate(kernels) if name == k}) == 1
    assert len(table) == len(set(kernels))


def test_profile_times_reuses_the_cache_and_accepts_an_executable(lowered_train_step, monkeypatch):
    from relay_passes import build_lowered

    lowered, g = lowered_train_step
    table = CostTable()
    first = profile.profile_times(lowered, g, "llvm", cache=table)

    def no_timing(*a, **k):
        raise AssertionError("should have come from the cache")

    monkeypatch.setattr(profile, "_time_kernel", no_timing)
    again = profile.profile_times(build_lowered(lowered), g, "llvm", cache=table)
    np.testing.assert_array_equal(first, again)


def test_profile_times_heavier_kernels_take_longer(lowered_train_step):
    lowered, g = lowered_train_step
    times = profile.profile_times(lowered, g, "llvm")
    heavy = int(np.argmax([op.flops for op in g.ops]))
    light = int(np.argmin([op.flops + sum(g.tensors[t].nbytes for t in op.outputs) for op in g.ops]))
    assert times[heavy] > times[light]


def test_profile_times_needs_kernel_signatures(lowered_train_step):
    lowered, g = lowered_train_step
    bare = DataflowGraph(g.name, g.tensors, g.ops, g.outputs, g.updates, meta={})
    with pytest.raises(TvmSwapError, match="no kernel signatures"):
        profile.profile_times(lowered, bare, "llvm")
