"""relay_passes.lift_workspace: a kernel's workspace is a tensor the plan places for that kernel only, so a
training step runs (bitwise equal to the unlimited build, device peak <= limit) under a limit below the old
floor (the largest working set plus the largest workspace reserved beside the arena for the whole iteration)."""
from __future__ import annotations

import pytest

import tvm

import tvm_swap
from swap_models import Unlimited, bitwise_equal, cnn, flat
from tvm_swap.graph.extract import graph_from_relax, kernel_workspace
from tvm_swap.graph.workspace import workspace_tensors
from tvm_swap.planner.api import feasible_floor
from relay_passes.lower import lower

FAST = dict(planner="swapadvisor", generations=2, workers=1, profile=False)


@pytest.fixture(scope="module")
def step():
    """A conv training step whose max-pool backward keeps a full-size argmax buffer (its workspace)."""
    return cnn(train=True, batch=4)


def _graph(mod, lift):
    return graph_from_relax(lower(mod, "llvm", lift_workspace=lift), "main", target="llvm")


def test_lifted_buffers_are_op_outputs_no_one_reads(step):
    kept, lifted = _graph(step.mod, False), _graph(step.mod, True)
    ws = workspace_tensors(lifted)
    assert ws and max(op.workspace for op in kept.ops) > max(op.workspace for op in lifted.ops)
    consumers = lifted.consumers()
    for t, o in ws.items():
        assert t in lifted.ops[o].outputs and not consumers[t] and t not in lifted.outputs
    # the kernel's own workspace shrank by what became tensors; nothing else changed size
    low = lower(step.mod, "llvm")
    for gv, f in low.functions.items():
        if isinstance(f, tvm.tirx.PrimFunc) and "tvm_swap.workspace_params" in (f.attrs or {}):
            assert kernel_workspace(f) < 1024


def test_runs_bitwise_below_the_old_floor(step):
    old, _ = feasible_floor(_graph(step.mod, False), "arena")
    m0 = tvm_swap.build(step.mod, mem_limit=None, params=step.params, **FAST)
    new, _ = feasible_floor(m0.compiled.graph, "arena")
    assert new < old, "lifting the workspace did not lower the floor"
    inputs, params = list(step.inputs.values()), list(step.params.values())
    want = Unlimited(step.mod)(inputs, params)
    m = tvm_swap.build(step.mod, mem_limit=new, params=step.params, **FAST)
    assert m.plan.pool.kind == "arena" and m.plan.pool.workspace_bytes < old - new
    got = flat(m(*inputs))
    assert bitwise_equal(got, want)
    s = m.stats()
    assert s["device_peak_bytes"] <= new
    assert workspace_tensors(m.compiled.graph)


def test_cuda_kernels_and_their_host_versions_take_the_lifted_buffers(step):
    """On CUDA the argmax buffers of max-pool backward are lifted too, and the kernel's unscheduled version (what
    an op placed on the host compiles for llvm) takes the same trailing parameters."""
    from relay_passes.gpu_schedule import UNSCHEDULED_ATTR
    from relay_passes.lift_workspace import WORKSPACE_PARAMS_ATTR

    low = lower(step.mod, {"kind": "cuda", "arch": "sm_90"})
    lifted = [f for f in low.functions.values()
              if isinstance(f, tvm.tirx.PrimFunc) and WORKSPACE_PARAMS_ATTR in (f.attrs or {})]
    assert lifted
    for f in lifted:
        k = int(f.attrs[WORKSPACE_PARAMS_ATTR])
        plain = f.attrs[UNSCHEDULED_ATTR]
        assert [p.name for p in plain.params] == [p.name for p in f.params]
        assert [(tuple(p.shape), str(p.dtype)) for p in plain.params[-k:]] == \
            [(tuple(p.shape), str(p.dtype)) for p in f.params[-k:]]
    g = graph_from_relax(low, "main")
    assert workspace_tensors(g) and max(op.workspace for op in g.ops) == 0
