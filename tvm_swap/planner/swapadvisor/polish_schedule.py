"""The polish's schedule move: the search's best genome on its schedule's update-deadline order (deadline_order.py),
taken where it is faster, before the memory genes are polished on it.

Why a polish move and not a seed: as seeds (the deadline order of the graph order with every memory seed, in
every island) BRNN-4-8K@64 at 3 generations reached 0.946 of ideal, but the extra seeds changed the search's
random path elsewhere, and three of plan_hashes' small training plans came out 1-2% slower. One evaluation on
the best genome costs nothing where it does not pay and is never slower: the genome is replaced only when the
evaluator finds the new order faster, and the plan is made from it like any other genome (verified by
plan_graph). BRNN-4-8K@64's searched genome (16 GB, 3 generations, seed 0): 13.99 s on its schedule, 11.93 s on
its deadline order, where the size-class polish then climbs on (notes/arena.md).
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
