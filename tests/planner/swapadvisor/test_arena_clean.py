"""Clean-first placement in the arena: a swapped-out stay's bytes stay free of new tenants until its copy to
the host is estimated done, where a clean range fits (placement.place_stays_clean, arena.cooling.clean_first)."""
import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.planner.api import plan_graph, resolve_op_time
from tvm_swap.planner.graphindex import GraphIndex
from tvm_swap.planner.swapadvisor.arena import tuning
from tvm_swap.planner.swapadvisor.arena import ArenaGenes, ArenaScorer
from tvm_swap.planner.swapadvisor.placement import place_stays, place_stays_clean
from tvm_swap.verify import verify_plan
from tvm_swap.zoo import load_zoo

DEV = get_device("v100-16gb")


def _disjoint_when_overlapping(first, last, size, off):
    for a in range(len(first)):
        for b in range(a + 1, len(first)):
            if first[a] <= last[b] and first[b] <= last[a]:
                if off[a] < off[b] + size[b] and off[b] < off[a] + size[a]:
                    return False
    return True


def test_clean_first_placement_never_overlaps_stays_that_overlap_in_time():
    rng = np.random.default_rng(1)
    for _ in range(60):
        m = int(rng.integers(1, 50))
        first = rng.integers(-1, 20, size=m).tolist()
        last = [f + int(rng.integers(0, 8)) for f in first]
        cool = [x + int(rng.integers(0, 6)) * int(rng.random() < 0.5) for x in last]
        size = (rng.integers(1, 9, size=m) * 256).tolist()
        limit = int(rng.integers(1, 40)) * 256
        off, need = place_stays_clean(first, last, cool, size, limit)
        assert _disjoint_when_overlapping(first, last, size, off)
        assert need == max(o + s for o, s in zip(off, size))
        assert all(o % 256 == 0 for o in off)
        # nothing dirty and no clean room counted (limit 0): the fallback is the plain sweep
        assert place_stays_clean(first, last, last, size, 0) == place_stays(first, last, size)


def test_a_new_stay_takes_clean_bytes_before_dirty_ones():
    # A and B leave after slot 0; A's copy to the host runs until slot 10, B had none. C arrives at slot 1.
    first, last, size = [0, 0, 1], [0, 0, 1], [256, 256, 256]
    off, _ = place_stays(first, last, size)
    assert off[2] == off[0] == 0                     # the plain sweep: C in A's bytes, waiting for A's copy
    off, need = place_stays_clean(first, last, [10, 0, 1], size, 512)
    assert off[0] == 0 and off[2] == off[1] == 256 and need == 512


def test_with_no_clean_room_the_dirt_that_clears_first_is_taken():
    # A [0, 256) dirty until 10, X [256, 512) and Y [768, 1024) still live, B [512, 768) dirty until 3; C (slot 1)
    # finds no clean range below the limit and takes B's bytes, whose copy ends first
    first, last, cool, size = [0, 0, 0, 0, 1], [0, 5, 0, 5, 1], [10, 5, 3, 5, 1], [256] * 5
    off, need = place_stays_clean(first, last, cool, size, 1024)
    assert off[:4] == [0, 256, 512, 768] and off[4] == 512 and need == 1024
    off, _ = place_stays(first, last, size)
    assert off[4] == 0                               # the plain sweep: the lowest best fit, A's bytes


@pytest.fixture(scope="module")
def wresnet64():
    g = load_zoo("zoo:wresnet-152-10@batch=64")
    return g, GraphIndex.build(g, 256, keep_updated=False), resolve_op_time(g, DEV, None)


def test_clean_first_is_judged_never_slower_and_wins_where_the_d2h_link_is_busy(wresnet64, monkeypatch):
    # WResNet-152-10@64 at 16 GB: the forward's swap-outs keep the d2h link busy, so the plain placement's
    # next tenants wait on it (0.772 of ideal); clean-first fits at the same decisions
    g, gi, times = wresnet64
    sched, genes = gi.default_schedule(), ArenaGenes(0.0, np.zeros(gi.n_tensors, dtype=np.int64))
    ideal = float(times.sum())
    with_clean = ideal / ArenaScorer(gi, 16 * 10**9, times, DEV).time_of(sched, genes)
    monkeypatch.setattr(tuning, "CLEAN_FIRST", False)
    plain = ideal / ArenaScorer(gi, 16 * 10**9, times, DEV).time_of(sched, genes)
    assert with_clean >= plain
    assert with_clean > 0.9 > plain + 0.1


def test_clean_first_plan_verifies_and_reports_the_judged_time(wresnet64):
    g, gi, times = wresnet64
    p = plan_graph(g, "16GB", DEV, planner="swapadvisor-nosearch", pool="arena")
    assert p.pool.kind == "arena" and verify_plan(g, p, 16 * 10**9) == []
    t = ArenaScorer(gi, 16 * 10**9, times, DEV).time_of(gi.default_schedule(),
                                                        ArenaGenes(0.0, np.zeros(gi.n_tensors, dtype=np.int64)))
    assert p.predicted["time_s"] == pytest.approx(t, rel=1e-9)
    assert p.predicted["throughput_vs_ideal"] > 0.9
