"""After the arena search: the best genome's scalar memory genes on a grid, its schedule fixed; then its recomputes
turned back into swaps where that is faster.

Why: the GA moves headroom and keep by small Gaussian steps (ArenaSpace.mutate) and draws a random genome's
headroom below half its range, so a joint move of both that only pays together is rarely made. dag132@0.4
(bench_gap, 12 ops, the d2h link saturated by the graph's 8 MB outputs): the search ended on keep 1, headroom 0
(4.915 ms); keep 0.75 with headroom 0.1 on the same schedule lowers the walk's capacity enough that the cooled
placement fits with p0 kept (4.299 ms; the stage model's optimum 4.216). On a small graph an evaluation costs
milliseconds, so the grid (keep x headroom at the genome's split, then split at the best pair: ~60
evaluations) is a few seconds; on large graphs (above POLISH_MAX_OPS) it runs within a budget, see below.

The result is never slower than the search's best: a grid point replaces it only when the evaluator finds it
faster, and the plan is then made from the polished genes like any other genome (verified by plan_graph).

Fewer recomputes (`fewer_recomputes`, after the grid, on every graph): the recompute genes are set per tensor
by seeds that recompute whole kernel classes (arena.ArenaSpace.seeds) and flipped by the GA at random, so a
plan rebuilds tensors whose copies the link had time for. Inception-4@32 at 16 GB (3 generations): the best
plan rebuilt 180 tensors (0.043 s of compute) with the d2h link ~80% idle; turning the rebuilds back into
swaps, the most expensive recompute first, each kept only where the evaluator finds the plan faster: the
grid 0.987 -> 0.989 of ideal (58 evaluations), then 37 flips -> 0.992 with 158 rebuilds (the budget below;
with 133 flips 0.993, 118 rebuilds). A flip changes which tensors the walk evicts, so the effect of one is
not predictable from the link's idle time alone: each is simulated.

On graphs above POLISH_MAX_OPS the grid and the flips of one genome share a budget of POLISH_SHARE of the
search's evaluations, the grid first (planners._polish: with recompute on, the swap-only islands' best gets
the share of their evaluations, as recompute off polishes it, and the hybrid's best, when it is the best, the
share of all), so the polish adds at most about POLISH_SHARE to twice that of the search's evaluations (an
evaluation costs up to seconds at 10^4 ops); on small graphs the grid is whole (a few ms an evaluation) and
the flips get the share for themselves. Under a wall-clock budget (no fixed generations) the budget holds for
search and polish together: the search stops at 1 - POLISH_TIME_SHARE of it and no polish evaluation starts
after it ends (so `budget_s` stays what a plan costs; with fixed generations the counts above alone apply).
"""
from __future__ import annotations

import time

from .arena import MAX_KEEP, ArenaGenes, ArenaSpace
from .ga import Genome

POLISH_MAX_OPS = 64        # above this many ops: no partly-cooled island, and the polish within a budget (below)
POLISH_SHARE = 0.5         # a genome's polish: at most this share of the search's evaluations (see above)
POLISH_TIME_SHARE = 0.25   # under a wall-clock budget: the share of it left to the polish (the search stops first)
KEEPS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, MAX_KEEP)
HEADROOMS = tuple(ArenaSpace.MAX_HEADROOM * k / 6 for k in range(7))
SPLITS = (-1.0, 0.3, 0.5, 0.7)


def polish_memory(ev, schedule, genes: ArenaGenes, time_s: float,
                  max_evals: int | None = None, deadline: float | None = None) -> tuple[ArenaGenes, float, int]:
    """The fastest of `genes` (simulated `time_s` on `schedule`) and its grid neighbours by `ev.time_of`:
    keep x headroom (keep only where the graph has updated params to keep), then split at the best of those,
    at most `max_evals` evaluations (None: the whole grid), none started after `deadline` (time.perf_counter()
    seconds; None: no deadline). Returns (genes, their time, evaluations made).
    Size-class genomes (the size-class island's Allocation, or ArenaGenes.classes) are returned as they are."""
    if not isinstance(genes, ArenaGenes) or genes.classes is not None:
        return genes, time_s, 0
    best, best_t, n = genes, time_s, 0

    def consider(keep: float, headroom: float, split: float) -> None:
        nonlocal best, best_t, n
        g = best.copy()
        g.keep, g.headroom, g.split = float(keep), float(headroom), float(split)
        if g.key() == best.key() or (max_evals is not None and n >= max_evals) or past(deadline):
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


def fewer_recomputes(ev, schedule, genes: ArenaGenes, time_s: float, max_evals: int,
                     deadline: float | None = None) -> tuple[ArenaGenes, float, int]:
    """`genes` (simulated `time_s` on `schedule`) with recompute genes turned off one at a time: each tensor
    the plan rebuilds, the one whose producer takes longest first (ties: lower tensor id), becomes a swap
    again when the evaluator finds the plan faster so; at most `max_evals` evaluations, none started after
    `deadline` (as polish_memory's). Returns (genes, their
    time, evaluations made). Genomes without recomputes are returned as they are."""
    if not isinstance(genes, ArenaGenes) or genes.classes is not None or not genes.recomputes():
        return genes, time_s, 0
    rebuilt = ev.scorer.rebuilt(schedule, genes)
    prod = ev.graph.producer()
    rebuilt.sort(key=lambda t: (-float(ev.op_time[prod[t]]), t))
    best, best_t, n = genes, time_s, 0
    for t in rebuilt:
        if n >= max_evals or past(deadline):
            break
        if not best.recompute[t]:
            continue
        g = best.copy()
        g.recompute[t] = False
        n += 1
        tt = ev.remembered_time(Genome(schedule, g))
        if tt < best_t:
            best, best_t = g, tt
    return best, best_t, n


def past(deadline: float | None) -> bool:
    """Whether a wall-clock deadline (time.perf_counter() seconds) has passed; None never does."""
    return deadline is not None and time.perf_counter() > deadline
