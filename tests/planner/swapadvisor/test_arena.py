"""The arena memory model: placement, plans, the verifier's address checks, feasibility and the pool."""
import copy

import numpy as np
import pytest

from tvm_swap.cost.devices import get_device
from tvm_swap.errors import InfeasibleLimitError, PlanError, TvmSwapError
from tvm_swap.plan import Arena, Plan, Pool
from tvm_swap.planner.api import feasible_floor, plan_graph
from tvm_swap.planner.swapadvisor.arena import ArenaGenes, arena_min_limit, plan_arena, working_set_floor
from tvm_swap.planner.swapadvisor.arena.actions import SegmentPaint
from tvm_swap.planner.swapadvisor.placement import place_by_size, place_stays, place_stays_zoned
from tvm_swap.planner.bounds import noswap_peak
from tvm_swap.planner.graphindex import GraphIndex
from tvm_swap.testing import random_dag, random_training_graph
from tvm_swap.verify import verify_plan

DEV = get_device("v100-16gb")


def _graph(seed):
    return random_training_graph(seed) if seed % 2 else random_dag(seed)


def _disjoint_when_overlapping(first, last, size, off):
    for a in range(len(first)):
        for b in range(a + 1, len(first)):
            if first[a] <= last[b] and first[b] <= last[a]:
                if off[a] < off[b] + size[b] and off[b] < off[a] + size[a]:
                    return False
    return True


@pytest.mark.parametrize("place", [place_stays, place_by_size])
def test_placement_never_overlaps_stays_that_overlap_in_time(place):
    rng = np.random.default_rng(0)
    for _ in range(30):
        m = int(rng.integers(1, 40))
        first = rng.integers(-1, 20, size=m).tolist()
        last = [f + int(rng.integers(0, 8)) for f in first]
        size = (rng.integers(1, 9, size=m) * 256).tolist()
        off, need = place(first, last, size)
        assert _disjoint_when_overlapping(first, last, size, off)
        assert need == max(o + s for o, s in zip(off, size))
        # never below the most bytes alive at one slot
        load = max(sum(s for f, l_, s in zip(first, last, size) if f <= t <= l_) for t in range(-1, 30))
        assert need >= load


def test_segment_paint_keeps_the_last_value_per_byte():
    p = SegmentPaint([0, 10, 40, 50, 60, 100, 140, 150, 300], -1)
    p.paint(0, 100, 1)
    p.paint(50, 150, 2)
    assert p.values(0, 10) == [1] and p.values(40, 60) == [1, 2] and p.values(140, 300) == [2, -1]


@pytest.mark.parametrize("seed", range(16))
def test_arena_plans_verify_from_the_min_limit_up(seed):
    g = _graph(seed)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    lo = arena_min_limit(gi)
    assert lo >= working_set_floor(gi) + gi.workspace
    top = max(lo, noswap_peak(g))
    for lim in (lo, (lo + top) // 2, int(1.3 * top)):
        p = plan_arena(gi, gi.default_schedule(), lim).to_plan(g, "t", lim, DEV)
        assert p.pool.kind == "arena" and p.pool.total_bytes() <= lim
        assert verify_plan(g, p, lim) == []


@pytest.mark.parametrize("seed", range(12))
def test_arena_needs_no_more_than_size_classes(seed):
    g = _graph(seed)
    arena, _ = feasible_floor(g, "arena")
    classes, _ = feasible_floor(g, "size-classes")
    assert arena <= classes


def test_no_swaps_when_everything_fits():
    g = random_training_graph(3)
    lim = 2 * noswap_peak(g)
    p = plan_graph(g, lim, DEV, planner="swapadvisor-nosearch", pool="arena")
    kinds = {g.tensors[a.tensor].kind for a in p.actions if a.kind == "swap_out"}
    assert kinds <= {"output", "param", "optimizer_state"}      # only what must reach the host
    assert p.predicted["peak_bytes"] <= lim


def test_search_in_arena_mode_is_reproducible_and_no_worse_than_nosearch():
    g = random_training_graph(5)
    lim = (feasible_floor(g, "arena")[0] + noswap_peak(g)) // 2
    a = plan_graph(g, lim, DEV, planner="swapadvisor", generations=3, seed=1, workers=1)
    b = plan_graph(g, lim, DEV, planner="swapadvisor", generations=3, seed=1, workers=1)
    n = plan_graph(g, lim, DEV, planner="swapadvisor-nosearch")
    strip = lambda p: {k: v for k, v in p.to_dict().items() if k != "search"}   # noqa: E731 (timings)
    assert a.pool.kind == "arena" and strip(a) == strip(b)
    assert a.predicted["time_s"] <= n.predicted["time_s"] * (1 + 1e-9)


def test_limit_below_the_arena_floor_is_refused_before_planning():
    g = random_training_graph(7)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    floor, _ = feasible_floor(g, "arena")
    lowest = working_set_floor(gi) + gi.workspace
    with pytest.raises(InfeasibleLimitError) as e:          # below any op's own bytes: never plannable
        plan_graph(g, lowest - 1, DEV, planner="swapadvisor")
    assert e.value.min_feasible == floor and "arena" in str(e.value)
    assert plan_graph(g, floor, DEV, planner="swapadvisor-nosearch").verified   # the reported min plans
    try:            # between the two, placement decides: a refusal names the same min, a plan is verified
        assert plan_graph(g, (lowest + floor) // 2, DEV, planner="swapadvisor-nosearch").verified
    except InfeasibleLimitError as e2:
        assert e2.min_feasible == floor


def test_baselines_refuse_the_arena_explicitly():
    with pytest.raises(TvmSwapError, match="size-class pool only"):
        plan_graph(random_dag(1), "80%", DEV, planner="odswap", pool="arena")


def test_plan_json_round_trip_and_version_1_still_loads():
    g = random_training_graph(9)
    p = plan_graph(g, "100%", DEV, planner="swapadvisor-nosearch", pool="arena")
    q = Plan.from_json(p.to_json())
    assert isinstance(q.pool, Arena) and q.pool.offsets == p.pool.offsets and q.to_json() == p.to_json()
    old = plan_graph(g, "100%", DEV, planner="swapadvisor-nosearch", pool="size-classes").to_dict()
    old["version"] = 1
    del old["pool"]["kind"]
    assert isinstance(Plan.from_dict(old).pool, Pool)


# ---------------------------------------------------------------- the verifier's arena invariants
@pytest.fixture(scope="module")
def arena_plan():
    g = random_training_graph(11)
    lim = (feasible_floor(g, "arena")[0] + noswap_peak(g)) // 2
    p = plan_graph(g, lim, DEV, planner="swapadvisor-nosearch")
    assert p.verified and p.pool.kind == "arena"
    return g, p


def _touching_objects(p):
    """Two objects whose ranges differ, used by stays of different tensors."""
    return [o for o in range(p.pool.num_objects)]


def test_verifier_catches_overlapping_stays(arena_plan):
    g, p = arena_plan
    q = copy.deepcopy(p)
    # move every object to offset 0: stays that overlap in time now share bytes
    q.pool.offsets = [0] * q.pool.num_objects
    v = verify_plan(g, q)
    assert any("overlap live tensor" in x or "without waiting" in x for x in v), v[:3]


def test_verifier_catches_a_stay_past_the_arena_end(arena_plan):
    g, p = arena_plan
    q = copy.deepcopy(p)
    k = int(np.argmax(q.pool.sizes))
    q.pool.offsets[k] = q.pool.arena_bytes - q.pool.sizes[k] + q.pool.alignment
    assert any("past the arena" in x for x in verify_plan(g, q))


def test_verifier_catches_a_misaligned_offset(arena_plan):
    g, p = arena_plan
    q = copy.deepcopy(p)
    q.pool.offsets[0] += 32
    assert any("not aligned" in x for x in verify_plan(g, q))


def test_verifier_catches_a_moved_resident():
    g = random_dag(12)                   # inference: frozen params, which a roomy arena keeps
    gi = GraphIndex.build(g, 256, keep_updated=False)
    lim = 2 * noswap_peak(g)
    p = plan_arena(gi, gi.default_schedule(), lim).to_plan(g, "t", lim, DEV)
    assert p.initial_residents, "a roomy arena keeps frozen params on the device"
    assert verify_plan(g, p) == []
    q = copy.deepcopy(p)
    t, o = q.initial_residents[0]
    q.pool.offsets.append(q.pool.arena_bytes - q.pool.sizes[o])   # a second home for it
    q.pool.sizes.append(q.pool.sizes[o])
    last_compute = max(i for i, a in enumerate(q.actions) if a.kind == "compute")
    Action = type(q.actions[0])
    q.actions.append(Action("drop", tensor=t, obj=o, deps=(last_compute,)))
    q.actions.append(Action("swap_in", tensor=t, obj=len(q.pool.offsets) - 1, deps=(len(q.actions) - 1,)))
    v = verify_plan(g, q)
    assert any("must end where it started" in x for x in v), v[:3]


def test_verifier_catches_an_arrival_that_does_not_wait_for_the_bytes_it_takes(arena_plan):
    g, p = arena_plan
    found = False
    for i, a in enumerate(p.actions):
        drops = [d for d in a.deps if p.actions[d].kind == "drop"]
        if a.kind == "swap_in" and drops:
            q = copy.deepcopy(p)
            q.actions[i] = type(a)(a.kind, a.op, a.tensor, a.obj, tuple(d for d in a.deps if d not in drops))
            v = verify_plan(g, q)
            if v:
                assert any("without waiting" in x or "overlap" in x or "still holds" in x for x in v)
                found = True
                break
    assert found


# ---------------------------------------------------------------- the runtime pool
def test_device_pool_refuses_overlapping_tenants():
    from runtime_ext.backend import arena_objects
    from runtime_ext.pool import DevicePool, PoolError

    import tvm

    arena = Arena(4096, [0, 1024, 2048, 0], [2048, 1024, 2048, 1024], 256, 0)

    def alloc_all(sizes, offsets, region):
        return arena_objects(tvm.runtime.empty((region,), "uint8", tvm.cpu()), sizes, offsets)

    pool = DevicePool(arena, None, 4096, alloc_all=alloc_all)
    assert pool.storage(1).data_ptr() - pool.storage(0).data_ptr() == 1024      # objects alias the arena
    pool.occupy(0, 5)
    with pytest.raises(PoolError, match="overlapping"):
        pool.occupy(1, 6)
    pool.occupy(2, 7)
    pool.release(0, 5)
    pool.occupy(1, 6)
    pool.occupy(3, 8)
    with pytest.raises(PoolError):
        pool.rename([1, 0, 2, 3])


# ---------------------------------------------------------------- kept updates: ping-pong pairs
def test_roomy_training_arena_keeps_updated_params_with_no_param_traffic():
    g = random_training_graph(21, n_layers=4, momentum=True)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    lim = 3 * noswap_peak(g)
    p = plan_arena(gi, gi.default_schedule(), lim, ArenaGenes(0.0, np.zeros(gi.n_tensors, np.int64), 1.0))
    plan = p.to_plan(g, "t", lim, DEV)
    assert verify_plan(g, plan) == []
    assert {t for t, _ in plan.initial_residents} >= set(g.updates.values())   # every update stays, ping-pong
    moved = {g.tensors[a.tensor].kind for a in plan.actions if a.kind in ("swap_in", "swap_out")}
    assert moved <= {"input", "output"}
    backing = plan.next_object_map(g.updates, g.op_outputs())
    assert sorted(backing) == list(range(plan.pool.num_objects)) and backing != list(range(plan.pool.num_objects))
    # the search takes the kept seed when memory allows it
    best = plan_graph(g, lim, DEV, planner="swapadvisor", generations=0, workers=1, pool="arena")
    assert best.pool.swaps and best.predicted["time_s"] <= plan_graph(
        g, lim, DEV, planner="swapadvisor-nosearch", pool="arena").predicted["time_s"]


def test_verifier_catches_a_renaming_that_does_not_map_the_layout_onto_itself():
    g = random_training_graph(21, n_layers=4, momentum=True)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    lim = 3 * noswap_peak(g)
    plan = plan_arena(gi, gi.default_schedule(), lim, ArenaGenes(0.0, np.zeros(gi.n_tensors, np.int64), 1.0)) \
        .to_plan(g, "t", lim, DEV)
    q = copy.deepcopy(plan)
    a = q.pool.swaps[0][0]
    other = next(k for k in range(q.pool.num_objects) if all(k not in c for c in q.pool.swaps))
    q.pool.offsets[other] = q.pool.offsets[a]                    # another object now shares a renamed one's bytes
    q.pool.sizes[other] = q.pool.sizes[a]                        # (but not those of the object backing it)
    assert any("does not map the layout onto itself" in x for x in verify_plan(g, q))


def _random_zoned(rng, n=14, m=40):
    zones, fixed, base = [], [], 0
    for _ in range(int(rng.integers(1, 4))):
        z = int(rng.integers(2, 9)) * 256
        lr, prod = int(rng.integers(0, n)), int(rng.integers(0, n))
        zones += [(base, base + z, lr, 1 << 62), (base + z, base + 2 * z, -2, prod)]
        fixed += [(-1, lr, base, z), (prod, n, base + z, z)]      # the pair's own stays
        base += 2 * z
    first = rng.integers(-1, n, size=m)
    last = np.minimum(first + rng.integers(0, 6, size=m), n)
    size = rng.integers(1, 9, size=m) * 256
    return zones, fixed, base, first.tolist(), last.tolist(), size.tolist()


def _check_zoned(zones, fixed, base, first, last, size, offs, need):
    stays = list(zip(first, last, offs, size)) + fixed
    for i, (f, l_, o, z) in enumerate(stays):
        assert o + z <= need
        for f2, l2, o2, z2 in stays[i + 1:]:
            if f <= l2 and f2 <= l_:
                assert o + z <= o2 or o2 + z2 <= o, "stays alive at once share bytes"
    for f, l_, o, z in zip(first, last, offs, size):
        if o < base:
            zone = next(zz for zz in zones if zz[0] <= o < zz[1])
            assert o + z <= zone[1], "a stay straddles a zone's end"
            assert zone[2] < f and l_ < zone[3], "a stay sits in a zone while its tenant is there"
        else:
            assert o >= base


@pytest.mark.parametrize("seed", range(20))
def test_zoned_placements_use_a_pairs_zones_only_while_their_tenants_are_away(seed):
    rng = np.random.default_rng(seed)
    zones, fixed, base, first, last, size = _random_zoned(rng)
    offs, need = place_stays_zoned(first, last, size, zones, base)
    _check_zoned(zones, fixed, base, first, last, size, offs, need)
    offs, need = place_by_size(first, last, size, fixed, [z[0] for z in zones] + [base])
    _check_zoned(zones, fixed, base, first, last, size, offs, max(need, base))


def test_a_kept_pair_costs_its_bytes_only_while_held():
    """Training graph 163 of bench_gap at 80% of the way to no swapping: two 8 MB params with momentum and
    a 42 MB largest op in a 47.7 MB arena. Kept pairs reserving twice their bytes for the whole iteration
    could keep neither 8 MB pair; held only while alive, all four updated tensors stay on the device, the
    plan verifies, renames its zones between iterations, and is much faster than reading them back."""
    from tvm_swap.planner.feasibility import min_feasible_limit
    from tvm_swap.planner.simulator import simulate
    from tvm_swap.testing import random_op_times

    g = random_training_graph(163, n_layers=2 + (163 // 2) % 3, momentum=(163 // 2) % 2 == 1)
    t = random_op_times(g, 0)
    lo = min_feasible_limit(g)
    lim = int(lo + 0.8 * (noswap_peak(g) - lo))
    gi = GraphIndex.build(g, 256, keep_updated=False)
    times = {}
    for keep in (0.0, 1.0):
        plan = plan_arena(gi, gi.default_schedule(), lim, ArenaGenes(0.0, np.zeros(gi.n_tensors, np.int64), keep),
                          t, DEV).to_plan(g, "t", lim, DEV)
        assert verify_plan(g, plan, lim) == []
        times[keep] = simulate(g, plan, t, DEV).time_s
    assert {t_ for t_, _ in plan.initial_residents} >= set(g.updates.values())
    backing = plan.next_object_map(g.updates, g.op_outputs())
    assert sorted(backing) == list(range(plan.pool.num_objects)) and backing != list(range(plan.pool.num_objects))
    assert times[1.0] < 0.75 * times[0.0]


def test_a_kept_pair_may_leave_mid_iteration_and_its_host_copy_stays_current():
    """Training graph 9 of bench_gap at 10% of the way to no swapping: no 8 MB param fits beside every op,
    so keep <= 1 keeps none of them; keep = 2 keeps W1 on the device between iterations, evicts it when the
    forward pass needs the room, reads it back from the host (so W1's update is copied out: that host copy
    is next iteration's W1), and the plan is faster than reading every param from the host."""
    from tvm_swap.planner.feasibility import min_feasible_limit
    from tvm_swap.planner.simulator import simulate
    from tvm_swap.testing import random_op_times

    g = random_training_graph(9, n_layers=2 + (9 // 2) % 3, momentum=(9 // 2) % 2 == 1)
    t = random_op_times(g, 0)
    lo = min_feasible_limit(g)
    lim = int(lo + 0.1 * (noswap_peak(g) - lo))
    gi = GraphIndex.build(g, 256, keep_updated=False)
    times, plans = {}, {}
    for keep in (0.0, 2.0):
        plan = plan_arena(gi, gi.default_schedule(), lim, ArenaGenes(0.0, np.zeros(gi.n_tensors, np.int64), keep),
                          t, DEV).to_plan(g, "t", lim, DEV)
        assert verify_plan(g, plan, lim) == []
        times[keep], plans[keep] = simulate(g, plan, t, DEV).time_s, plan
    plan = plans[2.0]
    kept = {x for x, _ in plan.initial_residents}
    ins = {a.tensor for a in plan.actions if a.kind == "swap_in"}
    outs = {a.tensor for a in plan.actions if a.kind == "swap_out"}
    left = [(new, old) for new, old in g.updates.items() if old in kept and old in ins]
    assert left, "a kept param leaves mid-iteration and comes back from the host"
    assert all(new in outs for new, _ in left)
    assert times[2.0] < times[0.0]


@pytest.mark.parametrize("limit", ["150%", "100%", "60%"])
def test_three_training_steps_with_kept_updates_match_the_unlimited_build(limit):
    """mlp-train in the arena, three chained steps bitwise equal to the unlimited build. At 150% and 100% every
    update stays on the device by rotation (equal slots renamed by cycles longer than a ping-pong pair, other
    tensors placed in the slots while they are free and renamed with them), so no param crosses the link;
    at 60% some params are read from the host and the renaming is pairs."""
    import tvm_swap
    from tvm_swap.examples import EXAMPLES
    from relay_passes.lower import lower_unlimited_build
    import tvm
    from tvm import relax

    ex = EXAMPLES["mlp-train"]()
    m = tvm_swap.build(ex.mod, target="llvm", mem_limit=limit, params=ex.params, generations=0, workers=1,
                       pool="arena")   # an explicit pool: the default takes the no-swap plan at >= 100%
    assert m.plan.pool.kind == "arena" and m.plan.pool.swaps, "the plan keeps updates on the device"
    vm = relax.VirtualMachine(lower_unlimited_build(ex.mod, "llvm"), tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in ex.args()]
    n_in = len(ex.inputs)
    for step in range(3):
        got = m(*ex.inputs.values())
        ref = [r.numpy() for r in vm["main"](*args)]
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got, ref)), f"step {step} differs"
        args = args[:n_in] + [tvm.runtime.tensor(r) for r in ref[1:]]
    g = m.compiled.graph
    kept = len(set(g.updates.values()) & {t for t, _ in m.plan.initial_residents})
    assert kept > 0
    if limit != "60%":
        assert m.stats()["swap_in_count"] <= n_in      # only the inputs are read from the host
        assert kept == len(g.updates) and max(map(len, m.plan.pool.swaps)) > 2, "every update kept, by rotation"
        moved = {g.tensors[a.tensor].kind for a in m.plan.actions if a.kind in ("swap_in", "swap_out")}
        assert moved <= {"input", "output"}
        # other tensors sat in the slots (objects renamed with them) and the steps still match
        renamed = {x for c in m.plan.pool.swaps for x in c}
        keptish = set(g.updates) | set(g.updates.values())
        other = {o for a in m.plan.actions if a.kind in ("compute", "recompute")
                 for t, o in zip(g.ops[a.op].outputs, a.out_objs) if t not in keptish}
        assert other & renamed


# ---------------------------------------------------------------- the scorer's packed fast path
@pytest.mark.parametrize("seed", range(10))
def test_scorer_packs_exactly_the_actions_plan_arena_builds(seed):
    """The GA's fitness (ArenaScorer, no Action objects) is the final plan's time: the same kinds, work and
    deps as packing plan_arena's actions, for random genomes (biases, headroom, kept pairs, split) and
    schedules, from the min limit up, with and without op times."""
    from tvm_swap.planner.simulator import pack_actions, simulate_time
    from tvm_swap.planner.swapadvisor.arena import ArenaScorer, ArenaSpace
    from tvm_swap.testing import random_op_times, random_topological_order

    g = random_training_graph(seed, n_layers=3 + seed % 4, momentum=bool(seed % 3)) if seed % 2 else \
        random_dag(seed, n_ops=30 + 5 * seed)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    ot = random_op_times(g, seed)
    lo = arena_min_limit(gi)
    top = max(lo, noswap_peak(g))
    rng = np.random.default_rng(seed)
    compared = 0
    for lim in (lo, (2 * lo + top) // 3, (lo + 2 * top) // 3, int(1.2 * top)):
        space = ArenaSpace(gi, lim)
        scorer = ArenaScorer(gi, lim, ot, DEV)
        for k in range(4):
            sched = np.asarray(random_topological_order(g, seed * 10 + k) if k else gi.default_schedule())
            genes = space.random(rng) if k else space.zero()
            if k == 3:
                genes.split = 0.4
            timed = k % 2 == 0
            try:
                built = plan_arena(gi, sched, lim, genes, ot if timed else None, DEV if timed else None)
            except PlanError:
                continue
            a = pack_actions(g, built.actions, ot)
            if timed:
                b = scorer.packed(sched, genes)
            else:
                plain = ArenaScorer(gi, lim, ot, None)
                b = plain.packed(sched, genes)
            assert np.array_equal(a.kind, b.kind) and np.array_equal(a.work, b.work)
            assert np.array_equal(a.dep_indptr, b.dep_indptr) and np.array_equal(a.dep_indices, b.dep_indices)
            if timed:
                assert scorer.time_of(sched, genes) == simulate_time(a, DEV)
            compared += 1
    assert compared >= 8


@pytest.mark.parametrize("seed", range(6))
def test_class_genomes_give_the_size_class_plan_laid_out_in_the_arena(seed):
    """A size-class seed in the arena search: its arena plan verifies (as an arena), has the size-class
    plan's actions, and the scorer's time is that plan's simulated time."""
    from tvm_swap.planner.simulator import pack_actions, simulate_time
    from tvm_swap.planner.swapadvisor.arena import ArenaScorer, ArenaSpace
    from tvm_swap.planner.swapadvisor.encoding import AllocationSpace
    from tvm_swap.planner.swapadvisor.swapplan import plan_swaps
    from tvm_swap.testing import random_op_times

    g = _graph(seed)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    ot = random_op_times(g, seed)
    lim = (feasible_floor(g, "size-classes")[0] + noswap_peak(g)) // 2
    space = ArenaSpace(gi, lim)
    scorer = ArenaScorer(gi, lim, ot, DEV)
    seeds = space.class_seeds()
    assert [n for n, _ in seeds] == ["classes-geometric2", "classes-minimal"]
    for _, genes in seeds:
        built = plan_arena(gi, gi.default_schedule(), lim, genes, ot, DEV)
        plan = built.to_plan(g, "t", lim, DEV)
        assert plan.pool.kind == "arena" and verify_plan(g, plan, lim) == []
        sc = plan_swaps(gi, AllocationSpace(gi, lim), gi.default_schedule(), genes.classes)
        assert built.actions == sc.actions
        a = pack_actions(g, built.actions, ot)
        assert scorer.time_of(gi.default_schedule(), genes) == simulate_time(a, DEV)
        assert genes.key() != space.zero().key() and not genes.is_plain()


def test_class_genomes_mutate_their_pool_and_stay_plannable():
    from tvm_swap.planner.swapadvisor.arena import ArenaSpace

    g = random_training_graph(3, n_layers=6)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    lim = (feasible_floor(g, "size-classes")[0] + noswap_peak(g)) // 2
    space = ArenaSpace(gi, lim)
    rng = np.random.default_rng(0)
    _, parent = space.class_seeds()[0]
    kids = [space.mutate(parent, rng) for _ in range(20)]
    assert all(k.classes is not None for k in kids)
    assert any(k.classes.key() != parent.classes.key() for k in kids)     # the pool is searched too
    for k in kids[:5]:
        plan = plan_arena(gi, gi.default_schedule(), lim, k).to_plan(g, "t", lim, DEV)
        assert verify_plan(g, plan, lim) == []


def test_scorer_packs_recompute_genomes_exactly_as_plan_arena_builds_them():
    """Recompute genomes go through the packed fast path too: for random genomes with recompute genes
    (every candidate, random), the packed arrays are those of plan_arena's actions (recomputes included),
    on random training graphs from the min limit up; dozens of the compared plans do recompute, so the
    rebuilds' deps are really checked (small graphs rarely recompute, so the count is over all seeds)."""
    from tvm_swap.planner.simulator import RECOMPUTE, pack_actions, simulate_time
    from tvm_swap.planner.swapadvisor.arena import ArenaScorer, ArenaSpace
    from tvm_swap.testing import random_op_times, random_topological_order

    rebuilt = 0
    for seed in range(10):
        g = random_training_graph(seed, n_layers=5 + seed % 4, momentum=bool(seed % 3))
        gi = GraphIndex.build(g, 256, keep_updated=False)
        ot = random_op_times(g, seed)
        lo = arena_min_limit(gi)
        top = max(lo, noswap_peak(g))
        rng = np.random.default_rng(100 + seed)
        compared = 0
        for lim in (lo, (3 * lo + top) // 4, (lo + top) // 2, (lo + 3 * top) // 4):
            space = ArenaSpace(gi, lim, recompute=True, op_time=ot, device=DEV)
            scorer = ArenaScorer(gi, lim, ot, DEV)
            for k in range(6):          # (random genomes may not fit the min limit: 6 tries for 12 compared)
                sched = np.asarray(random_topological_order(g, seed * 10 + k) if k % 2 else gi.default_schedule())
                genes = space.random(rng) if k >= 2 else space.zero()
                if k < 2:
                    genes.recompute = space.rc_able.copy()
                if k == 4:
                    genes.split = 0.4
                try:
                    built = plan_arena(gi, sched, lim, genes, ot, DEV)
                except PlanError:
                    with pytest.raises(PlanError):
                        scorer.packed(sched, genes)
                    continue
                a = pack_actions(g, built.actions, ot)
                b = scorer.packed(sched, genes)
                assert np.array_equal(a.kind, b.kind) and np.array_equal(a.work, b.work)
                assert np.array_equal(a.dep_indptr, b.dep_indptr) and np.array_equal(a.dep_indices, b.dep_indices)
                assert scorer.time_of(sched, genes) == simulate_time(a, DEV)
                compared += 1
                rebuilt += int((a.kind == RECOMPUTE).any())
        assert compared >= 12, seed
    assert rebuilt >= 40


def _embedding_training_graph():
    """Llama's embedding in small: 'embed' is read once, by the lookup at the start; its optimizer step reads a
    master copy instead (so 'embed' is dead after the lookup), and writes both updates."""
    from tvm_swap.testing import _GraphMaker

    MB = 1 << 20
    m = _GraphMaker("embedding")
    ids, label = m.tensor("ids", 4096, "input"), m.tensor("label", 4096, "input")
    E = m.tensor("embed", 2 * MB, "param")
    h = [m.tensor("h0", 2 * MB, "activation")]
    m.op("lookup", "take", [E, ids], [h[0]], 1e6)
    W = []
    for i, (w, a) in enumerate([(4, 8), (2, 2), (1, 8), (8, 4)], 1):
        W.append(m.tensor(f"W{i}", w * MB, "param"))
        h.append(m.tensor(f"h{i}", a * MB, "activation"))
        m.op(f"fwd{i}", "dense", [h[-2], W[-1]], [h[-1]], 1e8)
    loss = m.tensor("loss", 4, "output")
    m.op("loss", "loss", [h[-1], label], [loss], 1e6)
    g = m.tensor("dh4", m.tensors[h[-1]].nbytes, "gradient")
    m.op("loss_grad", "loss_grad", [h[-1], label], [g], 1e6)
    outputs, updates = [loss], {}
    for i in range(len(W), 0, -1):
        dW = m.tensor(f"dW{i}", m.tensors[W[i - 1]].nbytes, "gradient")
        dprev = m.tensor(f"dh{i - 1}", m.tensors[h[i - 1]].nbytes, "gradient")
        m.op(f"bwd{i}", "dense_grad", [g, h[i - 1], W[i - 1]], [dW, dprev], 2e8)
        new = m.tensor(f"W{i}_new", m.tensors[W[i - 1]].nbytes, "output")
        m.op(f"sgd{i}", "sgd", [W[i - 1], dW], [new], 1e6)
        updates[new] = W[i - 1]
        outputs.append(new)
        g = dprev
    dE = m.tensor("dembed", 2 * MB, "gradient")
    m.op("lookup_grad", "take_grad", [g, ids], [dE], 1e6)
    master = m.tensor("embed.master", 2 * MB, "param")
    new_master, new_E = m.tensor("embed.master_new", 2 * MB, "output"), m.tensor("embed_new", 2 * MB, "output")
    m.op("adam_embed", "sgd", [master, dE], [new_master, new_E], 1e6)
    updates.update({new_master: master, new_E: E})
    return m.graph(outputs + [new_master, new_E], updates, {})


def test_a_rebuild_reading_a_kept_param_after_its_last_read_copies_its_update_out():
    """Issue 11 (llama-7b@141GB): a kept pair's old value that is dead (the embedding lookup was its only
    reader) is read again from the host when the lookup's output is recomputed in the backward pass; the host
    copy is current only if the update is copied out, so the walk counts the pair as having left."""
    from tvm_swap.planner.swapadvisor.arena import recompute_candidates

    g = _embedding_training_graph()
    gi = GraphIndex.build(g, 256, keep_updated=False)
    E = next(t.id for t in g.tensors if t.name == "embed")
    new_E = next(t.id for t in g.tensors if t.name == "embed_new")
    lookup = next(o.id for o in g.ops if o.name == "lookup")
    lo, hi = arena_min_limit(gi), noswap_peak(g)
    seen = 0
    for keep in (1.0, 2.0):
        genes = ArenaGenes(0.0, np.zeros(gi.n_tensors, np.int64), keep, -1.0, recompute_candidates(gi))
        for lim in np.linspace(lo, hi, 12).astype(np.int64).tolist():
            plan = plan_arena(gi, gi.default_schedule(), lim, genes).to_plan(g, "t", lim, DEV)
            assert verify_plan(g, plan, lim) == [], (keep, lim)
            if E in {t for t, _ in plan.initial_residents} and any(
                    a.kind == "recompute" and a.op == lookup for a in plan.actions):
                seen += 1
                assert new_E in {a.tensor for a in plan.actions if a.kind == "swap_out"}
    assert seen, "some limit keeps 'embed' on the device and recomputes the lookup"


@pytest.mark.parametrize("seed", range(8))
def test_plan_actions_are_those_arena_action_builder_builds(seed):
    """plan_arena makes its actions with the packed deps (arena.actions.plan_actions); ArenaActionBuilder
    (arena.actions.emit_actions)
    is the reference: the same actions, field by field, for random swap and recompute genomes and schedules
    from the min limit up (kept pairs, splits and rebuilds included)."""
    from tvm_swap.planner.swapadvisor.arena import ArenaSpace
    from tvm_swap.planner.swapadvisor.arena.actions import emit_actions, plan_actions
    from tvm_swap.planner.swapadvisor.arena.decide import decide_arena
    from tvm_swap.testing import random_op_times, random_topological_order

    g = random_training_graph(seed, n_layers=4 + seed % 4, momentum=bool(seed % 3)) if seed % 4 else \
        random_dag(seed, n_ops=30 + 5 * seed)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    ot = random_op_times(g, seed)
    lo = arena_min_limit(gi)
    top = max(lo, noswap_peak(g))
    rng = np.random.default_rng(seed)
    compared = 0
    for lim in (lo, (2 * lo + top) // 3, (lo + 2 * top) // 3):
        space = ArenaSpace(gi, lim, recompute=True, op_time=ot, device=DEV)
        for k in range(5):
            sched = np.asarray(random_topological_order(g, seed * 10 + k) if k % 2 else gi.default_schedule())
            genes = space.random(rng) if k else space.zero(keep=1.0)
            if k == 4:
                genes.split = 0.4
            try:
                walk, d, offsets, sizes, _, _ = decide_arena(gi, sched, lim, genes, ot, DEV)
            except PlanError:
                continue
            obj_of: dict = {}
            stay_obj = [obj_of.setdefault(key, len(obj_of)) for key in zip(offsets, sizes)]
            objs = sorted(obj_of, key=obj_of.get)
            arena = Arena(1 << 62, [o for o, _ in objs], [s for _, s in objs], 256, gi.workspace, [])
            assert plan_actions(walk, d, stay_obj, offsets, sizes) == emit_actions(walk, d, arena, stay_obj).actions
            compared += 1
    assert compared >= 8


def _chained_updates_graph(k: int = 6):
    """k equal 4 MB params W1..Wk, each read in the forward and the backward pass; the optimizer steps run
    after the backward pass, each reading its param (so it is alive while its update is written) and its
    gradient: the updates chain (the step of W(i+1) can write into the bytes W(i) left)."""
    from tvm_swap.testing import _GraphMaker

    MB = 1 << 20
    m = _GraphMaker("chained")
    x, label = m.tensor("x", MB, "input"), m.tensor("label", 4096, "input")
    W = [m.tensor(f"W{i}", 4 * MB, "param") for i in range(1, k + 1)]
    h = [x]
    for i, w in enumerate(W, 1):
        h.append(m.tensor(f"h{i}", MB, "activation"))
        m.op(f"fwd{i}", "dense", [h[-2], w], [h[-1]], 1e8)
    loss = m.tensor("loss", 4, "output")
    m.op("loss", "loss", [h[-1], label], [loss], 1e6)
    g = m.tensor("dh", MB, "gradient")
    m.op("loss_grad", "loss_grad", [h[-1], label], [g], 1e6)
    grads = {}
    for i in range(k, 0, -1):
        dW, dprev = m.tensor(f"dW{i}", 4 * MB, "gradient"), m.tensor(f"dh{i - 1}", MB, "gradient")
        m.op(f"bwd{i}", "dense_grad", [g, h[i - 1], W[i - 1]], [dW, dprev], 2e8)
        grads[i], g = dW, dprev
    outputs, updates = [loss], {}
    for i in range(1, k + 1):
        new = m.tensor(f"W{i}_new", 4 * MB, "output")
        m.op(f"sgd{i}", "sgd", [W[i - 1], grads[i]], [new], 1e6)
        updates[new] = W[i - 1]
        outputs.append(new)
    return m.graph(outputs, updates, {})


@pytest.mark.parametrize("rotate", [True, False])
def test_kept_updates_of_one_size_rotate_through_one_spare_slot(rotate, monkeypatch):
    """Six equal params kept with updates that chain: by rotation they hold 7 slots of 4 MB, renamed by one
    7-cycle (each slot played next iteration by the slot its param's update was written into); as ping-pong
    pairs (ROTATE_KEPT off, the old behaviour) they held 12 zones. Both verify; the rotation's arena holds
    the kept params in 5 zones' worth less."""
    from tvm_swap.planner.swapadvisor.arena import tuning

    monkeypatch.setattr(tuning, "ROTATE_KEPT", rotate)
    g = _chained_updates_graph(6)
    gi = GraphIndex.build(g, 256, keep_updated=False)
    lim = 3 * noswap_peak(g)
    plan = plan_arena(gi, gi.default_schedule(), lim, ArenaGenes(0.0, np.zeros(gi.n_tensors, np.int64), 1.0)) \
        .to_plan(g, "t", lim, DEV)
    assert verify_plan(g, plan, lim) == []
    assert {t for t, _ in plan.initial_residents} >= set(g.updates.values())
    kept_objs = {o for t, o in plan.initial_residents} | {
        o for a in plan.actions if a.kind == "compute" for t, o in zip(g.ops[a.op].outputs, a.out_objs)
        if t in g.updates}
    lengths = sorted(len(c) for c in plan.pool.swaps if set(c) & kept_objs)
    if rotate:
        assert len(kept_objs) == 7 and lengths == [7]
    else:
        assert len(kept_objs) == 12 and lengths == [2] * 6
    backing = plan.next_object_map(g.updates, g.op_outputs())
    assert sorted(backing) == list(range(plan.pool.num_objects))


# ---------------------------------------------------------------- size-class plans that keep updated params
@pytest.mark.parametrize("seed,frac", [(5, 0.9), (15, 0.7), (21, 3.0)])
def test_a_kept_size_class_plan_carries_over_to_the_arena_with_its_renaming(seed, frac):
    """The size-class island's KeptAllocation genome (arena.arena_plan._plan_with_classes): the size-class plan
    keeping updated params, its objects side by side in the arena and its per-class renaming as the arena's
    cycles, verified, with the size-class plan's actions and simulated time."""
    from tvm_swap.planner.simulator import simulate
    from tvm_swap.planner.swapadvisor.arena import ArenaScorer
    from tvm_swap.planner.swapadvisor.encoding import AllocationSpace, KeptAllocation, KeptAllocationSpace
    from tvm_swap.planner.swapadvisor.swapplan import SwapPlanScorer, plan_swaps
    from tvm_swap.testing import random_op_times

    g = random_training_graph(seed, n_layers=6, momentum=seed == 21)
    t = random_op_times(g, seed)
    lim = int(frac * noswap_peak(g))
    gi = GraphIndex.build(g, 256, keep_updated=False)
    kgi = GraphIndex.build(g, 256, keep_updated=True)
    space = KeptAllocationSpace(kgi, lim)
    kept_updates = set()
    for alloc in space.seeds():
        assert isinstance(alloc, KeptAllocation)
        sp = plan_swaps(kgi, AllocationSpace(kgi, lim), gi.default_schedule(), alloc)
        sc = sp.to_plan(g, "t", lim, DEV)
        ap = plan_arena(gi, gi.default_schedule(), lim, alloc, t, DEV)
        plan = ap.to_plan(g, "t", lim, DEV)
        assert verify_plan(g, plan) == [] and verify_plan(g, sc) == []
        assert [a.to_json() for a in plan.actions] == [a.to_json() for a in sc.actions]
        assert plan.initial_residents == sc.initial_residents
        backing = sc.next_object_map(g.updates, g.op_outputs())
        assert plan.next_object_map(g.updates, g.op_outputs()) == backing
        kept_updates = kept_updates | ({t_ for t_, _ in sc.initial_residents} & set(g.updates.values()))
        assert bool(plan.pool.swaps) == (backing != list(range(len(backing))))
        want = SwapPlanScorer(kgi, AllocationSpace(kgi, lim), t, DEV).time_of(gi.default_schedule(), alloc)
        assert ArenaScorer(gi, lim, t, DEV).time_of(gi.default_schedule(), alloc) == want
        assert simulate(g, plan.actions, t, DEV).time_s == pytest.approx(want, rel=1e-12)
    assert kept_updates, "no seed keeps an updated param here: pick another case"
