"""Genome operators: schedules stay topological, allocations stay monotone, >= need and within the limit."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tvm_swap.errors import InfeasibleLimitError
from tvm_swap.planner.swapadvisor.encoding import (AllocationSpace, cls_from_steps, crossover_schedules, is_monotone_cls,
                                       locality_schedule, mutate_schedule)
from tvm_swap.planner.feasibility import minimal_pool
from tvm_swap.planner.graphindex import ROLE_KEEP, ROLE_KEEP_NEW, ROLE_KEEP_OLD, GraphIndex
from tvm_swap.testing import random_dag, random_topological_order, random_training_graph

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SIZES = (256, 1000, 5000, 65536, 1 << 20, 3 << 20)


def graph_for(seed, kind):
    if kind == "dag":
        return random_dag(seed, n_ops=25, sizes=SIZES, max_inputs=3, update_prob=0.5)
    return random_training_graph(seed, n_layers=5, width_bytes=SIZES, momentum=seed % 2 == 0)


def total_bytes(gi):
    return int(gi.size[gi.used].sum()) + gi.workspace


def limit_between(gi, frac):
    lo = minimal_pool(gi).limit
    return lo + int((total_bytes(gi) - lo) * frac)


def assert_valid(space, a):
    gi = space.gi
    assert len(a.cls) == gi.num_sizes
    assert is_monotone_cls(a.cls)
    assert len(a.cnt) == a.num_classes
    assert (a.cnt >= space.need(a.cls)).all()
    assert space.pool_bytes(a) + gi.workspace <= space.mem_limit


# ---------------------------------------------------------------- schedules
@SETTINGS
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["dag", "train"]), data=st.data())
def test_schedule_crossover_is_topological(seed, kind, data):
    g = graph_for(seed, kind)
    gi = GraphIndex.build(g)
    a = np.array(random_topological_order(g, seed), dtype=np.int64)
    b = np.array(random_topological_order(g, seed + 1), dtype=np.int64)
    cut = data.draw(st.integers(0, g.num_ops))
    child = crossover_schedules(a, b, cut)
    assert gi.is_topological(child)
    assert list(child[:cut]) == list(a[:cut])
    rest = [o for o in b if o not in set(a[:cut].tolist())]
    assert list(child[cut:]) == rest


@SETTINGS
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["dag", "train"]), p=st.floats(0.0, 1.0))
def test_schedule_mutation_is_topological(seed, kind, p):
    g = graph_for(seed, kind)
    gi = GraphIndex.build(g)
    parent = np.array(random_topological_order(g, seed), dtype=np.int64)
    child = mutate_schedule(gi, parent, p, np.random.default_rng(seed))
    assert gi.is_topological(child)


def test_mutation_without_random_picks_keeps_the_parent():
    g = graph_for(3, "dag")
    gi = GraphIndex.build(g)
    parent = np.array(random_topological_order(g, 7), dtype=np.int64)
    rng = np.random.default_rng(0)
    assert list(mutate_schedule(gi, parent, 0.0, rng)) == list(parent)
    # p > 0 but tiny: list scheduling by parent rank reproduces the parent when nothing is drawn
    assert gi.is_topological(mutate_schedule(gi, parent, 1e-9, rng))


def test_mutation_moves_many_ops_at_high_rate():
    g = random_dag(1, n_ops=200, locality=50)
    gi = GraphIndex.build(g)
    parent = gi.default_schedule()
    child = mutate_schedule(gi, parent, 0.5, np.random.default_rng(1))
    assert gi.is_topological(child)
    assert (child != parent).sum() > 20


def test_is_topological_rejects_bad_orders():
    g = random_training_graph(0, n_layers=3)
    gi = GraphIndex.build(g)
    s = gi.default_schedule()
    assert gi.is_topological(s)
    assert not gi.is_topological(s[::-1])
    assert not gi.is_topological(s[:-1])
    assert not gi.is_topological(np.concatenate((s[:-1], s[:1])))


# ---------------------------------------------------------------- allocations
def test_cls_from_steps_clips_to_monotone():
    assert list(cls_from_steps(np.array([5, 1, 0, 3, -2, 1]))) == [0, 1, 1, 2, 2, 3]
    assert is_monotone_cls(np.array([0, 0, 1, 2, 2]))
    assert not is_monotone_cls(np.array([0, 2]))
    assert not is_monotone_cls(np.array([1, 1]))
    assert not is_monotone_cls(np.array([0, 1, 0]))


@SETTINGS
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["dag", "train"]), frac=st.floats(0.0, 1.2),
       data=st.data())
def test_allocation_operators_keep_genomes_valid(seed, kind, frac, data):
    g = graph_for(seed, kind)
    gi = GraphIndex.build(g)
    space = AllocationSpace(gi, limit_between(gi, frac))
    rng = np.random.default_rng(seed)
    pop = space.seeds() + [space.random(rng) for _ in range(3)]
    for a in pop:
        assert_valid(space, a)
    for _ in range(4):
        i, j = data.draw(st.integers(0, len(pop) - 1)), data.draw(st.integers(0, len(pop) - 1))
        if space.m > 1:
            cut = data.draw(st.integers(1, space.m - 1))
            for kid in space.crossover(pop[i], pop[j], cut):
                assert_valid(space, kid)
                pop.append(kid)
        m = space.mutate(pop[i], rng, p_cls=data.draw(st.floats(0, 1)), p_cnt=data.draw(st.floats(0, 1)))
        assert_valid(space, m)


@SETTINGS
@given(seed=st.integers(0, 10_000), data=st.data())
def test_repair_of_arbitrary_genomes(seed, data):
    g = graph_for(seed, "dag")
    gi = GraphIndex.build(g)
    space = AllocationSpace(gi, limit_between(gi, data.draw(st.floats(0, 1))))
    m = space.m
    cls = np.array(data.draw(st.lists(st.integers(-3, 8), min_size=m, max_size=m)), dtype=np.int64)
    cnt = np.array(data.draw(st.lists(st.integers(-5, 10**6), min_size=1, max_size=m + 3)), dtype=np.int64)
    assert_valid(space, space.repair(cls, cnt))


def test_crossover_takes_prefix_and_suffix():
    g = random_dag(5, n_ops=40, sizes=SIZES)
    gi = GraphIndex.build(g)
    space = AllocationSpace(gi, total_bytes(gi) * 10)      # no pressure: nothing is scaled down
    m = space.m
    assert m >= 4
    a = space.repair(np.arange(m), space.demand(np.arange(m)))            # one class per size
    b = space.repair(np.zeros(m, dtype=np.int64), np.array([10**6]))       # one class for all
    k1, k2 = space.crossover(a, b, 2)
    assert list(k1.cls) == [0, 1] + [1] * (m - 2)       # b's flat suffix after a's two classes
    assert list(k2.cls) == [0, 0] + list(range(1, m - 1))


def test_counts_shrink_inversely_to_size_and_never_below_need():
    g = random_dag(2, n_ops=60, sizes=(256, 4096, 1 << 20))
    gi = GraphIndex.build(g)
    cls = np.arange(gi.num_sizes)
    need = gi.class_need(cls)
    cb = gi.ts
    budget = int((need * cb).sum()) + 2 * (1 << 20)
    space = AllocationSpace(gi, budget + gi.workspace)
    fitted = space.fit_counts(cls, need + 50)
    assert (fitted >= need).all()
    assert int((fitted * cb).sum()) <= budget
    # equal byte shares: the small classes keep many more extra objects than the big one
    assert fitted[0] - need[0] > fitted[-1] - need[-1]


def test_demand_matches_a_brute_force_count():
    g = random_training_graph(4, n_layers=6, width_bytes=SIZES)
    gi = GraphIndex.build(g)
    space = AllocationSpace(gi, total_bytes(gi))
    cls = cls_from_steps(np.array([0, 1, 0, 1, 1, 0][:gi.num_sizes]))
    n = g.num_ops
    live = np.zeros((int(cls[-1]) + 1, n), dtype=np.int64)
    for t in g.used_tensors():
        touches = [o for o in range(n) if t in g.ops[o].inputs or t in g.ops[o].outputs]
        first, last = min(touches), max(touches)
        if gi.role[t] in (ROLE_KEEP, ROLE_KEEP_OLD):    # kept params live from the start,
            first = 0
        if gi.role[t] in (ROLE_KEEP, ROLE_KEEP_NEW):    # kept ones and kept updates to the end
            last = n - 1
        live[cls[gi.size_idx[t]], first:last + 1] += 1
    assert list(space.demand(cls)) == list(live.max(axis=1))


def test_ample_memory_gives_every_class_its_demand():
    g = random_training_graph(1, n_layers=8, width_bytes=SIZES)
    gi = GraphIndex.build(g)
    space = AllocationSpace(gi, int(gi.used.sum()) * int(gi.ts[-1]) + gi.workspace)   # even one class fits all
    for a in space.seeds():
        assert (a.cnt == np.maximum(space.demand(a.cls), space.need(a.cls))).all()


def test_space_refuses_a_limit_below_the_minimal_pool():
    g = random_dag(0, n_ops=10)
    gi = GraphIndex.build(g)
    lo = minimal_pool(gi).limit
    with pytest.raises(InfeasibleLimitError) as e:
        AllocationSpace(gi, lo - 1)
    assert e.value.min_feasible == lo
    a = AllocationSpace(gi, lo).minimal_pool()
    assert space_total(gi, a) == lo


def space_total(gi, a):
    space = AllocationSpace(gi, 1 << 62)
    return space.pool_bytes(a) + gi.workspace


# ---------------------------------------------------------------- the memory-greedy seed schedule
@SETTINGS
@given(seed=st.integers(0, 10_000), kind=st.sampled_from(["dag", "train"]), net=st.booleans(),
       hot=st.floats(0, 1e9))
def test_locality_schedule_is_topological(seed, kind, net, hot):
    g = graph_for(seed, kind)
    gi = GraphIndex.build(g)
    parent = np.array(random_topological_order(g, seed), dtype=np.int64)
    assert gi.is_topological(locality_schedule(gi, parent, hot, net=net))


def test_locality_schedule_pulls_a_late_reader_next_to_its_hot_input():
    """x -> f0 -> a; a chain c1..c4 makes dy; tr = transpose(a) and dw = matmul(tr, dy) come last in graph
    order. Once dy is made (hot), dw waits only on tr, which is ready: both are pulled right after it."""
    from tvm_swap.graph import DataflowGraph, OpInfo, TensorInfo

    names = ["x", "a", "b1", "b2", "b3", "dy", "tr", "dw", "z"]
    kinds = ["input", "activation", "activation", "activation", "activation", "gradient", "activation",
             "output", "output"]
    S = 1 << 20
    tensors = [TensorInfo(i, n, S, (S // 4,), "float32", k) for i, (n, k) in enumerate(zip(names, kinds))]
    ix = {n: i for i, n in enumerate(names)}
    spec = [("f0", ["x"], ["a"]), ("c1", ["a"], ["b1"]), ("c2", ["b1"], ["b2"]), ("c3", ["b2"], ["b3"]),
            ("c4", ["b3"], ["dy"]), ("z", ["dy"], ["z"]), ("tr", ["a"], ["tr"]), ("dw", ["tr", "dy"], ["dw"])]
    ops = [OpInfo(i, n, n, tuple(ix[t] for t in ins), tuple(ix[t] for t in outs), 1e6)
           for i, (n, ins, outs) in enumerate(spec)]
    g = DataflowGraph("pull", tensors, ops, [ix["dw"], ix["z"]], {})
    g.validate()
    gi = GraphIndex.build(g)
    order = [spec[o][0] for o in locality_schedule(gi, gi.default_schedule(), 1e12, net=False)]
    assert order.index("tr") == order.index("c4") + 1 and order.index("dw") == order.index("c4") + 2
    assert gi.is_topological(locality_schedule(gi, gi.default_schedule(), 1e12, net=True))
