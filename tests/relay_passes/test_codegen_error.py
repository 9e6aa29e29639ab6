"""The build boundary: TVM 0.27's LLVM codegen emits invalid IR ("Instruction does not dominate all uses!") for
a fused matmul + add at batch 4 with 10 (or 14) columns, in TVM's own (unscheduled) kernel; our llvm lowering's
kernel for it (relay_passes.cpu_inline) builds. Any codegen failure is one short KernelCodegenError naming the
kernel and what to do, never TVM's traceback, and the advice (fuse_max_depth=1) works."""
import numpy as np
import pytest

import tvm
from tvm import relax  # noqa: E402

import tvm_swap  # noqa: E402
from relay_passes import build_lowered, lower  # noqa: E402
from tvm_swap.errors import KernelCodegenError, UnsupportedModelError  # noqa: E402


def linear(batch=4, k=2, n=10):
    """y = x @ w + b with w and b as params: the smallest model the TVM bug hits."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType([batch, k], "float32"))
    w = relax.Var("w", relax.TensorType([k, n], "float32"))
    b = relax.Var("b", relax.TensorType([n], "float32"))
    with bb.function("main", [x, w, b], attrs={"num_input": 1}):
        with bb.dataflow():
            y = bb.emit_output(relax.op.add(relax.op.matmul(x, w), b))
        bb.emit_func_output(y)
    rng = np.random.default_rng(0)
    return bb.get(), {"w": rng.standard_normal((k, n)).astype("float32"),
                      "b": rng.standard_normal(n).astype("float32")}


def _is_short(text: str) -> bool:
    return "\n" not in text and "Traceback" not in text and 'File "' not in text and len(text) < 700


def _tvm_default_kernels(monkeypatch):
    """Lower with TVM's own unscheduled fused kernels (relay_passes.cpu_inline off): the ones the bug hits."""
    import relay_passes.cpu_inline as cpu_inline

    monkeypatch.setattr(cpu_inline, "inline_stages", lambda func: func)


def test_the_tvm_codegen_bug_is_one_short_error_naming_the_kernel_and_the_advice_works(monkeypatch):
    mod, params = linear()
    x = np.arange(8, dtype="float32").reshape(4, 2)
    # our llvm lowering computes the bias add per output element of the matmul (cpu_inline): that kernel builds
    m = tvm_swap.build(mod, params=params, profile=False, graph_cache=False)
    np.testing.assert_allclose(np.asarray(m(x)), x @ params["w"] + params["b"], rtol=1e-6)
    _tvm_default_kernels(monkeypatch)      # TVM's own kernel for it does not
    with pytest.raises(KernelCodegenError) as e:
        tvm_swap.build(mod, params=params, profile=False, graph_cache=False)
    msg = str(e.value)
    assert _is_short(msg), msg
    assert e.value.kernels == ["fused_matmul_add"] and "'fused_matmul_add'" in msg
    assert "does not dominate" in msg and "fuse_max_depth=1" in msg
    assert isinstance(e.value, UnsupportedModelError) and e.value.__suppress_context__
    assert e.value.tvm_error is not None              # TVM's own exception is kept for whoever wants it
    m = tvm_swap.build(mod, params=params, profile=False, fuse_max_depth=1, graph_cache=False)
    np.testing.assert_allclose(np.asarray(m(x)), x @ params["w"] + params["b"], rtol=1e-6)


def test_other_shapes_build():
    mod, params = linear(batch=4, n=12)
    m = tvm_swap.build(mod, params=params, profile=False)
    x = np.ones((4, 2), "float32")
    np.testing.assert_allclose(np.asarray(m(x)), x @ params["w"] + params["b"], rtol=1e-6)


def test_any_codegen_failure_is_caught_at_the_boundary(monkeypatch):
    """relax.build failing with a TVM-style dump: one short error; the kernel that fails alone is named."""
    mod, _ = linear(batch=2, n=3)
    lowered = lower(mod, "llvm")

    def dump(*a, **k):
        raise RuntimeError("LLVM module verification failed with the following errors:\nBad thing!\n  %1 = add\n"
                           "Traceback (most recent call last):\n  File \"codegen_llvm.cc\", line 372")

    real_tir_build = tvm.tirx.build

    def tir_build(mod, *a, **k):
        if any(gv.name_hint == "fused_matmul_add" for gv in mod.functions):
            raise RuntimeError("bad kernel")
        return real_tir_build(mod, *a, **k)

    monkeypatch.setattr(relax, "build", dump)
    monkeypatch.setattr(tvm.tirx, "build", tir_build)
    with pytest.raises(KernelCodegenError) as e:
        build_lowered(lowered, "llvm")
    assert _is_short(str(e.value)), str(e.value)
    assert e.value.kernels == ["fused_matmul_add"]
    assert "LLVM module verification failed: Bad thing!" in str(e.value)

    monkeypatch.setattr(tvm.tirx, "build", real_tir_build)      # no kernel fails alone: said so
    with pytest.raises(KernelCodegenError, match="no kernel fails when built alone") as e:
        build_lowered(lowered, "llvm")
    assert e.value.kernels == [] and _is_short(str(e.value))
