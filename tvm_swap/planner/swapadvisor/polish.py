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
evaluation costs up to seconds at 10^4 ops); on small graphs the grid (coarse first: polish_memory's `coarse`)
gets the share of all evaluations and the flips get the share for themselves. Under a wall-clock budget (no fixed generations) the budget holds for
search and polish together: the search stops at 1 - POLISH_TIME_SHARE of it and no polish evaluation starts
after it ends (so `budget_s` stays what a plan costs; with fixed generations the counts above alone apply).

Where it evaluates: on the search's workers (ga.evolve keeps its pool open for the polish, planners.py), a batch
of as many genomes as there are workers at a time (PolishTimes): the grid's points do not depend on the best so
far, so a batch is the next points; the flips do, so a batch is the next flips from the best so far, and those
after a flip that wins are timed again from it. Both walk their batches as one at a time would, so the polish
finds the same genes at any number of workers; with one worker it is what it was. No batch starts that would
end after the deadline, by the last batch's duration (before the first, the search's per evaluation).
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


def polish_memory(ev, schedule, genes: ArenaGenes, time_s: float, max_evals: int | None = None,
                  deadline: float | None = None, times=None, coarse: bool = False,
                  near: bool = False) -> tuple[ArenaGenes, float, int]:
    """The fastest of `genes` (simulated `time_s` on `schedule`) and its grid neighbours by `ev.time_of`:
    keep x headroom (keep only where the graph has updated params to keep), then split at the best of those,
    at most `max_evals` evaluations (None: the whole grid), none started that would end after `deadline`
    (time.perf_counter() seconds; None: no deadline). `times`: a PolishTimes (where the evaluations run: on the
    search's workers, a batch at a time); None: one at a time in this process. Returns (genes, their time,
    evaluations made). `coarse`: every other keep and headroom first, then the whole grid's neighbours of the
    best of those (COARSE: about half the evaluations). `near`: the whole grid nearest the genes' own (keep,
    headroom) first, ring by ring (under a wall-clock budget the polish may end after a few points: on
    Inception-4@32 the points next to the best seed's won, 0.985 -> 0.9875 of ideal in 3 evaluations, where the
    grid in its order spent 16 on keeps 6-28% slower first). Size-class genomes (the size-class island's Allocation,
    or ArenaGenes.classes) are returned as they are."""
    if not isinstance(genes, ArenaGenes) or genes.classes is not None:
        return genes, time_s, 0
    times = times or PolishTimes(ev)

    def point(base: ArenaGenes, keep: float, headroom: float, split: float) -> ArenaGenes:
        g = base.copy()
        g.keep, g.headroom, g.split = float(keep), float(headroom), float(split)
        return g

    keeps = KEEPS if ev.space.has_pairs else (genes.keep,)
    if coarse:
        ki = sorted({*range(0, len(keeps), 2), len(keeps) - 1})      # (the largest keep too)
        grid = [point(genes, keeps[k], HEADROOMS[h], genes.split) for k in ki for h in range(0, len(HEADROOMS), 2)]
        best, best_t, n = climb(times, schedule, grid, genes, time_s, 0, max_evals, deadline)
        grid = [point(genes, keeps[k], HEADROOMS[h], genes.split) for k, h in _neighbours(best, keeps)]
    else:
        best, best_t, n = genes, time_s, 0
        cells = [(k, h) for k in range(len(keeps)) for h in range(len(HEADROOMS))]
        if near:
            cells.sort(key=lambda c, o=_nearest(genes, keeps): max(abs(c[0] - o[0]), abs(c[1] - o[1])))
        grid = [point(genes, keeps[k], HEADROOMS[h], genes.split) for k, h in cells]
    best, best_t, n = climb(times, schedule, grid, best, best_t, n, max_evals, deadline)
    splits = [point(best, best.keep, best.headroom, split) for split in SPLITS]
    return climb(times, schedule, splits, best, best_t, n, max_evals, deadline)


def _nearest(genes: ArenaGenes, keeps) -> tuple[int, int]:
    """The grid's (keep, headroom) indices nearest the genes' own (the first on a tie)."""
    k = min(range(len(keeps)), key=lambda i: abs(keeps[i] - genes.keep))
    return k, min(range(len(HEADROOMS)), key=lambda i: abs(HEADROOMS[i] - genes.headroom))


def _neighbours(best: ArenaGenes, keeps) -> list[tuple[int, int]]:
    """The whole grid's (keep, headroom) indices next to the best of the coarse grid (where its genes are on the
    grid; none where they are not: the coarse grid did not move them)."""
    if best.keep not in keeps or best.headroom not in HEADROOMS:
        return []
    k0, h0 = keeps.index(best.keep), HEADROOMS.index(best.headroom)
    return [(k, h) for k in range(k0 - 1, k0 + 2) for h in range(h0 - 1, h0 + 2)
            if 0 <= k < len(keeps) and 0 <= h < len(HEADROOMS) and (k, h) != (k0, h0)]


def climb(times, schedule, cands: list, best, best_t: float, n: int, max_evals: int | None,
          deadline: float | None):
    """The grid's walk: each candidate, in order, replaces `best` when faster; one equal to the best so far (by
    key) is skipped; at most `max_evals` evaluations in all (`n` made before). The candidates do not depend on
    the best, so a batch of the next ones is timed at once (on the workers), and the walk then goes through
    the batch as one at a time would: the same result and count as timing them one by one."""
    known = {best.key(): best_t}
    i = 0
    while i < len(cands) and (max_evals is None or n < max_evals) and times.may_start(deadline):
        room = times.width if max_evals is None else min(times.width, max_evals - n)
        want, j = {}, i
        while j < len(cands) and len(want) < room:
            k = cands[j].key()
            if k not in known and k not in want:
                want[k] = cands[j]
            j += 1
        known.update(zip(want, times(schedule, list(want.values()))))
        for g in cands[i:j]:
            if g.key() == best.key() or (max_evals is not None and n >= max_evals):
                continue
            n += 1
            t = known[g.key()]
            if t < best_t:
                best, best_t = g, t
        i = j
    return best, best_t, n


def fewer_recomputes(ev, schedule, genes: ArenaGenes, time_s: float, max_evals: int,
                     deadline: float | None = None, times=None) -> tuple[ArenaGenes, float, int]:
    """`genes` (simulated `time_s` on `schedule`) with recompute genes turned off one at a time: each tensor
    the plan rebuilds, the one whose producer takes longest first (ties: lower tensor id), becomes a swap
    again when the evaluator finds the plan faster so; at most `max_evals` evaluations, none started that would
    end after `deadline` (as polish_memory's). Each flip starts from the best so far, so on workers the next
    flips are timed together from it, and those after the first that wins are dropped (timed again from the
    new best): the same result and count as one at a time (the dropped ones are not counted). Returns (genes,
    their time, evaluations made). Genomes without recomputes are returned as they are."""
    if not isinstance(genes, ArenaGenes) or genes.classes is not None or not genes.recomputes():
        return genes, time_s, 0
    times = times or PolishTimes(ev)
    rebuilt = ev.scorer.rebuilt(schedule, genes)
    prod = ev.graph.producer()
    rebuilt.sort(key=lambda t: (-float(ev.op_time[prod[t]]), t))
    best, best_t, n, i = genes, time_s, 0, 0
    while i < len(rebuilt) and n < max_evals and times.may_start(deadline):
        batch, after = [], []
        while i < len(rebuilt) and len(batch) < min(times.width, max_evals - n):
            t = rebuilt[i]
            i += 1
            if best.recompute[t]:
                g = best.copy()
                g.recompute[t] = False
                batch.append(g)
                after.append(i)
        for g, nxt, tt in zip(batch, after, times(schedule, batch)):
            n += 1
            if tt < best_t:
                best, best_t = g, tt
                i = nxt             # the flips after it go again, from the new best
                break
    return best, best_t, n


class PolishTimes:
    """Times of a polish's genomes, remembered with the graph (ev.memo, as the search's own times): in this
    process one at a time (pool None), or on the search's workers a batch of `width` at a time (the pool
    ga.evolve keeps open for it). may_start: whether a batch started now would end by the deadline, by the
    last batch's duration (no evaluation that cannot finish within the budget); before the first, `first_s`
    (the caller's estimate: the search's wall seconds per evaluation, as the workers ran them)."""

    def __init__(self, ev, pool=None, first_s: float = 0.0):
        self.ev, self.pool = ev, pool
        self.width = max(1, getattr(pool, "workers", 1)) if pool is not None else 1
        self.last_s = first_s

    def __call__(self, schedule, genes: list) -> list[float]:
        t0 = time.perf_counter()
        gs = [Genome(schedule, g) for g in genes]
        todo = {}
        for g in gs:
            k = g.key()
            if k not in self.ev.memo and k not in todo:
                todo[k] = g
        if self.pool is None:
            for k, g in todo.items():
                self.ev.memo[k] = self.ev.time_of(g.schedule, g.alloc)
        else:
            for k, f in zip(todo, self.pool.submit_many(list(todo.values()))):
                self.ev.memo[k] = f.result()
        if todo:
            self.last_s = time.perf_counter() - t0
        return [self.ev.memo[g.key()] for g in gs]

    def may_start(self, deadline: float | None) -> bool:
        return deadline is None or time.perf_counter() + self.last_s <= deadline


def past(deadline: float | None) -> bool:
    """Whether a wall-clock deadline (time.perf_counter() seconds) has passed; None never does."""
    return deadline is not None and time.perf_counter() > deadline
