"""The order in which the first generation is evaluated: what a search under a time budget has timed when it
stops is what was likely worth most (issue 28: on NasNet-25@16 the `recompute-memory-bound` seed, 0.868 of
ideal alone, came after fifteen swap-only seeds at 1-4 s each, and a 60 s budget reached it or not from run to
run: 0.868 or 0.247).

- Every island's seeds on the default schedule first, then the seeds on the memory-greedy schedules (the
  variants: their names hold a "+", GeneticSearch.seed_genomes), then the random genomes.
- Within each of the two, where swap-only cannot come close to ideal (recompute_first: the activation-aware
  bound, tight_bound.py, is far from the ideal time), the hybrid island's recompute seeds first, those that
  rebuild the fewest, cheapest kernels first (RECOMPUTE_SEEDS), then the islands in their order; elsewhere the
  first island's first seed (the no-search plan) and the likeliest recompute seed, then the islands in order.

With a fixed number of generations the whole first generation is evaluated whatever the order, so the order
changes no plan there; under a budget it decides which seeds are timed before the budget ends.
"""
from __future__ import annotations

# the hybrid island's recompute seeds (arena.ArenaSpace.seeds), most likely worth first: memory-bound kernels in
# deep chains won on NasNet-25 (0.868 of ideal alone); recomputing convolutions too costs compute where the
# link has time to spare (Inception-4@32)
RECOMPUTE_SEEDS = ("recompute-memory-bound", "recompute-cheap-deep", "recompute-cheap", "recompute-all")


def recompute_rank(name: str) -> int | None:
    """A recompute seed's place in RECOMPUTE_SEEDS (its schedule variant aside); None for the other seeds."""
    base = name.split("+", 1)[-1]
    return RECOMPUTE_SEEDS.index(base) if base in RECOMPUTE_SEEDS else None


def seed_rank(island: int, position: int, name: str, recompute_first: bool, top_rc: int | None = None) -> tuple:
    """Sort key of a seed genome: island index, its position among the island's seeds, its name. `top_rc`: the
    rank of the likeliest recompute seed there is, which (where recompute does not come first) is timed right
    after the first island's first seed: Inception-4@32 at 16 GB, where swap-only could reach 0.99 of ideal by
    the bound, gets 0.985 from recompute-memory-bound and at most 0.80 from the swap-only seeds."""
    variant = "+" in name
    rc = recompute_rank(name)
    if recompute_first:
        tier, sub = (0, rc) if rc is not None else (1, 0)
    else:
        first = (island, position) == (0, 0) or (rc is not None and rc == top_rc)
        tier, sub = (0, 0) if first else (1, 0)
    return (variant, tier, sub, island, position)


def first_generation(islands: list, seeds: list, recompute_first: bool = False) -> tuple[list, list]:
    """(seed genomes, random genomes) of the first generation as (island, genome) pairs, each in the order to
    evaluate them. `seeds[i]`: island i's named seeds (GeneticSearch.seed_genomes), the head of its pop."""
    ranks = [r for ss in seeds for name, _ in ss if (r := recompute_rank(name)) is not None]
    top_rc = min(ranks, default=None)
    named = [(seed_rank(i, j, name, recompute_first, top_rc), isl, g)
             for i, (isl, ss) in enumerate(zip(islands, seeds)) for j, (name, g) in enumerate(ss)]
    named.sort(key=lambda x: x[0])
    rest = [(isl, g) for isl, ss in zip(islands, seeds) for g in isl.pop[len(ss):]]
    return [(isl, g) for _, isl, g in named], rest
