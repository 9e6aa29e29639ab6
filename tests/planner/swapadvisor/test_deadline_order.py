"""The update-deadline order (swapadvisor/deadline_order.py): each op run for the first param update it leads to,
so independent backward chains (a bidirectional RNN's two directions) run one after the other, each update right
after its last gradient; the polish's last move puts the polished genome on it (polish_schedule.py) where that
is faster: at a limit where two chains' working sets do not fit side by side, verified plans faster than the
graph order's."""
import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.planner.api import plan_graph
from tvm_swap.planner.graphindex import GraphIndex
from tvm_swap.planner.swapadvisor.deadline_order import deadline_schedule, update_deadlines
from tvm_swap.planner.swapadvisor.encoding import AllocationSpace
from tvm_swap.planner.swapadvisor.ga import Evaluator, GeneticSearch, Genome
from tvm_swap.planner.swapadvisor.polish import PolishTimes
from tvm_swap.planner.swapadvisor.polish_schedule import deadline_move
from tvm_swap.testing import random_dag, random_training_graph
from tvm_swap.verify import verify_plan

DEV = get_device("v100-16gb")
MIB = 2 ** 20


def two_chain_step(steps: int = 4, w_bytes: int = 64 * MIB, h_bytes: int = 4 * MIB) -> DataflowGraph:
    """A training step of two independent recurrent branches A and B over `steps` steps (a bidirectional
    layer's two directions): forward f_X_t(h, W_X); the loss reads both; backward b_X_t(dh, h, W_X) -> dh,
    dW_X_t (a full-size per-step weight gradient), summed into acc_X_t; sgd_X(W_X, acc, m_X) -> W_X', m_X'.
    In graph order the two backward chains interleave step by step and both updates come last (as autodiff
    emits them)."""
    tensors, ops = [], []

    def t(name, nbytes, kind):
        tensors.append(TensorInfo(len(tensors), name, int(nbytes), (int(nbytes) // 4,), "float32", kind))
        return len(tensors) - 1

    def op(name, kernel, ins, outs, flops):
        ops.append(OpInfo(len(ops), name, kernel, tuple(ins), tuple(outs), float(flops), 0))

    x = t("x", h_bytes, "input")
    W = {b: t(f"W_{b}", w_bytes, "param") for b in "AB"}
    M = {b: t(f"m_{b}", w_bytes, "optimizer_state") for b in "AB"}
    h = {b: [x] for b in "AB"}
    for s in range(1, steps + 1):
        for b in "AB":
            h[b].append(t(f"h_{b}{s}", h_bytes, "activation"))
            op(f"f_{b}{s}", "cell", [h[b][-2], W[b]], [h[b][-1]], 2e9)
    loss = t("loss", 4, "output")
    op("loss", "loss", [h["A"][-1], h["B"][-1]], [loss], 1e6)
    dh = {b: t(f"dh_{b}{steps}", h_bytes, "gradient") for b in "AB"}
    op("loss_grad", "loss_grad", [h["A"][-1], h["B"][-1]], [dh["A"], dh["B"]], 1e6)
    acc = {b: None for b in "AB"}
    for s in range(steps, 0, -1):
        for b in "AB":
            d_prev, dw = t(f"dh_{b}{s - 1}", h_bytes, "gradient"), t(f"dW_{b}{s}", w_bytes, "gradient")
            op(f"b_{b}{s}", "cell_grad", [dh[b], h[b][s - 1], W[b]], [d_prev, dw], 4e9)
            dh[b] = d_prev
            if acc[b] is None:
                acc[b] = dw
            else:
                a = t(f"acc_{b}{s}", w_bytes, "gradient")
                op(f"acc_{b}{s}", "add", [acc[b], dw], [a], 1e6)
                acc[b] = a
    outputs, updates = [loss], {}
    for b in "AB":
        w_new, m_new = t(f"W_{b}_new", w_bytes, "output"), t(f"m_{b}_new", w_bytes, "output")
        op(f"sgd_{b}", "sgd", [W[b], acc[b], M[b]], [w_new, m_new], 1e6)
        updates[w_new], updates[m_new] = W[b], M[b]
        outputs += [w_new, m_new]
    g = DataflowGraph("two_chains", tensors, ops, outputs, updates, {})
    g.validate()
    return g


def _names(g, schedule):
    return [g.ops[o].name for o in schedule]


def test_each_backward_chain_runs_to_its_update_before_the_other_starts():
    g = two_chain_step(steps=3)
    gi = GraphIndex.of(g, keep_updated=False)
    s = deadline_schedule(gi, gi.default_schedule())
    assert gi.is_topological(s)
    fwd = [f"f_{b}{k}" for k in (1, 2, 3) for b in "AB"] + ["loss", "loss_grad"]
    # the forward keeps the graph order (it all leads to the first update); A's chain (its update comes first in
    # the graph order) runs to sgd_A, then B's
    assert _names(g, s) == fwd + ["b_A3", "b_A2", "acc_A2", "b_A1", "acc_A1", "sgd_A",
                                  "b_B3", "b_B2", "acc_B2", "b_B1", "acc_B1", "sgd_B"]
    assert _names(g, gi.default_schedule())[len(fwd):len(fwd) + 3] == ["b_A3", "b_B3", "b_A2"]   # interleaved


def test_deadlines_are_the_first_update_each_op_leads_to():
    g = two_chain_step(steps=2)
    gi = GraphIndex.of(g, keep_updated=False)
    parent = gi.default_schedule()
    key = update_deadlines(gi, parent)
    by_name = {op.name: int(key[op.id]) for op in g.ops}
    sgd_a, sgd_b = by_name["sgd_A"], by_name["sgd_B"]      # an update's deadline is its own rank
    assert by_name["sgd_A"] < by_name["sgd_B"]
    assert all(by_name[n] == sgd_a for n in ("f_A1", "f_B2", "loss_grad", "b_A2", "acc_A1"))
    assert all(by_name[n] == sgd_b for n in ("b_B2", "b_B1", "acc_B1"))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_parent_where_nothing_is_updated_and_a_topological_order_elsewhere(seed):
    g = random_dag(seed, n_ops=30)
    gi = GraphIndex.of(g, keep_updated=False)
    parent = gi.default_schedule()[::-1].copy() if gi.is_topological(gi.default_schedule()[::-1]) else \
        gi.default_schedule()
    assert not g.updates and np.array_equal(deadline_schedule(gi, parent), parent)
    tg = random_training_graph(seed, n_layers=5, momentum=True)
    tgi = GraphIndex.of(tg, keep_updated=False)
    for parent in (tgi.default_schedule(), tgi.default_schedule()[::-1].copy()):
        if not tgi.is_topological(parent):
            continue
        assert tgi.is_topological(deadline_schedule(tgi, parent))


# six weight-sized objects and the small tensors: the two branches' backward working sets (weight, accumulator,
# per-step gradient) do not fit side by side with an update's (weight, accumulator, momentum, their updates)
LIMIT = 6 * 64 * MIB + 40 * 4 * MIB


def _seeds(g, op_time, ev, space=None):
    return dict(GeneticSearch(g, op_time, DEV, LIMIT, 256, evaluator=ev, space=space).seed_genomes())


def test_the_move_takes_the_deadline_order_where_faster_and_only_there():
    g = two_chain_step(steps=6)
    op_time = np.array([op.flops for op in g.ops]) / 1.5e12    # compute about the link's time, as on BRNN-4-8K
    ev = Evaluator(g, op_time, DEV, LIMIT, 256, pool="arena", recompute=False)
    times = PolishTimes(ev)
    for seeds, name in ((_seeds(g, op_time, ev), "nosearch"),
                        (_seeds(g, op_time, ev, AllocationSpace(ev.gi, LIMIT)), "minimal_pool")):
        a = seeds[name]
        a = Genome(a.schedule, a.alloc, ev.time_of(a.schedule, a.alloc))
        moved, n = deadline_move(ev, a, None, times)
        assert n == 1 and moved is not a and moved.time_s < a.time_s
        assert np.array_equal(moved.schedule, deadline_schedule(ev.gi, a.schedule))
        assert deadline_move(ev, moved, None, times) == (moved, 0)        # already in that order: no evaluation
        slow = Genome(moved.schedule, moved.alloc, 0.0)                    # (as if its own order were faster)
        assert deadline_move(ev, slow, None, times)[0] is slow
        assert deadline_move(ev, a, 0.0, times) == (a, 0)                  # past the deadline: none made


def test_the_searched_plan_takes_it_verified_and_faster_than_the_search_left_it():
    g = two_chain_step(steps=6)
    op_time = np.array([op.flops for op in g.ops]) / 1.5e12
    plan = plan_graph(g, LIMIT, DEV, op_time=op_time, planner="swapadvisor", generations=1, seed=0, workers=1)
    assert verify_plan(g, plan, LIMIT) == []
    polish = plan.search["polish"]
    assert polish["deadline_order"] and polish["to_s"] < polish["from_s"]
    assert plan.predicted["time_s"] == pytest.approx(polish["to_s"], rel=1e-9)
    gi = GraphIndex.of(g, keep_updated=False)
    pos = np.empty(g.num_ops, dtype=np.int64)
    pos[np.asarray(plan.schedule)] = np.arange(g.num_ops)
    a_ops = [op.id for op in g.ops if op.name.startswith(("b_A", "acc_A"))]
    b_ops = [op.id for op in g.ops if op.name.startswith(("b_B", "acc_B"))]
    first = min((a_ops, b_ops), key=lambda ops: pos[ops].min())
    other = b_ops if first is a_ops else a_ops
    assert pos[first].max() < pos[other].min()              # one chain after the other
    assert gi.is_topological(plan.schedule)
