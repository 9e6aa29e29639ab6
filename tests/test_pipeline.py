"""tvm_swap.build on llvm: bitwise-equal outputs under 100% / 60% / 35% of the no-swap peak, peak <= limit,
real swaps below 100%, training steps that chain, and clear errors (infeasible limit, dynamic shapes, bad args)."""
from __future__ import annotations

import numpy as np
import pytest

import tvm

import tvm_swap  # noqa: E402
from swap_models import MODELS, Unlimited, assert_steps_match_unlimited, bitwise_equal, flat  # noqa: E402
from tvm_swap.errors import InfeasibleLimitError, TvmSwapError, UnsupportedModelError  # noqa: E402

FAST = dict(planner="swapadvisor", generations=2, workers=1, profile=False)


@pytest.fixture(scope="module")
def models():
    """name -> (example, reference outputs of one call, reference after two chained calls (training))."""
    out = {}
    for name, make in MODELS.items():
        ex = make()
        ref = Unlimited(ex.mod)
        inputs, params = list(ex.inputs.values()), list(ex.params.values())
        first = ref(inputs, params)
        second = ref(inputs, first[1:]) if name.endswith("train") else None
        out[name] = (ex, first, second)
    return out


def _graph_facts(m):
    g = m.compiled.graph
    from tvm_swap.limits.mem_limit import no_swap_bytes      # what a percentage limit is a share of
    from tvm_swap.planner.feasibility import min_feasible_limit

    return g, no_swap_bytes(g), min_feasible_limit(g)


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("frac", [1.0, 0.6, 0.35])
def test_outputs_bitwise_equal_under_limit(models, name, frac):
    ex, want, want2 = models[name]
    m = tvm_swap.build(ex.mod, mem_limit=f"{int(frac * 100)}%", params=ex.params, **FAST)
    g, peak, _ = _graph_facts(m)
    limit = int(peak * frac)
    got = flat(m(*ex.inputs.values()))
    assert bitwise_equal(got, want), f"{name} at {frac:.0%}: outputs differ from the unlimited build"
    s = m.stats()
    assert s["mem_limit_bytes"] == limit
    assert s["device_peak_bytes"] <= limit                       # pool + workspace, allocated once
    assert s["pool_in_use_peak_bytes"] <= s["pool_bytes"]
    plan_swaps = {k: sum(a.kind == k for a in m.plan.actions) for k in ("swap_in", "swap_out")}
    assert (s["swap_in_count"], s["swap_out_count"]) == (plan_swaps["swap_in"], plan_swaps["swap_out"])
    moved = [a.tensor for a in m.plan.actions if a.kind == "swap_in" and g.tensors[a.tensor].kind != "input"]
    if frac < 1.0:
        assert moved, f"{name} at {frac:.0%}: nothing but inputs was swapped"
    if want2 is not None:                                       # the next step starts from the updated params
        got2 = flat(m(*ex.inputs.values()))
        assert bitwise_equal(got2, want2), f"{name} at {frac:.0%}: the second step differs"
        assert bitwise_equal(list(m.params().values()), want2[1:])


@pytest.mark.parametrize("pool", ["arena", "size-classes"])
def test_limit_below_feasible_minimum_is_refused_with_the_number(models, pool):
    from tvm_swap.planner.api import feasible_floor

    ex, _, _ = models["mlp"]
    m = tvm_swap.build(ex.mod, mem_limit=None, params=ex.params, **FAST)
    floor, _ = feasible_floor(m.compiled.graph, pool)
    with pytest.raises(InfeasibleLimitError) as info:
        tvm_swap.build(ex.mod, mem_limit=floor - 1, params=ex.params, pool=pool, **FAST)
    assert info.value.min_feasible == floor
    assert str(floor) in str(info.value)
    m = tvm_swap.build(ex.mod, mem_limit=floor, params=ex.params, pool=pool, **FAST)   # the min itself plans
    assert m.plan.pool.kind == pool


def test_no_limit_is_the_noswap_plan(models):
    ex, want, _ = models["cnn"]
    m = tvm_swap.build(ex.mod, params=ex.params, **FAST)
    assert m.plan.planner == "noswap"
    assert bitwise_equal(flat(m(*ex.inputs.values())), want)
    assert m.predicted_time_s and m.predicted_time_s > 0


def test_profiled_costs_feed_the_plan(models):
    ex, want, _ = models["mlp"]
    m = tvm_swap.build(ex.mod, mem_limit="60%", params=ex.params, planner="swapadvisor", generations=1, workers=1)
    assert m.compiled.info["cost"] == "profiled"
    assert np.all(np.asarray(m.compiled.op_time) > 0)
    assert bitwise_equal(flat(m.run(dict(ex.inputs))), want)


def test_dynamic_shapes_are_refused():
    from tvm import relax, tirx

    n = tirx.Var("n", "int64")
    x = relax.Var("x", relax.TensorType([n, 4], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.nn.relu(x))
        bb.emit_func_output(gv)
    with pytest.raises(UnsupportedModelError, match="dynamic"):
        tvm_swap.build(bb.get(), mem_limit="1MB", **FAST)


def test_bad_arguments_are_clear_errors(models):
    ex, _, _ = models["mlp"]
    with pytest.raises(TvmSwapError, match="parameters without a value"):
        tvm_swap.build(ex.mod, params={}, **FAST)
    m = tvm_swap.build(ex.mod, params=ex.params, **FAST)
    with pytest.raises(TvmSwapError, match="must be"):
        m(np.zeros((3, 3), "float32"))
    with pytest.raises(TvmSwapError, match="takes 1 inputs"):
        m()
    with pytest.raises(TvmSwapError, match="unknown inputs"):
        m.run({"x": ex.inputs["x"], "z": 1})
    with pytest.raises(TvmSwapError, match="bad memory limit"):
        tvm_swap.build(ex.mod, mem_limit="lots", params=ex.params, **FAST)
    with pytest.raises(TvmSwapError, match="no function"):
        tvm_swap.build(ex.mod, func_name="forward", params=ex.params, **FAST)


def test_scalar_params_and_results_keep_their_shape():
    """0-d params (optimizer step counters, scales) and 0-d results (losses) are not widened to (1,)."""
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([4, 4], "float32"))
    s = relax.Var("s", relax.TensorType([], "float32"))
    with bb.function("main", [x, s], attrs={"num_input": 1}):
        with bb.dataflow():
            y = bb.emit(relax.op.multiply(relax.op.exp(x), s))
            gv = bb.emit_output(relax.Tuple([y, relax.op.sum(y)]))
        bb.emit_func_output(gv)
    mod = bb.get()
    params = {"s": np.float32(0.5)}
    xv = np.arange(16, dtype="float32").reshape(4, 4) / 16
    m = tvm_swap.build(mod, params=params, **FAST)
    got = flat(m(xv))
    want = Unlimited(mod)([xv], [np.asarray(params["s"])])
    assert got[1].shape == () and bitwise_equal(got, want)
    assert m.params()["s"].shape == ()


def test_cuda_compiles_without_a_gpu_and_build_says_why_it_cannot_run(models, tmp_path):
    from tvm_swap.pipeline import compile_model

    ex, _, _ = models["mlp"]
    cm = compile_model(ex.mod, target="cuda", mem_limit="50%", planner="swapadvisor", generations=1)
    assert cm.info["cost"] == "roofline" and cm.plan.verified
    cm.executable.export_library(str(tmp_path / "mlp_cuda.so"))
    assert (tmp_path / "mlp_cuda.so").stat().st_size > 0
    with pytest.raises(TvmSwapError, match="no CUDA GPU"):
        tvm_swap.build(ex.mod, target="cuda", mem_limit="50%", params=ex.params, **FAST)


@pytest.mark.parametrize("limit", ["100%", "40%"])
@pytest.mark.parametrize("optimizer", ["momentum", "adam"])
def test_optimizer_state_chains_over_three_steps(optimizer, limit):
    """Optimizer state (kept on the device, never read from the host) and its updates, over chained steps."""
    from tvm_swap.examples import models
    from tvm_swap.training.step import train_step

    ex = models.mlp(batch=32, in_features=64, hidden=(128,) * 6, classes=10)
    mod, params = train_step(ex.mod, ex.params, optimizer=optimizer, lr=0.01)
    f = mod["main"]
    rng = np.random.default_rng(0)
    inputs = []
    for p in f.params[:int(f.attrs["num_input"])]:
        shape, dt = [int(d) for d in p.ty.shape.values], str(p.ty.dtype.dtype)
        inputs.append(rng.integers(0, 10, shape).astype(dt) if "int" in dt else rng.standard_normal(shape).astype(dt))
    m = tvm_swap.build(mod, mem_limit=limit, params=params, **FAST)
    assert_steps_match_unlimited(m, mod, inputs, list(params.values()), what=f"{optimizer}: ")


def test_build_refusal_names_a_limit_the_planner_then_meets(models):
    """The refusal before profiling names the planner's own floor (noswap keeps everything resident), as
    plan_graph's does: building at the named limit works."""
    from tvm_swap.planner.api import feasible_floor

    ex, _, _ = models["mlp"]
    m = tvm_swap.build(ex.mod, mem_limit=None, params=ex.params, **FAST)
    floor, _ = feasible_floor(m.compiled.graph, "size-classes")
    kw = dict(params=ex.params, planner="noswap", profile=False)
    with pytest.raises(InfeasibleLimitError) as e:
        tvm_swap.build(ex.mod, mem_limit=floor - 1, **kw)
    assert e.value.min_feasible > floor
    assert tvm_swap.build(ex.mod, mem_limit=e.value.min_feasible, **kw).plan.planner == "noswap"
