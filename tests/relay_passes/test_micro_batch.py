"""relay_passes.micro_batch: inference in K slices of the batch, bitwise the unsplit function, or refused by op."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tvm
from tvm import relax  # noqa: E402

from tests.shared_fixtures import REPO, fixture_dir, needs_fixtures  # noqa: E402
from tvm_swap.errors import TvmSwapError, UnsupportedModelError  # noqa: E402


def _small_cnn(batch):
    from tvm_swap.frontends.mxnet import from_mxnet

    mx = fixture_dir("mxnet")
    info = json.loads((mx / "small_cnn.input.json").read_text())
    shapes = {i["name"]: [batch] + list(i["shape"][1:]) for i in info["inputs"]}
    return from_mxnet(mx / "small_cnn-symbol.json", str(mx / info["params_file"]), shapes)


def _run(mod, args):
    from relay_passes.lower import lower_unlimited_build

    vm = relax.VirtualMachine(lower_unlimited_build(mod, "llvm"), tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()


@needs_fixtures("mxnet")
def test_small_cnn_in_slices_is_bitwise_the_unsplit_model_and_holds_less():
    from relay_passes.lower import lower
    from relay_passes.micro_batch import split_batch
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.planner.bounds import noswap_peak

    mod, prm = _small_cnn(8)
    split = split_batch(mod, 4)
    f = mod["main"]
    x = np.random.default_rng(0).standard_normal([8, 3, 32, 32]).astype("float32")
    args = [x] + [prm[p.name].numpy() if hasattr(prm[p.name], "numpy") else np.asarray(prm[p.name])
                  for p in f.params[1:]]
    want, got = _run(mod, args), _run(split, args)
    assert want.shape == got.shape == (8, 10)
    np.testing.assert_array_equal(got, want)
    peaks = [noswap_peak(graph_from_relax(lower(m, "llvm"), "main", target="llvm")) for m in (mod, split)]
    assert peaks[1] < peaks[0]
    assert split_batch(mod, 1) is mod


def _module(op):
    x = relax.Var("x", relax.TensorType([8, 16], "float32"))
    w = relax.Var("w", relax.TensorType([16, 4], "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w], attrs={"num_input": 1}):
        with bb.dataflow():
            out = bb.emit_output(op(x, w))
        bb.emit_func_output(out)
    return bb.get()


def test_ops_that_mix_batch_elements_are_refused_by_name():
    from relay_passes.micro_batch import split_batch

    ok = split_batch(_module(lambda x, w: relax.op.nn.relu(relax.op.matmul(x, w))), 2)
    assert "concat" in str(ok["main"])
    with pytest.raises(UnsupportedModelError, match="relax.sum.*axis 0"):
        split_batch(_module(lambda x, w: relax.op.add(relax.op.sum(x, axis=[0], keepdims=True), relax.op.sum(w))), 2)
    with pytest.raises(UnsupportedModelError, match="relax.nn.softmax.*axis 0"):
        split_batch(_module(lambda x, w: relax.op.nn.softmax(x, axis=0)), 2)
    with pytest.raises(UnsupportedModelError, match="permute_dims"):   # x^T x mixes the rows
        split_batch(_module(lambda x, w: relax.op.matmul(relax.op.permute_dims(x), x)), 2)
    with pytest.raises(UnsupportedModelError, match="divide the batch"):
        split_batch(_module(lambda x, w: relax.op.matmul(x, w)), 3)
    with pytest.raises(TvmSwapError, match=">= 1"):
        split_batch(_module(lambda x, w: relax.op.matmul(x, w)), 0)


@pytest.mark.slow
@needs_fixtures("mxnet")
def test_cli_small_cnn_b128_inference_at_half_in_two_micro_batches(tmp_path):
    """The issue's check: tvm-swap compile + run --compare-unlimited for the MXNet small_cnn at batch 128
    (inference) at 50% of its no-swap need (the unsplit model's): bitwise equal and within the limit."""
    sym = str(fixture_dir("mxnet") / "small_cnn-symbol.json")
    lib = str(tmp_path / "m.so")

    def cli(*args):
        code = f"import sys; from tvm_swap.cli import main; sys.exit(main({list(args)!r}))"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1500,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    built = cli("compile", sym, "--shape", "data=128,3,32,32", "--mem-limit", "50%", "--micro-batches", "2",
                "--generations", "2", "--workers", "1", "-o", lib, "--json", "-q")
    assert built["micro_batches"] == 2 and built["limit_vs_unsplit_no_swap"] == 0.5
    ran = cli("run", lib, "--compare-unlimited", "--json", "-q")
    assert ran["outputs_bitwise_equal"] and ran["within_limit"]
    assert ran["device_peak_bytes"] <= built["mem_limit_bytes"] == built["unsplit_no_swap_bytes"] // 2


@needs_fixtures("mxnet")
def test_build_with_micro_batches_takes_a_percent_of_the_unsplit_model():
    """tvm_swap.build(..., micro_batches=2): the limit is a share of the unsplit model's no-swap need, the module
    holds to it, and its outputs are bitwise the unsplit build's."""
    import tvm_swap
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.limits.mem_limit import no_swap_bytes

    mod, prm = _small_cnn(32)
    unsplit = no_swap_bytes(graph_from_relax(lower(mod, "llvm"), "main", target="llvm"))
    m = tvm_swap.build(mod, mem_limit="60%", params=prm, micro_batches=2, profile=False, generations=1)
    # 2 x 9 kernels + concat (the dense weight's transpose is folded into the param at compile time)
    assert m.plan.mem_limit == int(unsplit * 0.6) and m.compiled.graph.num_ops >= 19
    x = np.random.default_rng(1).standard_normal([32, 3, 32, 32]).astype("float32")
    got = m(x)
    got = (got[0] if isinstance(got, (list, tuple)) else got)
    got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    args = [x] + [prm[p.name].numpy() if hasattr(prm[p.name], "numpy") else np.asarray(prm[p.name])
                  for p in mod["main"].params[1:]]
    np.testing.assert_array_equal(got, _run(mod, args))
