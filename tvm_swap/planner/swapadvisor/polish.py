"""After the arena search, on small graphs: the best genome's scalar memory genes on a grid, its schedule fixed.

Why: the GA moves headroom and keep by small Gaussian steps (ArenaSpace.mutate) and draws a random genome's
headroom below half its range, so a joint move of both that only pays together is rarely made. dag132@0.4
(bench_gap, 12 ops, the d2h link saturated by the graph's 8 MB outputs): the search ended on keep 1, headroom 0
(4.915 ms); keep 0.75 with headroom 0.1 on the same schedule lowers the walk's capacity enough that the cooled
placement fits with p0 kept (4.299 ms; the stage model's optimum 4.216). On a small graph an evaluation costs
milliseconds, so the grid (keep x headroom at the genome's split, then split at the best pair: ~60
evaluations) is a few seconds; large graphs are left to the search (POLISH_MAX_OPS).

The result is never slower than the search's best: a grid point replaces it only when the evaluator finds it
faster, and the plan is then made from the polished genes like any other genome (verified by plan_graph).
"""
from __future__ import annotations

from .arena import MAX_KEEP, ArenaGenes, ArenaSpace
from .ga import Genome

POLISH_MAX_OPS = 64        # above this many ops an evaluation costs too much for a grid after the search
KEEPS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, MAX_KEEP)
HEADROOMS = tuple(ArenaSpace.MAX_HEADROOM * k / 6 for k in range(7))
SPLITS = (-1.0, 0.3, 0.5, 0.7)


def polish_memory(ev, schedule, genes: ArenaGenes, time_s: float) -> tuple[ArenaGenes, float, int]:
    """The fastest of `genes` (simulated `time_s` on `schedule`) and its grid neighbours by `ev.time_of`:
    keep x headroom (keep only where the graph has updated params to keep), then split at the best of those.
    Returns (genes, their time, evaluations made). Size-class genomes (the size-class island's Allocation, or
    ArenaGenes.classes) are returned as they are."""
    if not isinstance(genes, ArenaGenes) or genes.classes is not None:
        return genes, time_s, 0
    best, best_t, n = genes, time_s, 0

    def consider(keep: float, headroom: float, split: float) -> None:
        nonlocal best, best_t, n
        g = best.copy()
        g.keep, g.headroom, g.split = float(keep), float(headroom), float(split)
        if g.key() == best.key():
            return
        n += 1
        t = ev.remembered_time(Genome(schedule, g))     # (kept with the graph, as the search's own times)
        if t < best_t:
            best, best_t = g, t

    keeps = KEEPS if ev.space.has_pairs else (genes.keep,)
    split = genes.split
    for keep in keeps:
        for headroom in HEADROOMS:
            consider(keep, headroom, split)
    keep, headroom = best.keep, best.headroom
    for split in SPLITS:
        consider(keep, headroom, split)
    return best, best_t, n
