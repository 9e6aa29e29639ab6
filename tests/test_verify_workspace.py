"""A kernel's workspace is a tensor of its own (graph/workspace.py): an arena range for that kernel only, which
the verifier checks like any stay (a plan that overlaps it with a live tensor is refused), and the zoo graphs
carry it so (no reserve beside the arena)."""
from __future__ import annotations

import dataclasses

import pytest

from tvm_swap.graph.workspace import lift_workspace, workspace_tensors
from tvm_swap.plan import ActionKind
from tvm_swap.planner.api import plan_graph
from tvm_swap.planner.graphindex import GraphIndex
from tvm_swap.testing import random_dag
from tvm_swap.verify import verify_plan


def _lifted(seed):
    g = random_dag(seed, n_ops=16, workspace_prob=0.5)
    assert any(op.workspace for op in g.ops)
    return g, lift_workspace(g)


def test_lift_moves_each_workspace_into_a_tensor_of_its_op():
    g, lg = _lifted(3)
    assert all(op.workspace == 0 for op in lg.ops) and GraphIndex.build(lg, 256).workspace == 0
    ws = workspace_tensors(lg)
    assert sorted(o for o in ws.values()) == [op.id for op in g.ops if op.workspace]
    for t, o in ws.items():
        assert lg.tensors[t].nbytes == g.ops[o].workspace and not lg.consumers()[t]
    plain = random_dag(3, n_ops=16, workspace_prob=0.0)
    assert lift_workspace(plain) is plain            # no workspace: the very graph (its plans unchanged)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_verifier_refuses_a_workspace_range_over_a_live_tensor(seed):
    _, lg = _lifted(seed)
    plan = plan_graph(lg, "60%", planner="swapadvisor", pool="arena", generations=2, workers=1, seed=0)
    assert verify_plan(lg, plan) == []
    arena, ws = plan.pool, workspace_tensors(lg)
    where = {}
    bad = None
    for a in plan.actions:
        if a.kind != ActionKind.COMPUTE:
            continue
        where.update(zip(lg.ops[a.op].outputs, a.out_objs))
        mine = [t for t in lg.ops[a.op].outputs if t in ws]
        ins = [t for t in lg.ops[a.op].inputs if t in where]
        if mine and ins:
            bad = (where[mine[0]], where[max(ins, key=lambda t: lg.tensors[t].nbytes)], mine[0])
            break
    assert bad is not None
    ws_obj, in_obj, t = bad
    offsets = list(arena.offsets)
    offsets[ws_obj] = min(offsets[in_obj], arena.arena_bytes - arena.sizes[ws_obj])
    assert offsets[ws_obj] < offsets[in_obj] + arena.sizes[in_obj]      # the two ranges overlap
    broken = dataclasses.replace(plan, pool=dataclasses.replace(arena, offsets=offsets))
    errors = verify_plan(lg, broken)
    assert any("overlap" in e and lg.tensors[t].name in e for e in errors), errors


def test_zoo_graphs_carry_workspace_as_tensors():
    from tvm_swap.zoo import load_zoo

    g = load_zoo("zoo:wresnet-152-10@batch=16")
    ws = workspace_tensors(g)
    assert ws and all(op.workspace == 0 for op in g.ops)
    assert max(g.tensors[t].nbytes for t in ws) > 2 ** 20
