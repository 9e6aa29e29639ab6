"""checkpoint-sqrt plans compiled and run on llvm: its long recompute chains (a whole segment's forward run
again in backward) give outputs bitwise equal to the unlimited build over 3 chained training steps, at the
smallest limit the planner accepts."""
from __future__ import annotations

import pytest

import tvm

import tvm_swap  # noqa: E402
from swap_models import MODELS, Unlimited, bitwise_equal, flat  # noqa: E402
from tvm_swap.errors import InfeasibleLimitError  # noqa: E402

STEPS = 3


@pytest.mark.slow        # two builds and three calls per model: 20-30 s each on the shared 2-core machine
@pytest.mark.parametrize("name", ["mlp-train", "cnn-train"])
def test_checkpoint_sqrt_runs_bitwise_equal_over_three_steps(name):
    ex = MODELS[name]()
    ref = Unlimited(ex.mod)
    inputs, params = list(ex.inputs.values()), list(ex.params.values())
    want = [ref(inputs, params)]
    for _ in range(STEPS - 1):
        want.append(ref(inputs, want[-1][1:]))          # results: loss, then the updated params
    kw = dict(planner="checkpoint-sqrt", params=ex.params, workers=1, profile=False)
    with pytest.raises(InfeasibleLimitError) as e:      # its own need: weights, boundaries, one segment
        tvm_swap.build(ex.mod, mem_limit="5%", **kw)
    m = tvm_swap.build(ex.mod, mem_limit=e.value.min_feasible, **kw)
    chain = [a for a in m.plan.actions if a.kind == "recompute"]
    assert len(chain) >= 2, f"{name}: no recompute chain in the plan, the test would show nothing"
    for step, w in enumerate(want):
        assert bitwise_equal(flat(m(*ex.inputs.values())), w), f"{name}: step {step + 1} differs"
    assert m.stats()["device_peak_bytes"] <= m.plan.mem_limit
