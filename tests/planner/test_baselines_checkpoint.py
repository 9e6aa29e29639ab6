"""checkpoint-sqrt (activation checkpointing every sqrt(n) layers, Chen et al. 2016): verified plans that
recompute instead of copying, memory that really drops on a chain, a clear refusal when weights and
optimizer state alone do not fit, and the segmentation and order it rests on."""
import subprocess
import sys
from dataclasses import replace

import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.errors import InfeasibleLimitError
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.planner import plan_graph
from tvm_swap.planner.baselines.checkpoint import autograd_order, plan_checkpointing, segment_forward
from tvm_swap.planner.baselines.noswap import noswap_need
from tvm_swap.planner.baselines.vdnn import forward_ops
from tvm_swap.testing import random_op_times, random_training_graph
from tvm_swap.verify import verify_plan

DEV = get_device("v100-16gb")
ACT, WEIGHT = 4 << 20, 256 << 10


def chain(layers=36, act=ACT, weight=WEIGHT):
    """A plain chain: h_i = fwd_i(h_{i-1}, W_i); backward reads dh_i, h_{i-1}, W_i; SGD updates each W_i."""
    tensors, ops = [], []

    def tensor(name, nbytes, kind):
        tensors.append(TensorInfo(len(tensors), name, nbytes, (nbytes // 4,), "float32", kind))
        return len(tensors) - 1

    def op(name, kernel, ins, outs, flops):
        ops.append(OpInfo(len(ops), name, kernel, tuple(ins), tuple(outs), float(flops)))

    h = [tensor("x", act, "input")]
    W = [tensor(f"W{i}", weight, "param") for i in range(1, layers + 1)]
    for i in range(1, layers + 1):
        h.append(tensor(f"h{i}", act, "activation"))
        op(f"fwd{i}", "dense", [h[i - 1], W[i - 1]], [h[i]], 1e9)
    loss = tensor("loss", 4, "output")
    op("loss", "loss", [h[-1]], [loss], 1e6)
    g_ = tensor(f"dh{layers}", act, "gradient")
    op("loss_grad", "loss_grad", [h[-1]], [g_], 1e6)
    outputs, updates = [loss], {}
    for i in range(layers, 0, -1):
        dW = tensor(f"dW{i}", weight, "gradient")
        outs = [dW]
        if i > 1:
            outs.append(tensor(f"dh{i - 1}", act, "gradient"))
        op(f"bwd{i}", "dense_grad", [g_, h[i - 1], W[i - 1]], outs, 2e9)
        new = tensor(f"W{i}_new", weight, "output")
        op(f"sgd{i}", "sgd", [W[i - 1], dW], [new], 1e6)
        updates[new] = W[i - 1]
        outputs.append(new)
        g_ = outs[-1]
    g = DataflowGraph("chain", tensors, ops, outputs, updates, {})
    g.validate()
    return g


def plan(g, limit, t=None, **kw):
    return plan_graph(g, limit, device=DEV, op_time=t, planner="checkpoint-sqrt", workers=1, **kw)


def need_of(g, t=None, **kw):
    with pytest.raises(InfeasibleLimitError) as e:
        plan(g, 1 << 20, t, **kw)
    return e.value.min_feasible


def without_recomputes(p):
    """The plan with its recompute actions left out (deps renumbered)."""
    keep = [i for i, a in enumerate(p.actions) if a.kind != "recompute"]
    new = {old: k for k, old in enumerate(keep)}
    acts = [replace(p.actions[i], deps=tuple(new[d] for d in p.actions[i].deps if d in new)) for i in keep]
    return replace(p, actions=acts)


# ---------------------------------------------------------------- it recomputes, and only recomputes
def test_chain_plan_recomputes_instead_of_copying():
    g = chain()
    need = need_of(g)
    p = plan(g, need)
    assert p.verified and verify_plan(g, p, mem_limit=need) == []
    rec = [a.op for a in p.actions if a.kind == "recompute"]
    assert rec and len(rec) == p.search["recomputed_ops"] == p.predicted["recompute_count"]
    assert all(g.ops[o].name.startswith("fwd") for o in rec), "only forward ops run again"
    assert len(set(rec)) == len(rec), "each forward op runs again at most once"
    moved = {a.tensor for a in p.actions if a.kind in ("swap_out", "swap_in")}
    assert not any(g.tensors[t].kind == "activation" for t in moved), "no activation crosses the link"
    # the recompute time is charged: the compute stream runs forward twice over for the rebuilt segments
    assert p.predicted["recompute_s"] > 0
    assert p.predicted["time_s"] >= (p.predicted["ideal_time_s"] + p.predicted["recompute_s"]) * (1 - 1e-9)
    # without its recomputes the same plan reads dropped activations: the verifier says so
    bad = verify_plan(g, without_recomputes(p), mem_limit=need)
    assert bad and any("not resident" in v or "resident" in v for v in bad), bad[:3]


def test_memory_drops_against_noswap_on_a_chain():
    layers = 36
    g = chain(layers)
    full = noswap_need(g, 256)
    need = need_of(g)
    weights = sum(t.nbytes for t in g.tensors if t.kind == "param")
    # sqrt(36) = 6 segments: 6 boundaries and one segment of 6 activations (plus the gradients in flight)
    # instead of 36 activations
    assert need <= 0.5 * full, (need, full)
    assert need - weights <= (2 * 6 + 4) * ACT + 4 * WEIGHT, (need - weights) / ACT
    # one segment is no checkpointing at all (checkpoint_sequential's last segment runs normally)
    assert need_of(g, checkpoint_segments=1) > 0.9 * full
    assert plan(g, full, checkpoint_segments=1).predicted["recompute_count"] == 0
    # the need grows like sqrt(n): four times the layers, about twice the activations kept
    big = chain(4 * layers)
    grown = (need_of(big) - 4 * weights) / (need - weights)
    assert 1.5 <= grown <= 2.6, grown


def test_refuses_when_weights_and_optimizer_state_do_not_fit():
    g = random_training_graph(2, n_layers=10, momentum=True)
    t = random_op_times(g, 2)
    state = sum(x.nbytes for x in g.tensors if x.kind in ("param", "optimizer_state"))
    with pytest.raises(InfeasibleLimitError, match="checkpoint-sqrt") as e:
        plan(g, state - 1, t)
    need = e.value.min_feasible
    assert need > state and "raise mem_limit" in str(e.value)
    p = plan(g, need, t)                                  # the named minimum works
    assert p.verified and p.pool.total_bytes() <= need
    assert {x for x, _ in p.initial_residents} >= {x.id for x in g.tensors if x.kind == "param"}
    with pytest.raises(InfeasibleLimitError) as e2:
        plan(g, need - 1, t)
    assert e2.value.min_feasible == need


@pytest.mark.parametrize("seed", range(6))
def test_random_training_graphs_verify_at_their_need(seed):
    g = random_training_graph(seed, n_layers=12 + seed, momentum=seed % 2 == 1, skip_prob=0.3, stash_prob=0.3)
    t = random_op_times(g, seed)
    need = need_of(g, t)
    p = plan(g, need, t)
    assert p.verified and verify_plan(g, p, mem_limit=need) == []
    assert p.predicted["time_s"] >= p.predicted["lower_bound_s"] * (1 - 1e-9)
    # recomputes read no param after its update was computed (the verifier checks it; here from the actions)
    update_of = {old: new for new, old in g.updates.items()}
    done = set()
    for a in p.actions:
        if a.kind == "compute":
            done.add(a.op)
        elif a.kind == "recompute":
            assert not any(i in update_of and int(g.producer()[update_of[i]]) in done for i in g.ops[a.op].inputs)


# ---------------------------------------------------------------- segments, order, what is dropped
def test_segments_are_contiguous_and_of_equal_compute():
    assert segment_forward(list(range(16)), [1.0] * 16) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11],
                                                          [12, 13, 14, 15]]
    # 9 ops, 3 segments of 16/3 each: the heavy op is a segment of its own, each op goes where its midpoint falls
    times = [8.0] + [1.0] * 8
    assert segment_forward(list(range(9)), times) == [[0], [1, 2, 3], [4, 5, 6, 7, 8]]
    assert segment_forward([5, 7, 9], [0.0] * 10, k=3) == [[5], [7], [9]]
    assert segment_forward([], []) == []


def test_chain_drops_all_but_the_boundaries_and_the_last_segment():
    g = chain(16)
    order = autograd_order(g)
    assert order == list(range(g.num_ops)), "a chain's backward reads gradients from its first op on"
    ck = plan_checkpointing(g, order, [1.0] * g.num_ops)
    fwd = sorted(forward_ops(g))
    # 17 forward ops (16 layers + the loss) in round(sqrt(17)) = 4 segments, each op where its midpoint falls
    assert [len(s) for s in ck.segments] == [4, 4, 5, 4]
    dropped = {g.tensors[t].name for t in ck.rebuild_at}
    # h1..h16 feed backward; the segments' last outputs (h4, h8, h13) are boundaries, h14.. the last segment's
    assert dropped == {f"h{i}" for i in range(1, 14)} - {"h4", "h8", "h13"}
    # each segment is rebuilt just before its own backward, not all at once
    assert len(set(ck.rebuild_at.values())) == 3
    assert sorted(o for ops in ck.chains.values() for o in ops) == sorted(
        o for o in fwd if g.ops[o].outputs[0] in ck.rebuild_at)


def test_autograd_order_runs_gradient_free_backward_ops_where_they_are_needed():
    """TVM's order runs BERT's transposes of saved activations right after the loss; autograd runs them in the
    layer's backward. Without the move, every segment would be rebuilt at the start of backward."""
    from tvm_swap.zoo import load_zoo

    g = load_zoo("zoo:bert-large@batch=8")
    order = autograd_order(g)
    pos = {o: i for i, o in enumerate(order)}
    assert sorted(order) == list(range(g.num_ops))
    assert all(pos[p] < pos[o] for o, preds in enumerate(g.op_preds()) for p in preds), "topological"
    assert order != list(range(g.num_ops))
    ck = plan_checkpointing(g, order, [1.0] * g.num_ops)
    early = plan_checkpointing(g, list(range(g.num_ops)), [1.0] * g.num_ops)
    backward = g.num_ops - len(forward_ops(g))

    def spread(c):
        return (max(c.rebuild_at.values()) - min(c.rebuild_at.values())) / backward

    assert len(set(ck.rebuild_at.values())) >= len(ck.segments) - 2
    assert spread(ck) > 0.5 and spread(early) < 0.1, (spread(ck), spread(early))


def test_bad_segment_count_is_a_clear_error():
    from tvm_swap.errors import TvmSwapError

    for bad in (0, -2, 2.5, "4", True):
        with pytest.raises(TvmSwapError, match="checkpoint_segments"):
            plan(chain(4), "200%", checkpoint_segments=bad)


def test_inference_graph_drops_nothing():
    from tvm_swap.zoo import load_zoo

    g = load_zoo("zoo:resnet-152-inference@batch=1")
    p = plan(g, 2 * noswap_need(g, 256))
    assert p.verified and p.predicted["recompute_count"] == 0 and p.search["dropped"] == 0


def test_cli_takes_checkpoint_sqrt(tmp_path):
    g = chain(9)
    path = tmp_path / "g.json"
    g.save(path)
    r = subprocess.run([sys.executable, "-m", "tvm_swap.cli", "plan", str(path), "--mem-limit", "200%",
                        "--planner", "checkpoint-sqrt", "-o", str(tmp_path / "p.json")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "tvm_swap.cli", "plan", str(path), "--mem-limit", "1%",
                        "--planner", "checkpoint-sqrt"], capture_output=True, text=True)
    assert r.returncode == 1 and "smallest feasible limit" in r.stderr and "Traceback" not in r.stderr
