"""The CUDA backend on a real GPU: the same checks as the CPU runtime tests (bitwise-equal outputs under a
memory limit, chained training steps, poisoning), plus what only a GPU can show: the streams and events,
pinned host memory, device memory measured against the limit, and swaps overlapping compute.

Every test needs a GPU (marked `gpu`); without one the module is skipped with the reason
(runtime_ext.cuda.why_no_gpu()). Builds need nvcc (relay_passes.cuda_build).
"""
from __future__ import annotations

import numpy as np
import pytest

import tvm

from runtime_ext.cuda import gpu_available, why_no_gpu  # noqa: E402

pytestmark = pytest.mark.gpu
if not gpu_available():
    pytest.skip(f"needs a CUDA GPU: {why_no_gpu()}", allow_module_level=True)
if tvm.base._RUNTIME_ONLY:
    pytest.skip("these tests compile their models: they need TVM's compiler (this TVM is runtime-only; "
                "scripts/gpu_check.sh runs prebuilt libraries instead)", allow_module_level=True)
from relay_passes.cuda_build import CudaBuildError, find_nvcc  # noqa: E402

try:
    find_nvcc()
except CudaBuildError as e:
    pytest.skip(f"these tests compile their models: {e}", allow_module_level=True)

import tvm_swap  # noqa: E402
from relay_passes.cuda_build import build_unlimited  # noqa: E402
from runtime_ext.cuda import CudaBackend  # noqa: E402
from runtime_ext.reference import PlainRunner  # noqa: E402
from swap_models import MODELS, bitwise_equal, flat  # noqa: E402

FAST = dict(target="cuda", planner="swapadvisor", generations=2, workers=1)
GRANULE = 2 << 20          # cudaMalloc hands out device memory in 2 MiB pages


@pytest.fixture(scope="module")
def rt():
    from cuda.bindings import runtime

    return runtime


@pytest.fixture()
def backend():
    be = CudaBackend()
    yield be
    be.close()


def _reference(mod, args, steps=1):
    ref = PlainRunner(build_unlimited(mod, "cuda"), "cuda")
    outs = [ref(args)]
    for _ in range(steps - 1):     # a training step's next step starts from its updated params
        n_in = len(args) - (len(outs[-1]) - 1)
        outs.append(ref([*args[:n_in], *outs[-1][1:]]))
    ref.close()
    return outs


# ---------------------------------------------------------------- the backend alone
def test_streams_are_distinct_non_blocking_and_compute_is_tvms_current(backend, rt):
    import tvm_ffi

    handles = {s: int(h) for s, h in backend._streams.items()}
    assert len(set(handles.values())) == 4 and 0 not in handles.values()
    for h in backend._streams.values():
        _, flags = rt.cudaStreamGetFlags(h)
        assert flags == rt.cudaStreamNonBlocking
    backend.begin_call()
    assert tvm_ffi.get_raw_stream(backend.device) == handles["compute"]


def test_host_buffers_are_pinned_and_copies_round_trip_through_events(backend, rt):
    n = 8 << 20
    src, back = backend.alloc_host(n), backend.alloc_host(n)
    dev = backend.alloc_device(n)
    _, attrs = rt.cudaPointerGetAttributes(src.data_ptr())
    assert attrs.type == rt.cudaMemoryType.cudaMemoryTypeHost          # pinned, so the copy is async
    data = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
    src.copyfrom(data)
    arrived = backend.new_event()
    backend.copy("h2d", dev, src, record=arrived)
    backend.copy("d2h", back, dev, waits=[arrived])                    # other stream: only the event orders it
    backend.synchronize()
    assert np.array_equal(back.numpy(), data)


def test_a_copy_waits_for_the_kernel_it_depends_on(backend):
    """fill on compute, then a d2h copy on its own stream after the compute event: sees the fill."""
    n = 32 << 20
    dev, host = backend.alloc_device(n), backend.alloc_host(n)
    done = backend.new_event()
    backend.fill("compute", dev, byte=0x5A, record=done)
    backend.copy("d2h", host, dev, waits=[done])
    backend.synchronize()
    assert (host.numpy() == 0x5A).all()


def test_host_callbacks_run_in_stream_order(backend):
    seen = []
    n = 16 << 20
    dev, host = backend.alloc_device(n), backend.alloc_host(n)
    backend.copy("h2d", dev, host, stamp=lambda phase: seen.append(phase))
    backend.host_callback("h2d", lambda: seen.append("after"))
    backend.synchronize()
    assert seen == ["start", "end", "after"]


def test_device_memory_is_measured_not_assumed(backend):
    before = backend.sample_memory()
    backend.alloc_device(256 << 20)
    got = backend.measured_after_alloc_bytes - before
    assert 256 << 20 <= got <= (256 << 20) + GRANULE
    assert backend.stats()["measured_peak_bytes"] >= 256 << 20


# ---------------------------------------------------------------- modules: the CPU tests' checks, on the GPU
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("frac", [1.0, 0.6, 0.35])
def test_outputs_bitwise_equal_to_the_unlimited_cuda_build(name, frac):
    ex = MODELS[name]()
    train = name.endswith("train")
    want = _reference(ex.mod, ex.args(), steps=2 if train else 1)
    m = tvm_swap.build(ex.mod, mem_limit=f"{int(frac * 100)}%", params=ex.params, **FAST)
    assert m.backend.name == "cuda"
    got = flat(m(*ex.inputs.values()))
    assert bitwise_equal(got, want[0]), f"{name} at {frac:.0%}: outputs differ from the unlimited build"
    if train:
        assert bitwise_equal(flat(m(*ex.inputs.values())), want[1]), f"{name} at {frac:.0%}: second step"
    s = m.stats()
    assert s["device_peak_bytes"] <= s["mem_limit_bytes"]
    if frac < 1.0:
        assert s["swap_in_count"] > 0
    m.close()


def test_poisoned_run_is_still_bitwise_equal():
    ex = MODELS["mlp-train"]()
    want = _reference(ex.mod, ex.args())[0]
    m = tvm_swap.build(ex.mod, mem_limit="35%", params=ex.params, debug_poison=True, **FAST)
    assert bitwise_equal(flat(m(*ex.inputs.values())), want)
    m.close()


def test_optimizer_on_the_host_chains_steps_next_to_the_all_device_build():
    """The updates run on the host (llvm kernels on pinned memory, after cudaEventSynchronize on their copies
    out): the steps chain within float noise of the all-device build (a CPU kernel sums in another order than
    the GPU's, so not bitwise here; bitwise on the CPU emulation: tests/runtime_ext/test_host_ops.py)."""
    ex = MODELS["mlp-train"]()
    want = _reference(ex.mod, ex.args(), steps=3)
    m = tvm_swap.build(ex.mod, mem_limit="40%", params=ex.params, host_ops="optimizer", **FAST)
    assert m.plan.host_ops and m.backend.name == "cuda"
    for k in range(3):
        got = flat(m(*ex.inputs.values()))
        for g, w in zip(got, want[k]):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"step {k}")
    s = m.stats()
    assert s["device_peak_bytes"] <= s["mem_limit_bytes"]
    m.close()


# ---------------------------------------------------------------- a model big enough to measure
@pytest.fixture(scope="module")
def transformer():
    """A transformer training step of ~650 MiB no-swap peak: big enough for cudaMemGetInfo's 2 MiB pages."""
    from tvm_swap.examples.large import transformer_train

    ex = transformer_train(scale=1 / 8)
    return ex, _reference(ex.mod, ex.args())[0]


def test_measured_device_memory_stays_within_the_limit(transformer):
    ex, want = transformer
    m = tvm_swap.build(ex.mod, mem_limit="35%", params=ex.params, **FAST)
    be0 = dict(m.stats()["backend"])
    assert bitwise_equal(flat(m(*ex.inputs.values())), want)
    be1 = dict(m.stats()["backend"])
    m(*ex.inputs.values())
    s = m.stats()
    be2 = s["backend"]
    objects = len(m.executor.pool.objects)
    # the pool as allocated: the plan's bytes, rounded up per object to cudaMalloc's pages at most
    assert be0["measured_after_alloc_bytes"] <= s["mem_limit_bytes"] + objects * GRANULE
    # nothing is allocated on the device while calls run, beyond the kernels loaded by the first one
    assert be2["measured_peak_bytes"] == be1["measured_used_bytes"]
    assert be1["measured_used_bytes"] - be0["measured_after_alloc_bytes"] < 256 << 20
    m.close()


def test_swaps_overlap_compute(transformer):
    from runtime_ext.cuda_link import measure_link

    ex, want = transformer
    ref = PlainRunner(build_unlimited(ex.mod, "cuda"), "cuda")
    for _ in range(3):
        ref(ex.args())
    t_unlimited = ref.stats()["min_time_s"]
    ref.close()
    m = tvm_swap.build(ex.mod, mem_limit="35%", params=ex.params, **FAST)
    for _ in range(3):
        m(*ex.inputs.values())
    t_swap = min(m.call_times[1:])
    s = m.stats()
    link = measure_link(64 << 20, repeats=3)
    serial = s["swap_in_bytes"] / link["h2d_bytes_per_s"] + s["swap_out_bytes"] / link["d2h_bytes_per_s"]
    m.close()
    if serial < 0.1 * t_unlimited:
        pytest.skip(f"copies ({serial * 1e3:.1f} ms) are too small next to compute ({t_unlimited * 1e3:.1f} ms) "
                    f"to show overlap")
    # run one after the other, compute and copies would take t_unlimited + serial
    assert t_swap < t_unlimited + 0.9 * serial, (t_swap, t_unlimited, serial)
