"""A hand-made plan that drops an activation and recomputes it (shared by the verifier and simulator tests)."""
from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo
from tvm_swap.plan import Action, Plan, Pool

A = 1024
X, P, ACT, B, C, PNEW = 0, 1, 2, 3, 4, 5


def rc_graph(update=False):
    """op0 f: a = f(x, p); op1 g: b = g(a, p) (and p_new, which replaces p, when update); op2 h: c = h(b, a).
    `a` is read again by op2, so a plan may drop it after op1 and recompute it before op2."""
    kinds = [("x", "input"), ("p", "param"), ("a", "activation"), ("b", "activation"), ("c", "output")]
    if update:
        kinds.append(("p_new", "output"))
    tensors = [TensorInfo(i, n, A, (A // 4,), "float32", k) for i, (n, k) in enumerate(kinds)]
    ops = [OpInfo(0, "f", "f", (X, P), (ACT,)), OpInfo(1, "g", "g", (ACT, P), (B, PNEW) if update else (B,)),
           OpInfo(2, "h", "h", (B, ACT), (C,))]
    return DataflowGraph("rc", tensors, ops, outputs=[C, PNEW] if update else [C],
                         updates={PNEW: P} if update else {})


def rc_actions(update=False):
    acts = [
        Action("swap_in", tensor=X, obj=0),                          # 0
        Action("compute", op=0, deps=(0,), out_objs=(1,)),           # 1: a -> o1
        Action("compute", op=1, out_objs=(2, 4) if update else (2,)),  # 2: b -> o2 (p_new -> o4)
        Action("drop", tensor=ACT, obj=1, deps=(2,)),                # 3: a dropped without a copy
        Action("recompute", op=0, deps=(3,), out_objs=(1,)),         # 4: a rebuilt from x and p
        Action("drop", tensor=X, obj=0, deps=(4,)),                  # 5
        Action("compute", op=2, deps=(5,), out_objs=(0,)),           # 6: c = h(b, a) reads the rebuilt a
        Action("drop", tensor=ACT, obj=1, deps=(6,)),                # 7
        Action("drop", tensor=B, obj=2, deps=(6,)),                  # 8
        Action("swap_out", tensor=C, obj=0, deps=(6,)),              # 9
        Action("drop", tensor=C, obj=0, deps=(9,)),                  # 10
    ]
    if update:
        acts.append(Action("drop", tensor=P, obj=3, deps=(4,)))      # 11: the stale p leaves; p_new stays
    return acts


def rc_plan(update=False, pool=None):
    g = rc_graph(update)
    pool = pool or Pool([A], [5])
    return g, Plan("rc", g.fingerprint(), "hand", pool.total_bytes(), {}, [0, 1, 2], pool, [0] * g.num_tensors,
                   [(P, 3)], rc_actions(update))
