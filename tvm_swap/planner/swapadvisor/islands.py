"""The hybrid (swap or recompute) search as two islands, so that recompute on is never slower than recompute
off, nor than the single-population hybrid search it replaces, at the same seed and generations, by construction.

    islands = hybrid_islands(graph, op_time, device, mem_limit, alignment, seed, settings, evaluator)
    res = evolve(islands, budget_s, generations, ...)          # ga.evolve

- The swap-only island is the swap-only search itself: the swap-only genome space (ArenaSpace with recompute
  off: its seeds and operators), a numpy Generator seeded by `seed`, the same settings.
- The hybrid island is the hybrid search as it was before the islands: the recompute genome space (swap-only's
  seeds plus the recompute seeds; random genomes draw recompute genes), its own Generator, also seeded by
  `seed` (a separate object: drawing from one never moves the other).
- ga.evolve draws each island's random numbers only from that island's Generator, in the order a search alone
  draws them, and the islands exchange nothing but genome times; the scorer is the same for both (an arena
  evaluator's recompute flag only changes its genome space, and all-off recompute genes plan exactly as none).
  So after any number of generations each island's population, best genome and time are those of its search
  alone (tests/planner/swapadvisor/test_islands.py checks it genome for genome).
- The result is the faster of the two islands' best genomes (the swap-only island's on a tie): at most the time
  of `recompute="off"`, and at most the previous hybrid search's; the plan is swap-only's exactly whenever
  recompute did not help.
- No migration: sending the swap-only island's best genomes into the hybrid island (2 per generation, recompute
  genes off) was measured and did not help (10 random training graphs x 2 limits at 3 and 10 generations: mean on/off
  0.9965 both ways at 3, 0.9968 with migrants vs 0.9930 without at 10), and it would lose the second guarantee.

Cost: the swap-only island costs what recompute off costs; the hybrid island what the previous hybrid search
cost, less the genomes both hold (one time cache whose keys (ga.Genome.key) match all-off recompute genes with
none: the hybrid's swap-only seeds are simulated once). Measured (benchmarks/never_slower.md): 1.63x, 1.81x and
1.95x the evaluations of recompute off at 1, 3 and 10 generations on 40 random training cases, 1.80x on
BERT-large@32 16 GB at 3 generations.

The size-class island (size_class_island; the arena planners add it unless the planner option
size_class_island="off"): the size-class search itself (AllocationSpace genomes, GeneticSearch's size-class seeds
and CLS/CNT operators, its own Generator seeded by `seed`) scored by the same arena evaluator, which plans a
size-class Allocation as swapplan.plan_swaps with the pool's objects side by side in the arena (the same plan and
time as pool="size-classes"). Updated params: the island keeps them on the device or not as the size-class planner
does (planners._keep_updated_or_not: the mode whose best seed is faster); keeping, its genomes are KeptAllocations,
planned over a keep_updated index, and the pool's renaming of objects within a class between iterations
(Plan.next_object_map) becomes the arena's renaming cycles (equal, disjoint objects: any permutation of them maps
the layout onto itself). So the arena search is never slower than the size-class search at the same seed and
generations, by construction, and never slower than the arena search alone. Why it is needed: at BRNN-4-8K@64 (3 generations, seed 0) the arena search alone
ended at 0.759 of ideal, the size-class search at 0.786, although the arena's best seed (0.726) beats the
size-class pools' (0.677): the CLS/CNT search walked its 13 one-GiB param objects to a split that keeps the
big weights resident across their forward-to-backward gaps (l3.fw.wh: fetched once; the arena's Belady over
one byte budget evicted it and fetched it twice: 70 param swap-ins, 53.9 GiB, against 67 and 51.9 GiB), which
the arena genes (per-tensor biases, headroom, a soft params/others split) did not find in 3 generations. Under
it, fragmentation: on the default schedule the sweep placement of the walk at the full 14.9 GiB budget needs
17.6 GiB (1 GiB weights among short small stays), so the plain seed is decided at 12.2 GiB (headroom3 at 12.8):
2.1-2.7 GiB of the arena never hold a tensor, where the size-class pool's 13 one-GiB objects and its small classes
use all 14.9. Cost:
the size-class search's own evaluations (BRNN-4-8K@64, 3 generations, one loaded run: the size-class search
alone 44 s, the arena search with the island 3.9 min).

A wall-clock budget (no `generations`): the islands share it, the seeds of both first, then their random
genomes, then a crossover each in turn, so the swap-only island makes about half the evaluations recompute off
would make in the same time. The guarantee then holds against the swap-only search stopped where its island
stopped (the same genomes of the first generation evaluated, the same crossovers; plan.search["islands"] gives
each island's evaluations), not against recompute off given the whole budget. Measured on BERT-large@32 16 GB
at 60 s on a loaded machine (benchmarks/never_slower_budget.md): on reached 2 generations (off 5, the previous
hybrid search 3), with the same plan as the previous hybrid search (0.848 of ideal; off 0.497).
"""
from __future__ import annotations

import numpy as np

from ...cost.devices import DeviceSpec
from ...graph import DataflowGraph
from .arena import ArenaSpace
from .ga import Evaluator, GASettings, GeneticSearch


def hybrid_islands(graph: DataflowGraph, op_time, device: DeviceSpec, mem_limit: int, alignment: int, seed: int,
                   settings: GASettings, evaluator: Evaluator) -> list[GeneticSearch]:
    """[swap-only island, hybrid island] over one arena evaluator built with recompute on; only the swap-only
    island when no tensor may be recomputed (the hybrid island would search the swap-only space again)."""
    ev = evaluator
    if ev.pool != "arena" or ev.space.rc_able is None:
        raise ValueError("hybrid islands need an arena evaluator with recompute on")
    known: dict = {}
    swap_space = ArenaSpace(ev.gi, mem_limit, False, ev.op_time, device)
    swap = GeneticSearch(graph, op_time, device, mem_limit, alignment, settings=settings, evaluator=ev,
                         space=swap_space, rng=np.random.default_rng(seed), known=known, name="swap-only")
    if not ev.space.rc_able.any():
        return [swap]
    hybrid = GeneticSearch(graph, op_time, device, mem_limit, alignment, settings=settings, evaluator=ev,
                           rng=np.random.default_rng(seed), known=known, name="hybrid")
    return [swap, hybrid]


def size_class_islands(graph: DataflowGraph, op_time, device: DeviceSpec, mem_limit: int, alignment: int,
                       seed: int, settings: GASettings, evaluator: Evaluator, keep_updated=None,
                       choose_now: bool = True) -> list[GeneticSearch]:
    """size_class_island as a list (empty below the size-class floor). `choose_now` False (a time budget): where
    both keep modes apply, one island per mode, rivals (GeneticSearch.rivals): ga.evolve keeps the one whose best
    seed is faster after the first generation, so the choice's seed times are taken on the workers, in the
    first generation's order (seed_order.py), not serially in the driver before the search (~10 s of a 60 s
    budget at 12k ops)."""
    from ...errors import InfeasibleLimitError
    from ..graphindex import GraphIndex, keep_updated_modes

    modes = keep_updated_modes(keep_updated)
    if not choose_now and len(modes) > 1:
        # (both modes plan alike where no param is updated: one island then)
        choose_now = not GraphIndex.of(graph, alignment, keep_updated=True).old_of.max(initial=-1) >= 0
    if choose_now or len(modes) == 1:
        sc = size_class_island(graph, op_time, device, mem_limit, alignment, seed, settings, evaluator, keep_updated)
        return [] if sc is None else [sc]
    out = []
    for k in modes:
        try:
            sc = size_class_island(graph, op_time, device, mem_limit, alignment, seed, settings, evaluator, k)
        except InfeasibleLimitError:
            sc = None
        if sc is not None:
            sc.rivals = "size-classes"
            sc.space.wrap_ok = True in modes       # (each rival plans one mode; keeping was not refused)
            out.append(sc)
    return out


def size_class_island(graph: DataflowGraph, op_time, device: DeviceSpec, mem_limit: int, alignment: int, seed: int,
                      settings: GASettings, evaluator: Evaluator, keep_updated=None) -> GeneticSearch | None:
    """The size-class search (the paper's CLS/CNT genomes, its seeds and operators, a Generator seeded by `seed`)
    as an island of the arena search, scored by the arena evaluator: a size-class Allocation plans in the arena
    as swapplan.plan_swaps with the pool's objects side by side (arena.class_genome), the same plan and time as
    pool="size-classes". That pool keeps updated params on the device or not (planners._keep_updated_or_not:
    `keep_updated` forced, else the mode whose best seed is faster, keeping on a tie); the island makes the same
    choice on the same seeds: keeping, its genomes are KeptAllocations (encoding.KeptAllocationSpace), planned
    over a keep_updated index with the pool's renaming between iterations as the arena's renaming cycles. So at
    the same seed and generations the arena search is never slower than the size-class search, by
    construction. None below the size-class pool's floor (no size-class plan)."""
    from ...errors import InfeasibleLimitError
    from ..graphindex import GraphIndex, keep_updated_modes
    from .encoding import AllocationSpace, KeptAllocationSpace
    from .ga import best_seed_time

    ev = evaluator
    if ev.pool != "arena":
        raise ValueError("a size-class island needs an arena evaluator")
    modes = keep_updated_modes(keep_updated)
    try:
        kept_gi = GraphIndex.of(graph, alignment, keep_updated=True) if True in modes else None
        spaces = [KeptAllocationSpace(kept_gi, mem_limit) if k else AllocationSpace(ev.gi, mem_limit) for k in modes]
    except InfeasibleLimitError:
        return None
    space = spaces[0]
    if True not in modes:
        space.wrap_ok = False     # updated params kept on request only: not by the polish's wrap move either
    if len(spaces) > 1 and kept_gi.old_of.max(initial=-1) >= 0:
        best = [best_seed_time(graph, op_time, device, mem_limit, alignment, seed, ev, sp) for sp in spaces]
        space = spaces[0] if best[0] <= best[1] else spaces[1]
    return GeneticSearch(graph, op_time, device, mem_limit, alignment, settings=settings, evaluator=ev, space=space,
                         rng=np.random.default_rng(seed), name="size-classes")


def island_summary(islands: list[GeneticSearch]) -> list[dict]:
    """Per island: its name, best time and evaluations (for plan.search); a rival island that lost
    (size_class_islands) is left out."""
    return [{"name": isl.name, "best_s": isl.pop[0].time_s if isl.pop else None, "evaluations": isl.evaluations}
            for isl in islands if isl.pop or getattr(isl, "rivals", None) is None]


def partly_cooled_island(graph: DataflowGraph, op_time, device: DeviceSpec, mem_limit: int, alignment: int,
                         seed: int, settings: GASettings, evaluator: Evaluator) -> GeneticSearch:
    """The swap-only arena search again (whatever the recompute option: so it is the same search, and its times
    are remembered, with recompute on and off), with every genome's
    `partly` gene set: its placements may also cool only some of the stays whose copies drain (arena.cooling.partly_cooled),
    which changes the times the search is led by. As an island (its own Generator seeded by `seed`, nothing
    exchanged but times) the search without it is unchanged, so the result is never slower than without the
    island at the same seed and generations. Why an island: with that placement in every island's evaluations,
    bench_gap's dag110@0.4 went 5.51 -> 5.27-5.37 ms, but the searches took other paths elsewhere, slower on 9 of 74
    instances (train63@0.4 x1.083)."""
    ev = evaluator
    if ev.pool != "arena":
        raise ValueError("a partly-cooled island needs an arena evaluator")
    space = ArenaSpace(ev.gi, mem_limit, False, ev.op_time, device, partly=True)
    return GeneticSearch(graph, op_time, device, mem_limit, alignment, settings=settings, evaluator=ev, space=space,
                         rng=np.random.default_rng(seed), name="partly-cooled")

