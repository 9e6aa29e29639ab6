"""zero-offload (DeepSpeed ZeRO-Offload style): verified plans, its policy (nothing persistent stays on the device,
every gradient goes to the host when produced, the prefetch distance tuned) and a refusal naming its need."""
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.errors import InfeasibleLimitError
from tvm_swap.planner import plan_graph
from tvm_swap.planner.baselines.zero_offload import AHEAD_GRID, gradient_tensors, zero_policy
from tvm_swap.planner.baselines.common import default_order
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.testing import random_op_times, random_training_graph
from tvm_swap.verify import verify_plan

DEV = get_device("v100-16gb")


def graph(seed=3, layers=8):
    g = random_training_graph(seed, n_layers=layers, momentum=True)
    return g, random_op_times(g, seed)


def plan(g, t, limit, **kw):
    return plan_graph(g, limit, device=DEV, op_time=t, planner="zero-offload", workers=1, **kw)


@pytest.mark.parametrize("seed", [1, 3, 6])
def test_plans_verify_at_their_own_need_and_refuse_below_it(seed):
    g, t = graph(seed)
    with pytest.raises(InfeasibleLimitError, match="zero-offload") as e:
        plan(g, t, int(noswap_peak(g) * 0.3))
    need = e.value.min_feasible
    p = plan(g, t, need)
    assert p.verified and verify_plan(g, p, mem_limit=need) == []
    assert p.pool.total_bytes() <= need
    assert p.predicted["time_s"] >= p.predicted["ideal_time_s"] * (1 - 1e-9)


def test_nothing_persistent_stays_and_every_gradient_goes_to_the_host():
    g, t = graph(4, layers=12)
    p = plan(g, t, noswap_peak(g) * 2, zero_ahead=1)     # a fixed policy: even with room to spare
    assert p.initial_residents == []
    outs = [a.tensor for a in p.actions if a.kind == "swap_out"]
    ins = {a.tensor for a in p.actions if a.kind == "swap_in"}
    order = default_order(g)
    pos = {o: i for i, o in enumerate(order)}
    ahead = p.search["ahead"]
    far = [x for x in gradient_tensors(g)
           if max(pos[c] for c in g.consumers()[x]) - pos[int(g.producer()[x])] > ahead]
    assert set(far) <= set(outs), "a gradient whose update is beyond the prefetch window goes out"
    grads = gradient_tensors(g)
    assert set(g.updates) <= set(outs), "updated values replace the host copies"
    used_persistent = {x for x in g.used_tensors() if g.is_persistent(x)}
    assert used_persistent <= ins
    assert not any(g.tensors[x].kind == "activation" and x not in grads for x in outs), "activations stay"


def test_the_prefetch_distance_is_tuned_over_the_grid():
    g, t = graph(3)
    p = plan(g, t, noswap_peak(g) * 2)
    tried = p.search["grid"]
    assert [r["ahead"] for r in tried] == sorted(AHEAD_GRID)
    best = min(r["time_s"] for r in tried if r["time_s"] is not None)
    assert p.search["ahead"] == next(r["ahead"] for r in tried if r["time_s"] == best)
    assert abs(p.predicted["time_s"] - best) <= 1e-9 * best


def test_a_farther_prefetch_starts_each_fetch_earlier():
    g, _ = graph(5)
    order = default_order(g)
    near, far = zero_policy(g, order, 1).gaps, zero_policy(g, order, 16).gaps
    for key, at in far.items():
        assert key not in near or at <= near[key]


def test_gradients_wait_on_the_host_when_the_update_comes_at_the_end():
    g, _ = graph(4, layers=12)
    producer = g.producer()
    update_ops = {int(producer[new]) for new in g.updates}
    order = [o for o in default_order(g) if o not in update_ops] + sorted(update_ops)   # optimizer step last
    pos = {o: i for i, o in enumerate(order)}
    gaps = zero_policy(g, order, 1).gaps
    for x in gradient_tensors(g):
        update_use = max(pos[c] for c in g.consumers()[x])
        assert (x, update_use) in gaps and gaps[(x, update_use)] == update_use - 1
    first_use = {}
    for o in order:
        for x in g.ops[o].inputs:
            first_use.setdefault(x, pos[o])
    for x in g.used_tensors():
        if g.is_persistent(x):
            assert (x, first_use[x]) in gaps, "every parameter and state starts on the host"
