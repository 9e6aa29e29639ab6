"""tvm_swap.planner.arena_usage: the bytes an arena plan's live objects hold after each kernel, checked against
the simulator's tenancies (planner.timeline) on real plans, and the bytes no object covers against a byte map."""
import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.plan import Action, Arena, Plan
from tvm_swap.planner.arena_usage import held_after_kernels, never_placed_bytes, unused_summary
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.feasibility import min_feasible_limit
from tvm_swap.planner.simulator import simulate
from tvm_swap.planner.timeline import tenancies
from tvm_swap.testing import random_op_times, random_training_graph

DEV = get_device("v100-16gb")


def _plan(seed: int, frac: float):
    from tvm_swap.planner.api import plan_graph

    g = random_training_graph(seed, n_layers=3 + seed % 3, momentum=seed % 2 == 0)
    lo, hi = min_feasible_limit(g), noswap_peak(g)
    t = random_op_times(g, seed)
    return g, t, plan_graph(g, int(lo + frac * (hi - lo)), device=DEV, op_time=t, planner="swapadvisor-nosearch",
                            pool="arena")


@pytest.mark.parametrize("seed,frac", [(0, 0.2), (1, 0.5), (2, 0.1), (3, 0.7)])
def test_held_bytes_match_the_simulated_tenancies(seed, frac):
    g, t, plan = _plan(seed, frac)
    assert isinstance(plan.pool, Arena)
    held = held_after_kernels(plan)
    kernels = [i for i, a in enumerate(plan.actions) if a.kind in ("compute", "recompute")]
    ten = tenancies(g, plan, simulate(g, plan, t, DEV))
    want = []
    for i in kernels:       # objects with a tenant from an action at or before i to a drop after it
        live = {o for _, o, _, _, b, e in ten if b <= i < e}
        want.append(sum(plan.pool.sizes[o] for o in live))
    assert held.tolist() == want
    s = unused_summary(plan)
    assert s["peak_held_bytes"] == max(want) <= plan.pool.arena_bytes
    assert s["unused_at_fullest_bytes"] == plan.pool.arena_bytes - max(want)


def test_never_placed_bytes_against_a_byte_map():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(0, 8))
        offs = (rng.integers(0, 16, n) * 64).tolist()
        sizes = (rng.integers(1, 6, n) * 64).tolist()
        arena = Arena(2048, offs, sizes, 64, 0, [])
        used = np.zeros(2048, dtype=bool)
        for o, z in zip(offs, sizes):
            used[o:o + z] = True
        assert never_placed_bytes(arena) == int((~used).sum())


def test_a_kernel_run_in_place_keeps_its_input_object_live_until_the_output_drops():
    """op 0 writes tensor 1 into object 0; op 1 runs in place over it (same object); the drop of its output
    frees the object: one object's bytes are held after both kernels, none after the drop."""
    arena = Arena(1024, [0, 512], [512, 256], 256, 0, [])
    acts = [Action("compute", op=0, out_objs=(0,)), Action("compute", op=1, out_objs=(0,)),
            Action("drop", tensor=2, obj=0), Action("swap_in", tensor=3, obj=1), Action("compute", op=2, out_objs=())]
    plan = Plan(graph_name="g", graph_fingerprint="", planner="x", mem_limit=1024, device={}, schedule=[0, 1, 2],
                pool=arena, tensor_class=[], initial_residents=[], actions=acts)
    assert held_after_kernels(plan).tolist() == [512, 512, 256]


def test_a_size_class_plan_is_refused_with_what_to_do():
    g, t, _ = _plan(0, 0.5)
    from tvm_swap.planner.api import plan_graph

    sc = plan_graph(g, noswap_peak(g), device=DEV, op_time=t, planner="swapadvisor-nosearch", pool="size-classes")
    with pytest.raises(ValueError, match="--pool arena"):
        held_after_kernels(sc)
