"""Ops placed on the host (Plan.host_ops): the verifier accepts a plan that copies their inputs out and
their outputs in, in order, and refuses one that reads a host op's output on the device before it arrives."""
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.plan import Action, Plan, Pool
from tvm_swap.verify import verify_plan

A = 1024


def graph():
    """op0 (device): a = f(x); op1 (host): h = g(a); op2 (device): y = k(h); y is the output."""
    ts = [TensorInfo(i, n, A, (A // 4,), "float32", k)
          for i, (n, k) in enumerate([("x", "input"), ("a", "activation"), ("h", "activation"), ("y", "output")])]
    ops = [OpInfo(0, "f", "f", (0,), (1,)), OpInfo(1, "g", "g", (1,), (2,)), OpInfo(2, "k", "k", (2,), (3,))]
    return DataflowGraph("host3", ts, ops, outputs=[3])


def plan(g, host_dep=True, copy_dep=True, out_objs=()):
    acts = [Action("swap_in", tensor=0, obj=0),                          # 0 x in
            Action("compute", op=0, deps=(0,), out_objs=(1,)),           # 1 a = f(x)
            Action("swap_out", tensor=1, obj=1, deps=(1,)),              # 2 a out
            Action("drop", tensor=0, obj=0, deps=(1,)),                  # 3
            Action("compute", op=1, deps=(2,) if copy_dep else (), out_objs=out_objs),   # 4 host: h = g(a)
            Action("drop", tensor=1, obj=1, deps=(2,)),                  # 5
            Action("swap_in", tensor=2, obj=0, deps=((4,) if host_dep else ()) + (3,)),  # 6 h in
            Action("compute", op=2, deps=(6,), out_objs=(1,)),           # 7 y = k(h)
            Action("swap_out", tensor=3, obj=1, deps=(7,)),              # 8
            Action("drop", tensor=2, obj=0, deps=(7,)),
            Action("drop", tensor=3, obj=1, deps=(8,))]
    return Plan("host3", g.fingerprint(), "hand", 4 * A, {}, [0, 1, 2], Pool([A], [2]), [0, 0, 0, 0], [], acts,
                host_ops=[1])


def test_a_host_op_between_copies_is_accepted():
    g = graph()
    assert verify_plan(g, plan(g)) == []


def test_a_device_read_of_a_host_output_before_it_arrives_is_refused():
    g = graph()
    v = "\n".join(verify_plan(g, plan(g, host_dep=False)))
    assert "written on the host by op 'g'" in v and "does not complete before it" in v


def test_a_host_op_reading_a_device_tensor_without_its_copy_is_refused():
    g = graph()
    v = "\n".join(verify_plan(g, plan(g, copy_dep=False)))
    assert "host op 'g'" in v and "no host copy before it" in v


def test_a_host_op_naming_device_objects_is_refused():
    g = graph()
    assert any("writes host memory" in x for x in verify_plan(g, plan(g, out_objs=(0,))))


def test_host_ops_survive_the_plan_json():
    g = graph()
    p = Plan.from_json(plan(g).to_json())
    assert p.host_ops == [1] and p.to_dict()["version"] == 4 and verify_plan(g, p) == []
