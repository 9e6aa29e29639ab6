"""An elementwise kernel run in place executes bitwise equal to the unlimited build (emulated CPU backend)."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from shared_fixtures import fixture_dir, needs_fixtures  # noqa: E402


@pytest.mark.slow
@needs_fixtures("mxnet")
def test_small_cnn_batch_norm_relu_in_place_is_bitwise_equal():
    import tvm
    from tvm import relax

    import tvm_swap
    from relay_passes.lower import lower, lower_unlimited_build
    from tvm_swap.frontends.mxnet import from_mxnet
    from tvm_swap.graph import from_relax
    from tvm_swap.planner.api import feasible_floor

    d = fixture_dir("mxnet")
    info = json.loads((d / "small_cnn.input.json").read_text())
    mod, params = from_mxnet(d / "small_cnn-symbol.json", str(d / info["params_file"]), {"data": [32, 3, 32, 32]})
    g = from_relax(lower(mod, "llvm"))
    bn = next(o for o in g.ops if o.kernel == "fused_batch_norm_relu")
    limit, _ = feasible_floor(g, "arena")
    assert limit < sum(g.tensors[t].nbytes for t in (*bn.inputs, *bn.outputs))   # only in place fits
    m = tvm_swap.build(mod, target="llvm", mem_limit=limit, params=params, budget_s=1.0, generations=1, workers=1)
    assert any(o == bn.id for o, _, _ in m.plan.inplace)
    x = np.random.default_rng(0).standard_normal((32, 3, 32, 32)).astype("float32")
    got = m(x)
    got = got if isinstance(got, (list, tuple)) else [got]
    vm = relax.VirtualMachine(lower_unlimited_build(mod, "llvm"), tvm.cpu())
    names = [p.name for p in mod["main"].params]
    ref = vm["main"](tvm.runtime.tensor(x), *[tvm.runtime.tensor(np.asarray(params[n])) for n in names[1:]])
    ref = [ref] if not isinstance(ref, (list, tuple)) and hasattr(ref, "numpy") else list(ref)
    assert len(got) == len(ref)
    assert all(np.asarray(a).tobytes() == b.numpy().tobytes() for a, b in zip(got, ref))
    assert m.stats()["device_peak_bytes"] <= limit
