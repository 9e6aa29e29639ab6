"""export_library / tvm_swap.load: the .so carries plan and manifest, params sit beside it; a fresh process
loading it gets the same outputs, bit for bit."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tvm

import tvm_swap  # noqa: E402
from runtime_ext.swap_module import PARAMS_SUFFIX  # noqa: E402
from swap_models import bitwise_equal, cnn, flat, mlp  # noqa: E402
from tvm_swap.errors import PlanError, TvmSwapError  # noqa: E402

FAST = dict(planner="swapadvisor", generations=2, workers=1, profile=False)

_RUN_LOADED = textwrap.dedent("""
    import sys, numpy as np, tvm_swap
    lib, inputs, out = sys.argv[1:4]
    m = tvm_swap.load(lib)
    with np.load(inputs) as z:
        xs = [z[f"x{i}"] for i in range(len(z.files))]
    res = m(*xs)
    res = [res] if isinstance(res, np.ndarray) else list(res)
    s = m.stats()
    np.savez(out, *res, peak=np.array(s["device_peak_bytes"]), limit=np.array(s["mem_limit_bytes"]),
             swaps=np.array(s["swap_in_count"]))
""")


def _run_in_fresh_process(tmp_path, lib, inputs):
    np.savez(tmp_path / "inputs.npz", **{f"x{i}": x for i, x in enumerate(inputs)})
    out = tmp_path / "out.npz"
    r = subprocess.run([sys.executable, "-c", _RUN_LOADED, str(lib), str(tmp_path / "inputs.npz"), str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    with np.load(out) as z:
        res = [z[f"arr_{i}"] for i in range(len(z.files) - 3)]
        return res, int(z["peak"]), int(z["limit"]), int(z["swaps"])


@pytest.mark.parametrize("make", [lambda: mlp(), lambda: cnn(train=True)], ids=["mlp", "cnn-train"])
def test_exported_library_runs_the_same_in_a_fresh_process(tmp_path, make):
    ex = make()
    m = tvm_swap.build(ex.mod, mem_limit="40%", params=ex.params, **FAST)
    lib = m.export_library(tmp_path / "model.so")
    assert not (tmp_path / ("model.so" + PARAMS_SUFFIX)).exists()      # the params travel inside the library
    want = flat(m(*ex.inputs.values()))                     # after export: params as exported were used
    got, peak, limit, swaps = _run_in_fresh_process(tmp_path, lib, list(ex.inputs.values()))
    assert bitwise_equal(got, want)
    assert peak <= limit == m.plan.mem_limit and swaps == m.stats()["swap_in_count"]


def test_export_saves_the_current_params_of_a_training_step(tmp_path):
    ex = mlp(train=True)
    m = tvm_swap.build(ex.mod, mem_limit="60%", params=ex.params, **FAST)
    m(*ex.inputs.values())                                   # one step: params change
    m.export_library(tmp_path / "step.so")
    loaded = tvm_swap.load(tmp_path / "step.so")
    assert bitwise_equal(list(loaded.params().values()), list(m.params().values()))
    assert loaded.plan.to_dict() == m.plan.to_dict()
    assert bitwise_equal(flat(loaded(*ex.inputs.values())), flat(m(*ex.inputs.values())))
    # params can be replaced at load (runtime_ext.swap_module.load takes params, bandwidth, debug_poison)
    from runtime_ext.swap_module import load

    fresh = load(tmp_path / "step.so", params=ex.params)
    assert bitwise_equal(list(fresh.params().values()), list(ex.params.values()))


def test_loading_errors_are_clear(tmp_path):
    with pytest.raises(TvmSwapError, match="no library"):
        tvm_swap.load(tmp_path / "missing.so")
    from tvm import relax

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([4], "float32"))
    with bb.function("main", [x]):
        bb.emit_func_output(x)
    relax.build(bb.get(), "llvm").export_library(str(tmp_path / "plain.so"))
    with pytest.raises(PlanError, match="not built by tvm_swap"):
        tvm_swap.load(tmp_path / "plain.so")
