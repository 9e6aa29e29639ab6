"""A trainable weight read transposed is read in place, forward and backward (relay_passes.transpose_matmul:
X W^T and the weight gradient's dY^T X); a frozen one in a training step is folded into its compute layout
(relay_passes.param_layout). Both bitwise equal to the build where TVM transposes into copies."""
from __future__ import annotations

import numpy as np

import tvm
from tvm import relax

import tvm_swap
from relay_passes.lower import build_lowered, lower
from tests.relay_passes.test_param_layout import BATCH, IN, OUT, kernel_names, linear_model
from tvm_swap.training import train_step


def step_module(frozen=()):
    mod, params = linear_model()
    step, state = train_step(mod, params, loss="mse", optimizer="sgd", frozen=frozen)
    return step, state


def feeds():
    rng = np.random.default_rng(3)
    return rng.standard_normal((BATCH, IN)).astype("float32"), rng.standard_normal((BATCH, OUT)).astype("float32")


def plain_step(step, state, fuse_transpose):
    vm = relax.VirtualMachine(build_lowered(lower(step, "llvm", fuse_transpose=fuse_transpose), "llvm"), tvm.cpu())
    x, y = feeds()
    func = step["main"]
    n_in = int(func.attrs["num_input"])
    args = [x, y] + [state[p.name] for p in func.params[n_in:]]
    out = vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(a)) for a in args])
    return [o.numpy() for o in out]


def test_trainable_weight_transposes_are_fused_forward_and_backward():
    step, state = step_module()
    unfused = kernel_names(lower(step, "llvm", fuse_transpose=False))
    assert sum("transpose" in k for k in unfused) >= 4      # W1^T, W2^T (forward), dY^T twice (weight gradients)
    fused = lower(step, "llvm")
    assert not [k for k in kernel_names(fused) if "transpose" in k and "matmul" not in k]
    # the forward reads each weight as it is, the weight gradients read dY as it is
    assert sum("matmul_transposed" in k for k in kernel_names(fused)) == 4
    a, b = plain_step(step, state, True), plain_step(step, state, False)
    assert len(a) == len(b) and all(np.array_equal(u, v) for u, v in zip(a, b))


def test_frozen_weight_of_a_training_step_is_folded_and_the_step_matches():
    step, state = step_module(frozen=("w2",))
    m = tvm_swap.build(step, mem_limit="95%", params=state, profile=False, generations=2)
    persistent = {p.name: p.shape for p in m.manifest.persistent}
    assert "w2_T" in persistent and "w2" not in persistent and persistent["w1"] == (40, IN)
    x, y = feeds()
    got = m(x, y)
    want = plain_step(step, state, fuse_transpose=False)
    assert np.array_equal(got[0], want[0])                 # the loss, bitwise
    after = m.params()
    assert np.array_equal(after["w2"], state["w2"])         # frozen, in the user's layout
    assert np.array_equal(after["w1"], want[1])             # the step's results: loss, then w1, b1 updated
