"""The compiled simulate_time (simulator_jit.sim_time) gives the seconds of the Python loop it replaced
(simulator.simulate_time_py, on _run_streams), to the bit: on random action lists (drops waiting on drops,
recomputes, both copy directions sharing the link) and on the GA's own packs of random genomes, so no GA time and
no plan changed."""
import numpy as np
import pytest

from tvm_swap.cost.devices import DeviceSpec, get_device
from tvm_swap.errors import PlanError
from tvm_swap.planner.graphindex import GraphIndex
from tvm_swap.planner.simulator import COMPUTE, DROP, RECOMPUTE, SWAP_IN, SWAP_OUT, pack_arrays, simulate_time, \
    simulate_time_py
from tvm_swap.planner.swapadvisor.arena import ArenaScorer, ArenaSpace, arena_min_limit
from tvm_swap.testing import random_op_times, random_training_graph

DEV = get_device("v100-16gb")


@pytest.mark.parametrize("seed", range(40))
def test_compiled_time_is_the_python_loops(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 80))
    kinds = rng.choice([COMPUTE, SWAP_OUT, SWAP_IN, DROP, RECOMPUTE], size=n, p=[0.35, 0.2, 0.2, 0.2, 0.05])
    work = np.where(np.isin(kinds, [COMPUTE, RECOMPUTE]), rng.choice([0.0, 0.5, 1.0, 3.5], size=n),
                    rng.choice([0.0, 6.0, 12.0, 31.0, 1e-3], size=n))
    work[kinds == DROP] = 0.0
    deps = [sorted(set(rng.integers(0, i, size=int(rng.integers(0, 4))).tolist())) if i else [] for i in range(n)]
    p = pack_arrays(kinds, work, np.cumsum([0] + [len(d) for d in deps]), [d for ds in deps for d in ds])
    d_bw, h_bw, dup = [(12.0, 12.0, 20.0), (5.0, 12.0, 14.0), (10.0, 6.0, 30.0), (7.0, 7.0, 7.0)][seed % 4]
    dev = DeviceSpec("r", 1, 1, 1, h2d_bandwidth=h_bw, d2h_bandwidth=d_bw, duplex_bandwidth=dup)
    assert simulate_time(p, dev) == simulate_time_py(p, dev)


@pytest.mark.parametrize("seed", range(4))
def test_the_ga_times_are_the_python_loops(seed):
    """Random swap and recompute genomes of a training step, from the min limit up, scored as the GA scores them."""
    g = random_training_graph(seed, n_layers=4 + seed, momentum=bool(seed % 2))
    gi = GraphIndex.build(g, 256, keep_updated=False)
    ot = random_op_times(g, seed)
    rng = np.random.default_rng(seed)
    lo = arena_min_limit(gi)
    compared = 0
    for lim in (lo, int(lo * 1.3), int(lo * 2)):
        scorer = ArenaScorer(gi, lim, ot, DEV)
        space = ArenaSpace(gi, lim, True, ot, DEV)
        for _ in range(6):
            try:
                p = scorer.packed(gi.default_schedule(), space.random(rng))
            except PlanError:
                continue
            assert simulate_time(p, DEV) == simulate_time_py(p, DEV)
            compared += 1
    assert compared >= 6

