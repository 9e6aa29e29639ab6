"""The polish's last move: the polished genome on its schedule's update-deadline order (deadline_order.py), taken
where it is faster.

Why a polish move and not a seed: as seeds (the deadline order of the graph order with every memory seed, in
every island) BRNN-4-8K@64 at 3 generations reached 0.946 of ideal, but the extra seeds changed the search's
random path elsewhere, and three of plan_hashes' small training plans came out 1-2% slower. Why last: taken
first, the polish's grid and flips then ran on the new order, and Inception-4@32 (3 generations) ended 0.17%
slower (4.7188 -> 4.7266 s) though the move itself was faster. Last, the search and the polish are what they
were, and one evaluation more replaces their result only where the evaluator finds the new order faster: never
slower, and the plan is made from it like any other genome (verified by plan_graph). BRNN-4-8K@64's polished
genome (16 GB, 3 generations, seed 0): 13.467 s on its schedule, 11.581 s on its deadline order (notes/arena.md).
"""
from __future__ import annotations

from .deadline_order import deadline_schedule
from .ga import Genome


def deadline_move(ev, genome: Genome, deadline: float | None, times) -> tuple[Genome, int]:
    """(`genome` on its schedule's deadline order where that is faster, else `genome`; evaluations made: 0 or 1).
    `times`: a polish.PolishTimes; none is made after the wall-clock `deadline` (None: no deadline)."""
    sched = deadline_schedule(ev.gi, genome.schedule)
    if (sched == genome.schedule).all() or not times.may_start(deadline):
        return genome, 0
    (t,) = times(sched, [genome.alloc])
    return (Genome(sched, genome.alloc, t) if t < genome.time_s else genome), 1
