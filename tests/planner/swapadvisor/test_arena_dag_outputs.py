"""The arena search on bench_gap's DAGs whose 8 MB outputs saturate the d2h link: a placement that cools some of
the outputs' stays when cooling all of them overflows (arena.cooling.partly_cooled, the partly gene of the partly-cooled
island), and the polish of the search's best memory genes on a grid (polish.py)."""
import numpy as np

from tvm_swap.cost.devices import get_device
from tvm_swap.planner.api import plan_graph
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.feasibility import min_feasible_limit
from tvm_swap.planner.simulator import simulate
from tvm_swap.planner.swapadvisor.arena import ArenaSpace, plan_arena
from tvm_swap.planner.swapadvisor.encoding import AllocationSpace
from tvm_swap.planner.swapadvisor.ga import Evaluator
from tvm_swap.planner.swapadvisor.polish import polish_memory
from tvm_swap.testing import random_dag, random_op_times
from tvm_swap.verify import verify_plan

DEV = get_device("v100-16gb")


def bench_gap_dag(i: int, frac: float):
    """bench_gap.instance_graph(i) for even i, its op times and the limit at `frac`."""
    g = random_dag(i, n_ops=8 + (i // 2) % 13, update_prob=0.4, workspace_prob=0.2, name=f"dag{i}")
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    return g, random_op_times(g, 0), int(lo + frac * (hi - lo))


def verified_time(g, t, limit, ev, schedule, genes) -> float:
    plan = plan_arena(ev.gi, schedule, limit, genes, t, DEV).to_plan(g, "swapadvisor", limit, DEV)
    assert not verify_plan(g, plan, limit)
    return simulate(g, plan, t, DEV).time_s


def test_partly_cooled_placement_keeps_some_outputs_clean():
    # dag110@0.4 on a schedule of the GA's, every pair kept, no evictions: keeping every output's bytes until
    # its copy ends needs 70.8 of 43.4 MB, so main placed plain and op5 / op6 reused bytes still copying out
    # (5.795 ms); cooling the stays that fit, one by one while the simulator finds it faster: 5.374 ms
    g, t, limit = bench_gap_dag(110, 0.4)
    ev = Evaluator(g, t, DEV, limit, 256, pool="arena")
    schedule = np.asarray([0, 1, 3, 5, 13, 4, 2, 6, 8, 12, 7, 9, 10, 11])
    genes = ArenaSpace(ev.gi, limit, op_time=t, device=DEV, partly=True).zero(0.0, 2.0)
    got = verified_time(g, t, limit, ev, schedule, genes)
    assert got == ev.time_of(schedule, genes)          # the scorer and the plan make the same placement
    assert got < 5.45e-3
    plain = ev.space.zero(0.0, 2.0)                    # without the gene: the placement as before
    assert not plain.partly and plain.key() != genes.key()
    assert verified_time(g, t, limit, ev, schedule, plain) > 5.7e-3


def test_partly_cooled_island_is_the_search_again():
    # the island breeds partly genomes only, from its own Generator: the other islands search as without it
    g, t, limit = bench_gap_dag(110, 0.4)
    on = plan_graph(g, limit, device=DEV, op_time=t, planner="swapadvisor", seed=0, generations=2, workers=1)
    off = plan_graph(g, limit, device=DEV, op_time=t, planner="swapadvisor", seed=0, generations=2, workers=1,
                     polish="off")
    names = [isl["name"] for isl in on.search["islands"]]
    assert names[-1] == "partly-cooled" and "partly-cooled" not in [isl["name"] for isl in off.search["islands"]]
    for a, b in zip(on.search["islands"][:-1], off.search["islands"]):
        assert a == b


def test_polish_moves_keep_and_headroom_together():
    # dag132@0.4 on the GA's schedule with every pair kept and no headroom (4.915 ms): keep 0.75 with headroom
    # 0.1 lowers the walk's capacity so the cooled placement fits with p0 kept (4.299 ms; stage optimum 4.216).
    # Either gene moved alone is no faster, so the GA's small steps did not find it
    g, t, limit = bench_gap_dag(132, 0.4)
    ev = Evaluator(g, t, DEV, limit, 256, pool="arena")
    schedule = np.asarray([0, 1, 4, 2, 3, 6, 10, 5, 7, 8, 9, 11])
    genes = ev.space.zero(0.0, 1.0)
    before = ev.time_of(schedule, genes)
    polished, after, n = polish_memory(ev, schedule, genes, before)
    assert after < 0.9 * before
    assert 0 < n <= 60
    assert verified_time(g, t, limit, ev, schedule, polished) == after
    assert np.array_equal(polished.bias, genes.bias)           # only the scalar genes move
    again, t2, _ = polish_memory(ev, schedule, polished, after)
    assert t2 == after                                   # a polished genome is its own grid's best


def test_polish_is_on_by_default_and_never_slower():
    g, t, limit = bench_gap_dag(132, 0.4)
    on = plan_graph(g, limit, device=DEV, op_time=t, planner="swapadvisor", seed=0, generations=2, workers=1)
    off = plan_graph(g, limit, device=DEV, op_time=t, planner="swapadvisor", seed=0, generations=2, workers=1,
                     polish="off")
    assert "polish" in on.search and "polish" not in off.search
    assert on.search["polish"]["from_s"] <= off.predicted["time_s"]     # (the partly-cooled island may be faster)
    assert on.predicted["time_s"] == on.search["polish"]["to_s"] <= off.predicted["time_s"]


def test_polish_leaves_size_class_genomes_alone():
    # the size-class island's best is an encoding.Allocation (bench_gap's dag114@0.1 crashed on it)
    g, t, limit = bench_gap_dag(132, 0.4)
    ev = Evaluator(g, t, DEV, limit, 256, pool="arena")
    schedule = np.asarray(ev.gi.default_schedule())
    alloc = AllocationSpace(ev.gi, limit).minimal_pool()
    assert polish_memory(ev, schedule, alloc, 1.0) == (alloc, 1.0, 0)
    cls = ev.space.class_seeds()[0][1]
    assert polish_memory(ev, schedule, cls, 1.0) == (cls, 1.0, 0)
