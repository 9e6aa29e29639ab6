"""Elementwise ops run in place: which kernels may (graph/inplace.py), how a plan says it (Plan.inplace), and the
verifier refusing a plan that reads the overwritten input afterwards."""
from dataclasses import replace

import pytest
from tvm.script import tirx as T

from tvm_swap.errors import GraphError
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.graph.inplace import elementwise_aliases
from tvm_swap.plan import Action, ActionKind
from tvm_swap.planner.api import feasible_floor, plan_graph
from tvm_swap.verify import verify_plan


@T.prim_func(private=True, s_tir=True)
def add_flipped(a: T.Buffer((4,), "float32"), c: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("x"):
            vi = T.axis.remap("S", [i])
            b[vi] = a[vi] + c[3 - vi]


@T.prim_func(private=True, s_tir=True)
def transpose(a: T.Buffer((4, 4), "float32"), b: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.sblock("x"):
            vi, vj = T.axis.remap("SS", [i, j])
            b[vi, vj] = a[vj, vi]


@T.prim_func(private=True, s_tir=True)
def cumulative(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 4):
        with T.sblock("x"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                b[vi] = T.float32(0)
            b[vi] = b[vi] + T.if_then_else(vk <= vi, a[vk], T.float32(0))


def test_only_an_input_read_at_the_output_element_may_be_overwritten():
    assert elementwise_aliases(add_flipped) == ((0, 2),)    # c is read at 3 - i: not c
    assert elementwise_aliases(transpose) == ()
    assert elementwise_aliases(cumulative) == ()


def _chain(second_reader: bool = False) -> DataflowGraph:
    """x -> a (4 KiB) -> relu, in place candidate -> b -> c; with second_reader, the last op reads a too."""
    t = [TensorInfo(0, "x", 1024, (256,), "float32", "input"), TensorInfo(1, "a", 4096, (1024,), "float32", "activation"),
         TensorInfo(2, "b", 4096, (1024,), "float32", "activation"), TensorInfo(3, "c", 256, (64,), "float32", "output")]
    ops = [OpInfo(0, "k0", "k0", (0,), (1,), 1e6), OpInfo(1, "relu", "relu", (1,), (2,), 1e3),
           OpInfo(2, "k2", "k2", (1, 2) if second_reader else (2,), (3,), 1e6)]
    g = DataflowGraph("chain", t, ops, outputs=[3], meta={"inplace": [[1, 2, 1]]})
    g.validate()
    return g


def test_an_op_whose_input_dies_runs_in_place_below_its_input_plus_output():
    g = _chain()
    floor, _ = feasible_floor(g, "arena")
    assert floor < 2 * 4096                       # relu's input and output no longer both count
    plan = plan_graph(g, floor, planner="swapadvisor-nosearch", pool="arena")
    assert plan.verified and plan.inplace == [(1, 2, 1)]
    assert plan.predicted["peak_bytes"] <= floor
    assert verify_plan(g, plan) == []


def test_the_verifier_refuses_reading_an_input_after_it_was_overwritten():
    g = _chain()
    plan = plan_graph(g, feasible_floor(g, "arena")[0], planner="swapadvisor-nosearch", pool="arena")
    k = next(i for i, a in enumerate(plan.actions) if a.kind == ActionKind.COMPUTE and a.op == 1)
    obj = plan.actions[k].out_objs[0]
    late = replace(plan, actions=[*plan.actions[:k + 1], Action(ActionKind.SWAP_OUT, tensor=1, obj=obj, deps=(k,)),
                                  *[replace(a, deps=tuple(d + (d > k) for d in a.deps))
                                    for a in plan.actions[k + 1:]]])
    assert any("overwritten in place" in v for v in verify_plan(g, late))
    undeclared = replace(plan, inplace=[])        # two live tensors in one object
    assert any("may hold one live tensor" in v for v in verify_plan(g, undeclared))
    not_allowed = replace(plan, inplace=[(2, 3, 2)])
    assert any("does not allow" in v for v in verify_plan(g, not_allowed))


def test_an_input_read_again_later_is_not_overwritten():
    g = _chain(second_reader=True)
    for limit in (feasible_floor(g, "arena")[0], 1 << 20):
        plan = plan_graph(g, limit, planner="swapadvisor-nosearch", pool="arena")
        assert plan.verified and plan.inplace == []


def test_a_pair_of_different_sizes_is_refused():
    g = _chain()
    bad = DataflowGraph("bad", g.tensors, g.ops, [3], meta={"inplace": [[0, 1, 0]]})
    with pytest.raises(GraphError, match="in place"):
        bad.validate()
