"""runtime_ext.cuda.CudaBackend's own logic on the CPU: a fake CUDA runtime (tests/cuda_fake.py) with host
memory for the device runs a real swap-planned module, so the backend's bookkeeping (streams, one event per
waited action, copies by pointer and size, pinned buffers, measured memory, errors, close) is tested without
a GPU. What only a GPU shows (concurrency, real pinned memory, cudaMemGetInfo) is in test_cuda_runtime.py."""
from __future__ import annotations

import numpy as np
import pytest

import tvm

import tvm_swap  # noqa: E402
from cuda_fake import FakeRuntime  # noqa: E402
from runtime_ext.cuda import CudaBackend, CudaError  # noqa: E402
from tvm_swap.events import event_graph  # noqa: E402
from runtime_ext.swap_module import SwapModule  # noqa: E402
from swap_models import Unlimited, bitwise_equal, flat, mlp  # noqa: E402
from tvm_swap.errors import TvmSwapError  # noqa: E402

FAST = dict(planner="swapadvisor", generations=2, workers=1, profile=False)


def _backend(**kw):
    rt = FakeRuntime(**kw)
    return rt, CudaBackend(runtime=rt, device=tvm.cpu(0))


@pytest.fixture(scope="module")
def mlp_train():
    ex = mlp(train=True)
    want = Unlimited(ex.mod)(list(ex.inputs.values()), list(ex.params.values()))
    m = tvm_swap.build(ex.mod, mem_limit="35%", params=ex.params, **FAST)
    return ex, want, m


def test_four_non_blocking_streams_and_the_compute_one_is_current():
    import tvm_ffi

    rt, be = _backend()
    created = rt.calls("cudaStreamCreateWithFlags")
    assert len(created) == 4 and all(c[1] == rt.cudaStreamNonBlocking for c in created)
    assert tvm_ffi.get_raw_stream(be.device) == int(be._streams["compute"])
    be.close()
    assert tvm_ffi.get_raw_stream(be.device) == 0          # not left on a destroyed stream
    assert len(rt.calls("cudaStreamDestroy")) == 4


def test_a_swap_planned_module_runs_bitwise_on_the_backend(mlp_train):
    ex, want, built = mlp_train
    rt, be = _backend()
    m = SwapModule(built.executable, ex.params, plan=built.plan, backend=be)
    got = flat(m(*ex.inputs.values()))
    assert bitwise_equal(got, want)
    plan = m.plan
    # one cudaMemcpyAsync per swap, on its own stream, of the tensor's bytes
    copies = rt.calls("cudaMemcpyAsync")
    swaps = [a for a in plan.actions if a.kind in ("swap_in", "swap_out")]
    assert len(copies) == len(swaps) > 0
    stream_of = {"swap_in": be._streams["h2d"], "swap_out": be._streams["d2h"]}
    for c, a in zip(copies, swaps):
        assert c[1] is stream_of[a.kind] and c[2] == built.compiled.graph.tensors[a.tensor].nbytes
    # events: exactly one per action another stream waits on, each waited on only after it was recorded
    _, waits = event_graph(plan)
    waited = {e for w in waits for e in w}
    assert len(rt.calls("cudaEventCreateWithFlags")) == len(waited)
    assert len(rt.calls("cudaStreamWaitEvent")) == sum(len(w) for w in waits)
    m.close()


def test_training_steps_chain_on_the_backend(mlp_train):
    ex, want, built = mlp_train
    second = Unlimited(ex.mod)(list(ex.inputs.values()), want[1:])
    rt, be = _backend()
    m = SwapModule(built.executable, ex.params, plan=built.plan, backend=be)
    m(*ex.inputs.values())
    assert bitwise_equal(flat(m(*ex.inputs.values())), second)
    assert bitwise_equal(list(m.params().values()), second[1:])
    m.close()


def test_poisoning_fills_dropped_objects_with_memset(mlp_train):
    ex, want, _ = mlp_train
    built = tvm_swap.build(ex.mod, mem_limit="35%", params=ex.params, debug_poison=True, **FAST)
    rt, be = _backend()
    m = SwapModule(built.executable, ex.params, plan=built.plan, backend=be, debug_poison=True)
    assert bitwise_equal(flat(m(*ex.inputs.values())), want)
    drops = sum(a.kind == "drop" for a in built.plan.actions)
    assert len(rt.calls("cudaMemsetAsync")) == drops + len(m.executor.pool.objects)   # + the initial fill
    m.close()
    built.close()


def test_host_buffers_are_cuda_host_allocations_freed_with_their_last_view():
    import gc

    rt, be = _backend()
    t = be.alloc_host(1000)
    assert rt.calls("cudaHostAlloc")[-1][2] == 1000 and t.data_ptr() % 256 == 0
    v = t._create_view((250,), "float32", 0)
    v.copyfrom(np.arange(250, dtype="float32"))
    del t
    gc.collect()
    assert not rt.calls("cudaFreeHost")                     # a view still uses it
    assert v.numpy()[-1] == 249.0
    del v
    gc.collect()
    assert len(rt.calls("cudaFreeHost")) == 1
    be.close()


def test_memory_is_sampled_against_the_baseline():
    rt, be = _backend(total=1 << 30)
    rt.used += 100 << 20                                     # someone else's memory before the module: not ours
    be2 = CudaBackend(runtime=rt, device=tvm.cpu(0))
    rt.used += 40 << 20
    assert be2.sample_memory() == 40 << 20
    rt.used -= 40 << 20
    be2.synchronize()
    s = be2.stats()
    assert s["measured_peak_bytes"] == 40 << 20 and s["measured_used_bytes"] == 0
    assert s["device_baseline_used_bytes"] == 100 << 20
    be.close()
    be2.close()


def test_a_failed_copy_surfaces_as_a_clear_error_and_the_module_stays_usable(mlp_train):
    ex, want, built = mlp_train
    rt, be = _backend(fail_on={"cudaMemcpyAsync": 2})
    m = SwapModule(built.executable, ex.params, plan=built.plan, backend=be)
    with pytest.raises(TvmSwapError, match="cudaMemcpyAsync .* failed: cudaErrorLaunchFailure"):
        m(*ex.inputs.values())
    assert bitwise_equal(flat(m(*ex.inputs.values())), want)
    m.close()


def test_stream_errors_are_raised_by_synchronize():
    rt, be = _backend(fail_on={"cudaStreamSynchronize": 2})
    with pytest.raises(CudaError, match="the d2h stream failed"):
        be.synchronize()
    be.close()


def test_the_backend_places_arena_objects_at_the_plan_offsets(mlp_train):
    ex, want, built = mlp_train
    assert built.plan.pool.kind == "arena"
    rt, be = _backend()
    m = SwapModule(built.executable, ex.params, plan=built.plan, backend=be)
    pool = m.executor.pool
    base = be._arena.data_ptr()
    assert be._arena.shape[0] == built.plan.pool.arena_bytes               # one cudaMalloc of the arena
    for k, off in enumerate(built.plan.pool.offsets):
        assert pool.storage(k).data_ptr() - base == off                   # zero-copy views at the offsets
    assert bitwise_equal(flat(m(*ex.inputs.values())), want)
    m.close()


def test_ops_on_the_host_wait_for_their_copies_on_the_host_and_read_pinned_memory():
    """A plan with the optimizer on the host, on the CUDA backend: before each host op the host itself waits
    (cudaEventSynchronize) for exactly the events the op depends on (its copies out), its inputs and outputs are
    pinned host buffers (cudaHostAlloc), and two chained steps stay bitwise equal to the unlimited build."""
    ex = mlp(train=True)
    ref = Unlimited(ex.mod)
    first = ref(list(ex.inputs.values()), list(ex.params.values()))
    second = ref(list(ex.inputs.values()), first[1:])
    built = tvm_swap.build(ex.mod, mem_limit="40%", params=ex.params, host_ops="optimizer", **FAST)
    plan = built.plan
    assert plan.host_ops
    rt, be = _backend()
    m = SwapModule(built.executable, ex.params, plan=plan, backend=be)
    assert bitwise_equal(flat(m(*ex.inputs.values())), first)
    _, waits = event_graph(plan)
    host = set(plan.host_ops)
    host_waits = [w for a, w in zip(plan.actions, waits) if a.kind == "compute" and a.op in host]
    assert sum(map(len, host_waits)) > 0
    ex_ = m.executor
    synced = [c[1] for c in rt.calls("cudaEventSynchronize")]
    assert synced == [ex_.events[e] for w in host_waits for e in w]
    outs = {t for o in host for t in built.compiled.graph.ops[o].outputs}
    assert outs <= set(ex_.swapped_out) and len(rt.calls("cudaHostAlloc")) >= len(outs)
    assert bitwise_equal(flat(m(*ex.inputs.values())), second)
    assert bitwise_equal(list(m.params().values()), second[1:])
    m.close()
    built.close()
