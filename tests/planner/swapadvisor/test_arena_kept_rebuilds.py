"""A dead tensor rebuilt for one rebuild stays for the next rebuild that reads it (WalkState.release_extra).

Issue 28: BERT-large@32's attention rebuilt its scores and query/key projections (dead after the forward pass)
for one pending tensor, dropped them right after, and rebuilt them again ten slots later for another pending
tensor read from the same scores: 129 kernels ran twice, 0.19 s of its 0.58 s of recomputes."""
import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.planner.graphindex import GraphIndex
from tvm_swap.planner.simulator import RECOMPUTE, pack_actions
from tvm_swap.planner.swapadvisor.arena import ArenaSpace, plan_arena
from tvm_swap.planner.swapadvisor.arena import tuning
from tvm_swap.testing import _GraphMaker
from tvm_swap.verify import verify_plan

DEV = get_device("v100-16gb")
MB = 1 << 20


def _attention_like():
    """x, W -> a = proj(x, W) (dear) -> b = tr(a) -> c = sm(b), d = t2(b), both read in the forward pass and
    again in the backward pass (c by g1, d by g2 two ops later); a and b are read in the forward pass only. A
    chain of large fillers in between forces c and d out; op times make proj dear and the rest cheap."""
    m = _GraphMaker("attention_like")
    x, w = m.tensor("x", MB, "input"), m.tensor("W", MB, "param")
    a, b, c, d = (m.tensor(n, 2 * MB, "activation") for n in "abcd")
    times = []

    def op(name, ins, outs, t):
        m.op(name, name, ins, outs, 1e6)
        times.append(t)

    op("proj", [x, w], [a], 1e-2)
    op("tr", [a], [b], 1e-5)
    op("sm", [b], [c], 1e-5)
    op("t2", [b], [d], 1e-5)
    h = m.tensor("h0", 2 * MB, "activation")
    op("f1", [c, d], [h], 1e-5)
    for k in range(1, 7):                  # fillers, each read by the next only (the last one small)
        nh = m.tensor(f"h{k}", (8 if k < 6 else 1) * MB, "activation")
        op(f"fill{k}", [h], [nh], 1e-3)
        h = nh
    g1 = m.tensor("g1", 2 * MB, "activation")
    op("g1", [h, c], [g1], 1e-3)
    g15 = m.tensor("g15", 2 * MB, "activation")
    op("g15", [g1], [g15], 1e-3)
    out = m.tensor("out", 4, "output")
    op("g2", [g15, d], [out], 1e-3)
    return m.graph([out], {}, {}), np.asarray(times)


def _plan(lim):
    g, ot = _attention_like()
    gi = GraphIndex.build(g, 256, keep_updated=False)
    space = ArenaSpace(gi, lim, recompute=True, op_time=ot, device=DEV)
    genes = space.zero()
    genes.recompute = space.rc_able.copy()
    built = plan_arena(gi, gi.default_schedule(), lim, genes, ot, DEV)
    plan = built.to_plan(g, "t", lim, DEV)
    packed = pack_actions(g, plan.actions, ot)
    rebuilt = [a.op for a in plan.actions if a.kind == "recompute"]
    return g, plan, packed, rebuilt


@pytest.mark.parametrize("lim", [16 * MB, 17 * MB, 18 * MB])
def test_a_dead_input_rebuilt_once_for_two_rebuilds(lim):
    g, plan, packed, rebuilt = _plan(lim)
    assert verify_plan(g, plan, lim) == []
    names = [g.ops[o].name for o in rebuilt]
    # c and d were dropped and rebuilt: their chain (proj, tr) runs once, not once per pending tensor
    # (base 94564c8: proj and tr twice)
    assert {"sm", "t2"} <= set(names), names
    assert names.count("proj") == 1 and names.count("tr") == 1, names
    assert int((packed.kind == RECOMPUTE).sum()) == len(rebuilt)


def test_without_keeping_the_chain_runs_twice(monkeypatch):
    """The same plan with the keeping switched off: proj and tr twice (what the test above rules out)."""
    monkeypatch.setattr(tuning, "KEEP_REBUILT_INPUTS", False)
    g, plan, _, rebuilt = _plan(17 * MB)
    assert verify_plan(g, plan, 17 * MB) == []
    names = [g.ops[o].name for o in rebuilt]
    assert names.count("proj") == 2 and names.count("tr") == 2, names
