"""The arena memory model: device memory is one region, every stay of a tensor has an aligned byte offset.

Method: decide, then place, with a tightened capacity when placement fails (rounds.py). Read in this order:
- decisions.py   what travels between the parts (a walk's decisions, a placement, the rounds' result);
- genes.py       the memory side of a genome (ArenaGenes) and its genetic operators (ArenaSpace);
- walk.py        the walk: Belady with a byte budget, prefetching swap-ins, in-place outputs (walk_state.py:
                 the state of one walk; soundness.py: when an evicted tensor may be dropped and recomputed);
- pairs.py       kept pairs (updated params that stay on the device between iterations);
- layout.py      placement of the stays around the kept pairs' zones (placement.py, numba, places them);
- renaming.py    how kept pairs' objects are renamed between iterations so every iteration has one layout;
- cooling.py     timing-aware placement: keep a swapped-out stay's bytes until its copy is done;
- rounds.py      decide/place rounds; decide.py: one genome's decisions, frozen tensors pinned;
- actions.py     the plan's actions; arena_plan.py: plan_arena; scorer.py: the GA's fitness;
- feasibility.py the smallest limit with an arena plan; capacity.py: arena bytes, the working-set floor;
- tuning.py      the knobs.
Measurements of each part: notes/arena.md.

Periodicity: persistent tensors nothing updates (frozen weights) that the first pass keeps to its end are
pinned for the whole iteration (decide.py); updated params and their optimizer state are read from the host
and their updates copied out each iteration (graphindex.KEEP_UPDATED off), so the plan repeats without moving
anything between calls, except the kept pairs (pairs.py, layout.py, renaming.py). A kernel's workspace
that the lowering lifts into a tensor (relay_passes.lift_workspace; graph/workspace.py for the zoo) is a stay of
that kernel only, placed like any other; what stays inside a kernel (buffers TVM compacts, other scopes, library
calls) is, as in the size-class pool, a reserve of the largest op's remaining workspace beside the arena.
"""
from .arena_plan import ArenaPlan, plan_arena
from .capacity import arena_bytes_for, working_set_floor
from .feasibility import arena_fits, arena_min_limit
from .genes import ArenaGenes, ArenaSpace, class_genome
from .recomputable import cheap_to_recompute, recompute_candidates, secondaries
from .scorer import ArenaScorer
from .tuning import DEEP_SEED_DEPTH, MAX_DEPTH_GENE, MAX_KEEP, MEMORY_BOUND_FRACTION

__all__ = ["ArenaGenes", "ArenaPlan", "ArenaScorer", "ArenaSpace", "DEEP_SEED_DEPTH", "MAX_DEPTH_GENE", "MAX_KEEP",
           "MEMORY_BOUND_FRACTION", "arena_bytes_for", "arena_fits", "arena_min_limit", "cheap_to_recompute",
           "class_genome", "plan_arena", "recompute_candidates", "secondaries", "working_set_floor"]
