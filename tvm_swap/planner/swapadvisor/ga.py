"""SwapAdvisor's genetic search over (schedule, allocation), scored by swap planner + simulator.

- The first generation: the default schedule with a few allocation heuristics (the single-class pool that
  SwapAdvisor-without-search uses, the minimal feasible pool, exact sizes, geometric groupings), two
  memory-greedy schedules (not in the paper: encoding.locality_schedule) with the best-grouped pools, then
  random individuals (mutated default schedules with random allocations) up to the population size.
- Each generation pairs parents at random; a crossover gives 2 schedules x 2 allocations = 4 children,
  each mutated, swap-planned and simulated. Survivors are drawn without replacement with softmax weights
  over (T_best - t) / T_best (divided by a temperature); the best always survives, so the result is never
  worse than any seed, the no-search plan included.
- Determinism: every random draw happens in this process, from one numpy Generator seeded by `seed`;
  workers only evaluate genomes (a pure function), so the same seed and number of generations give the
  same plan with any number of workers. A time budget instead stops between crossovers (the last
  generation may be partial), leaving time for the final plan.
- Islands (evolve): several populations that share the evaluator and its time cache, each drawing only from
  its own Generator, bred and selected side by side; the result is the best of all. The hybrid search (recompute
  on) runs swap-only's own search as one island (islands.py), so it is never slower than recompute off at the
  same seed and generations. One island is GeneticSearch.run.
- Parallel evaluation (tvm_swap.planner.swapadvisor.executors): local processes started by a forkserver, or Ray actors;
  each worker receives the Evaluator once and evaluates batches. workers=1 evaluates in-process.
"""
from __future__ import annotations

import gc
import hashlib
import math
import os
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ...cost.devices import DeviceSpec
from ...errors import PlanError
from ...graph import DataflowGraph
from .arena import ArenaScorer, ArenaSpace
from .encoding import Allocation, AllocationSpace, crossover_schedules, locality_schedule, mutate_schedule
from ..graphindex import GraphIndex
from ..recompute import MAX_CHAIN_DEPTH
from .executors import Done, make_pool
from .seed_order import first_generation
from .swapplan import SwapPlanScorer


@dataclass
class GASettings:
    population: int = 16             # Np (the paper: 144 on 72 vCPUs); the seeds come on top if more
    temperature: float = 0.05        # softmax temperature on (T_best - t) / T_best
    schedule_mutation: float = 0.5   # probability that a child's schedule is mutated at all
    max_pick_rate: float = 0.1       # a mutated schedule's random-pick probability is log-uniform up to this
    cls_flip: float = 0.1            # per CLS step
    cnt_redraw: float = 0.3          # per class count
    cnt_sigma: float = 0.25          # Gaussian sd as a fraction of the count
    # the seed schedules each memory seed is tried with: 3 = the default schedule and the two memory-greedy
    # ones (encoding.locality_schedule); 1 = the default schedule only, a quicker search (the fuzz's, which
    # checks plans, not their quality): about a third of the seed evaluations
    seed_schedules: int = 3

    @classmethod
    def from_options(cls, options: dict) -> "GASettings":
        known = {k: options[k] for k in cls.__dataclass_fields__ if k in options}
        s = cls(**known)
        if s.population < 2:
            raise ValueError(f"population must be at least 2, got {s.population}")
        if s.seed_schedules not in (1, 3):
            raise ValueError(f"seed_schedules must be 1 or 3, got {s.seed_schedules!r}")
        return s


@dataclass
class Genome:
    schedule: np.ndarray
    alloc: Allocation
    time_s: float = math.inf

    def key(self) -> bytes:
        """Arena genes whose recompute genes are all off, at the default chain depth, key as swap-only genes
        (None: they plan alike), so the hybrid's two islands (islands.py) share one time per swap-only genome;
        within one genome space keys stay one-to-one with genomes (a recompute space never holds None)."""
        h = hashlib.blake2b(self.schedule.tobytes(), digest_size=16)
        alloc = self.alloc
        if getattr(alloc, "recompute", None) is not None and not alloc.recompute.any() \
                and alloc.depth == MAX_CHAIN_DEPTH:
            alloc = replace(alloc, recompute=None)
        k = alloc.key()
        for part in (k if isinstance(k, tuple) else (k,)):
            h.update(part)
            h.update(b"|")
        return h.digest()


@dataclass
class SearchResult:
    best: Genome
    generations: int
    evaluations: int
    search_s: float
    history: list = field(default_factory=list)   # [generation, elapsed_s, best_time_s]
    seed_times: dict = field(default_factory=dict)  # time of each named seed (e.g. "nosearch")
    interrupted: bool = False                        # Ctrl-C cut the search: `best` is the best so far
    # under a budget: wall seconds of the last batch of one evaluation per worker once the workers were up
    # (0: none measured); the search's average counts the workers' start, seconds under load
    batch_s: float = 0.0


class Evaluator:
    """Genome -> simulated iteration time. Built once per process. `pool`: "size-classes" (the memory genome
    is the paper's CLS/CNT Allocation) or "arena" (arena.ArenaGenes; `recompute`: its genes also choose, per
    evicted tensor, swap or drop + recompute)."""

    def __init__(self, graph: DataflowGraph, op_time: np.ndarray, device: DeviceSpec, mem_limit: int,
                 alignment: int, keep_updated: bool | None = None, pool: str = "size-classes",
                 recompute: bool = False):
        self.graph = graph
        self.op_time = np.asarray(op_time, dtype=np.float64)
        self.device = device
        self.pool = pool
        if pool == "arena":
            self.gi = GraphIndex.of(graph, alignment, keep_updated=False)
            self.space = ArenaSpace(self.gi, mem_limit, recompute, self.op_time, device)
            self.scorer = ArenaScorer(self.gi, mem_limit, self.op_time, device)
        else:
            self.gi = GraphIndex.build(graph, alignment, keep_updated)
            self.space = AllocationSpace(self.gi, mem_limit)
            self.scorer = SwapPlanScorer(self.gi, self.space, self.op_time, device)
        self.memo = genome_times(graph, pool, keep_updated, mem_limit, alignment, device, self.op_time)

    def __getstate__(self) -> dict:
        # workers only evaluate: the memo stays with the driver (ga.GeneticSearch.submit looks it up)
        return {**self.__dict__, "memo": {}}

    def time_of(self, schedule: np.ndarray, alloc: Allocation) -> float:
        try:
            return self.scorer.time_of(schedule, alloc)
        except PlanError:
            return math.inf

    def remembered_time(self, genome: "Genome") -> float:
        """time_of, looked up in (and kept in) the memo the graph keeps for this evaluator's settings."""
        k = genome.key()
        t = self.memo.get(k)
        if t is None:
            t = self.memo[k] = self.time_of(genome.schedule, genome.alloc)
        return t


def genome_times(graph: DataflowGraph, pool: str, keep_updated, mem_limit: int, alignment: int,
                 device: DeviceSpec, op_time: np.ndarray) -> dict:
    """Genome key -> simulated time, kept with the graph per scorer setting (pool, limit, alignment, device, op
    times; not the recompute flag, which only changes the genome space, and all-off recompute genes key as
    none: Genome.key). An evaluation is a pure function of these and the genome, so another search on the same
    graph and settings (swapadvisor with recompute off after on, whose swap-only island is the same search; a
    second plan_graph at the same limit) reuses the times instead of simulating again. Evaluation counts are
    unchanged: a remembered time still counts as evaluated by the search that asks for it."""
    key = ("genome_times", pool, keep_updated, int(mem_limit), int(alignment), repr(device),
           hashlib.blake2b(np.ascontiguousarray(op_time, dtype=np.float64).tobytes(), digest_size=16).digest())
    return graph._cache.setdefault(key, {})


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class GeneticSearch:
    """One population (an island) and its operators. `space`: the genome space the operators draw from (the
    evaluator's by default); `rng`: its own random stream (numpy Generator seeded by `seed` by default);
    `known`: genome key -> time, shared between islands that share the evaluator (ga.evolve, islands.py)."""

    def __init__(self, graph: DataflowGraph, op_time, device: DeviceSpec, mem_limit: int, alignment: int = 256,
                 seed: int = 0, settings: GASettings | None = None, evaluator: Evaluator | None = None,
                 space=None, rng: np.random.Generator | None = None, known: dict | None = None, name: str = ""):
        self.ev = evaluator or Evaluator(graph, op_time, device, mem_limit, alignment)
        self.gi = self.ev.gi
        self.space = self.ev.space if space is None else space
        # the genome space, not the evaluator, says what an island breeds: an arena evaluator also scores
        # size-class Allocations (laid out in the arena), so the size-class search can be an island of the
        # arena search (islands.size_class_island)
        self.arena_genomes = isinstance(self.space, ArenaSpace)
        self.mem_limit, self.alignment = int(mem_limit), int(alignment)
        self.s = settings or GASettings()
        self.rng = np.random.default_rng(seed) if rng is None else rng
        self.known: dict[bytes, float] = {} if known is None else known   # nothing is simulated twice
        self.evaluations = 0                    # genomes this island sent to be simulated
        self.name = name
        self.pop: list[Genome] = []
        # islands with the same `rivals` tag: after the first generation only the one with the fastest genome
        # goes on (the others stop breeding); None: none
        self.rivals: str | None = None

    # ---- genomes ----
    def seed_genomes(self) -> list[tuple[str, Genome]]:
        """The default schedule with each allocation heuristic (the first is SwapAdvisor without search),
        then two memory-greedy schedules (encoding.locality_schedule) with the three best-grouped pools."""
        sched = self.gi.default_schedule()
        sp = self.space
        if self.arena_genomes:
            # each memory seed with the three schedules before the next memory seed: under a time budget the
            # seeds evaluated first are the plain genomes (best on BERT-large: hot; on the RNNs: free, default)
            named = sp.seeds()
            scheds = [("", sched)]
            if self.s.seed_schedules > 1:
                scheds += [("free+", locality_schedule(self.gi, sched, 0.25 * self.mem_limit, net=True)),
                           ("hot+", locality_schedule(self.gi, sched, 1.0 * self.mem_limit, net=False))]
            return [(f"{sname}{name}", Genome(s.copy(), a.copy())) for name, a in named
                    for sname, s in (scheds[:1] if name in sp.DEFAULT_SCHEDULE_ONLY else scheds)]
        allocs = [("nosearch", sp.single_class()), ("minimal_pool", sp.minimal_pool()),
                  ("exact_sizes", sp.exact_sizes()), ("geometric2", sp.geometric(2.0)),
                  ("geometric8", sp.geometric(8.0))]
        out = [(name, Genome(sched.copy(), a)) for name, a in allocs]
        if self.s.seed_schedules == 1:
            return out
        scheds = [("hot", locality_schedule(self.gi, sched, 1.0 * self.mem_limit, net=False)),
                  ("free", locality_schedule(self.gi, sched, 0.25 * self.mem_limit, net=True))]
        for sname, s in scheds:
            for aname, a in allocs[1:4]:
                out.append((f"{sname}+{aname}", Genome(s.copy(), a.copy())))
        return out

    def random_genome(self) -> Genome:
        sched = self._mutated_schedule(self.gi.default_schedule())
        return Genome(sched, self.space.random(self.rng))

    def _mutated_schedule(self, parent: np.ndarray) -> np.ndarray:
        n = max(2, self.gi.n_ops)
        lo = math.log(1.0 / n)
        rate = math.exp(self.rng.uniform(lo, math.log(max(self.s.max_pick_rate, 1.0 / n))))
        return mutate_schedule(self.gi, parent, rate, self.rng)

    def children(self, a: Genome, b: Genome) -> list[Genome]:
        """One crossover: 2 schedules x 2 allocations, each child mutated."""
        rng, s, sp = self.rng, self.s, self.space
        n = self.gi.n_ops
        cut = int(rng.integers(1, n)) if n > 1 else 0
        scheds = [crossover_schedules(a.schedule, b.schedule, cut), crossover_schedules(b.schedule, a.schedule, cut)]
        arena = self.arena_genomes
        if arena:
            allocs = list(sp.crossover(a.alloc, b.alloc, rng))
        elif sp.m > 1:          # size classes: one cut on the sorted sizes
            allocs = list(sp.crossover(a.alloc, b.alloc, int(rng.integers(1, sp.m))))
        else:
            allocs = [a.alloc.copy(), b.alloc.copy()]
        kids = []
        for sc in scheds:
            for al in allocs:
                child_s = self._mutated_schedule(sc) if rng.random() < s.schedule_mutation else sc.copy()
                child_a = sp.mutate(al, rng) if arena else sp.mutate(al, rng, s.cls_flip, s.cnt_redraw, s.cnt_sigma)
                kids.append(Genome(child_s, child_a))
        return kids

    # ---- evaluation and selection ----
    def submit(self, pool, genomes: list[Genome], pending: dict) -> None:
        """Start evaluating the genomes not seen before (one batch); `pending` maps key -> (future, island),
        and may be shared by islands that share `known`."""
        new = {}
        for g in genomes:
            k = g.key()
            if k not in self.known and k not in pending and k not in new:
                new[k] = g
        memo = self.ev.memo                # times an earlier search on this graph and settings found
        futures = iter(pool.submit_many([g for k, g in new.items() if k not in memo]))
        pending.update((k, (Done(memo[k]) if k in memo else next(futures), self)) for k in new)

    def select(self, candidates: list[Genome], k: int) -> list[Genome]:
        uniq, seen = [], set()
        for g in candidates:
            key = g.key()
            if key not in seen and math.isfinite(g.time_s):
                seen.add(key)
                uniq.append(g)
        uniq.sort(key=lambda g: g.time_s)        # stable: ties keep their order
        if len(uniq) <= k:
            return uniq
        t_best = uniq[0].time_s
        score = np.array([(t_best - g.time_s) / t_best for g in uniq[1:]]) / self.s.temperature
        w = np.exp(score - score.max()) + 1e-12       # never all zero: far-off genomes stay possible
        picked = self.rng.choice(len(uniq) - 1, size=k - 1, replace=False, p=w / w.sum())
        rest = [uniq[1 + i] for i in sorted(picked.tolist())]
        return [uniq[0]] + rest

    # ---- the loop ----
    def run(self, budget_s: float = 60.0, generations: int | None = None, workers: int | None = None,
            progress: bool = False, executor: str = "processes", ray_address: str | None = None) -> SearchResult:
        """executor: "processes" (local; workers=1 is in-process) or "ray" (tvm_swap.planner.swapadvisor.executors)."""
        return evolve([self], budget_s, generations, workers, progress, executor, ray_address)


def best_seed_time(graph: DataflowGraph, op_time, device: DeviceSpec, mem_limit: int, alignment: int, seed: int,
                   evaluator: Evaluator, space=None) -> float:
    """The fastest seed genome's time (the seeds of the default settings drawn from `space`, the evaluator's by
    default), each remembered by the evaluator, so the search that follows reuses them: how the size-class
    search chooses whether to keep updated params (planners._keep_updated_or_not, islands.size_class_island)."""
    seeds = GeneticSearch(graph, op_time, device, mem_limit, alignment, seed, evaluator=evaluator,
                          space=space).seed_genomes()
    return min(evaluator.remembered_time(g) for _, g in seeds)


def _collect(known: dict, pending: dict) -> None:
    for k, (f, island) in pending.items():
        known[k] = island.ev.memo[k] = f.result()
        island.evaluations += 1
    pending.clear()


def _settle_rivals(islands: list[GeneticSearch]) -> None:
    """Of each set of rival islands (GeneticSearch.rivals), only the one whose best genome is fastest (the first
    on a tie) keeps its population; the others stop (an empty population breeds nothing)."""
    tags = {isl.rivals for isl in islands if isl.rivals is not None}
    for tag in tags:
        group = [isl for isl in islands if isl.rivals == tag]
        timed = [isl for isl in group if isl.pop]
        keep = min(timed, key=lambda isl: isl.pop[0].time_s) if timed else None
        for isl in group:
            if isl is not keep:
                isl.pop = []


def best_time(islands: list[GeneticSearch]) -> float:
    """The fastest time any island's population holds (inf before any is timed)."""
    return min((g.time_s for isl in islands for g in isl.pop), default=math.inf)


def best_genome(islands: list[GeneticSearch]) -> Genome:
    """The fastest genome of all islands; on a tie the earlier island's (min keeps the first)."""
    timed = [isl.pop[0] for isl in islands if isl.pop]
    if not timed:          # (min() of nothing: a bare ValueError from inside the search, found by the host fuzz)
        raise PlanError("the search found no genome that plans under this limit (every one it timed was "
                        "refused); raise the memory limit, or plan with more generations or a larger budget")
    return min(timed, key=lambda g: g.time_s)


def _time_first_generation(islands: list[GeneticSearch], evaluate, seeded_rest, clock, n_workers: int,
                           at_floor, final_batches: int = 3) -> float:
    """Time the first generation (`seeded_rest`: the seeds, likeliest first, then the random genomes) and
    leave each island's population what was timed. Under a time budget (`clock`: (start, budget_s); None for
    fixed generations) a worker's batch at a time, since on large graphs each evaluation can take seconds;
    with fixed generations all of it, unless a seed is already at the bound (at_floor). `final_batches`: the
    batches' time kept back for the final plan (evolve's final_reserve). Returns the last batch's wall seconds
    after the first (0.0: none)."""
    seeded, rest = seeded_rest
    if clock is None:
        evaluate(seeded)
        if at_floor():          # a seed is at the bound: the random genomes could not win
            for isl in islands:
                isl.pop = [g for i, g in seeded if i is isl]
        else:
            evaluate(rest)
        return 0.0
    t0, budget_s = clock
    first, done_first, step = seeded + rest, [], max(1, n_workers)
    batch_s = 0.0
    for k in range(0, len(first), step):
        b_start = time.perf_counter()
        evaluate(first[k:k + step])
        done_first += first[k:k + step]
        # stop when the next batch and the final plan (about 3 evaluations) would not fit; the first batch
        # also starts the workers, so it only stops a search already past its budget
        batch_s = time.perf_counter() - b_start if k else batch_s
        late = time.perf_counter() - t0 + (1 + final_batches) * batch_s > budget_s
        if (late or at_floor()) and math.isfinite(best_time(islands)):
            break           # (not before a plan: a seed that does not fit times inf)
    for isl in islands:
        isl.pop = [g for i, g in done_first if i is isl]
    return batch_s


def _seed_times(seeds: list) -> dict:
    """Seed name -> time of the first island's seed of that name that was timed (and fits)."""
    out: dict = {}
    for named in seeds:
        for name, g in named:
            if math.isfinite(g.time_s):
                out.setdefault(name, g.time_s)
    return out


def _initial_populations(islands: list[GeneticSearch]) -> list:
    """Each island's population: its named seeds, then random genomes up to its size; the seeds per island."""
    seeds = []
    for isl in islands:
        named = isl.seed_genomes()
        seeds.append(named)
        isl.pop = [g for _, g in named]
        while len(isl.pop) < isl.s.population:
            isl.pop.append(isl.random_genome())
    return seeds


def _show_progress(bar, islands: list[GeneticSearch], t0: float) -> None:
    if bar is not None:
        bar.update(1)
        bar.set_postfix(progress_postfix(best_genome(islands).time_s, sum(isl.evaluations for isl in islands),
                                         time.perf_counter() - t0))


def evolve(islands: list[GeneticSearch], budget_s: float = 60.0, generations: int | None = None,
           workers: int | None = None, progress: bool = False, executor: str = "processes",
           ray_address: str | None = None, stop_at_s: float | None = None,
           recompute_first: bool = False, then=None, final_reserve: int = 3) -> SearchResult:
    """Evolve one or more islands that share an evaluator (and its time cache) side by side; each island
    draws only from its own rng, in the same order as alone, and nothing passes between islands but genome
    times (the same for the same key), so each island's search is its search alone at the same generations.
    A generation breeds every island's crossovers (interleaved, evaluated as one batch), then selects each
    island. The result is the fastest island's best genome (the first island's on a tie).
    stop_at_s: the search ends (before `generations`, or the budget) once the best genome is at most this
    fast: the caller passes the lower bound (no genome can beat it), so what is left could not win.
    recompute_first: the first generation times the recompute seeds before the others (seed_order.py).
    then(result, pool): run after the search, before its workers stop (the polish evaluates on them).
    final_reserve: under a budget, the evaluations' time (per worker) kept back for the final plan (planning,
    verifying, predicting: about 2 evaluations' time); 0 where the caller keeps that time itself (planners.py,
    whose polish ends 3 evaluations before the budget: keeping it here too left Inception-4@32 at 15 s a third
    of its search time unused)."""
    ev = islands[0].ev
    assert all(isl.ev is ev for isl in islands), "islands share one evaluator"
    t0 = time.perf_counter()
    seeds = _initial_populations(islands)
    Np = max(isl.s.population for isl in islands)
    n_workers = default_workers() if workers is None else max(1, int(workers))
    if executor == "processes":
        n_workers = min(n_workers, max(1, Np))
    pool = make_pool(ev, executor, n_workers, ray_address)
    bar = _progress_bar(progress, generations)
    gc_was = gc.isenabled()
    gc.disable()                  # evaluations make no reference cycles; collections would only rescan
    known = islands[0].known

    def evaluate(items: list[tuple[GeneticSearch, Genome]]) -> None:
        pending: dict = {}
        for isl in islands:
            isl.submit(pool, [g for i, g in items if i is isl], pending)
        _collect(known, pending)
        for _, g in items:
            g.time_s = known[g.key()]

    # (the hybrid island does not count: recompute off, which runs the others alike, stops where on does, so on
    # stays never slower than off at the same seed and generations, islands.py)
    plain = [isl for isl in islands if isl.name != "hybrid"]
    at_floor = lambda: stop_at_s is not None and best_time(plain) <= stop_at_s   # noqa: E731
    try:
        # every island's seeds before any random genome, the likeliest first (seed_order.py)
        batch_s = _time_first_generation(islands, evaluate, first_generation(islands, seeds, recompute_first),
                               (t0, budget_s) if generations is None else None, n_workers, at_floor, final_reserve)
        seed_times = _seed_times(seeds)
        for isl in islands:
            isl.pop = isl.select(isl.pop, isl.s.population)
        _settle_rivals(islands)
        elapsed = time.perf_counter() - t0
        history = [[0, round(elapsed, 4), best_genome(islands).time_s]]
        per_eval = elapsed / max(1, sum(len(isl.pop) for isl in islands))   # wall seconds per genome, workers included
        # the final plan (planning with actions, verifying, predicting) in one process: measured about 2
        # evaluations' time on BERT-large and BRNN-4-8K; 3 to be safe
        reserve = final_reserve * per_eval * max(1, n_workers)
        cross_s = 4 * per_eval                         # one crossover's 4 children, until one has been timed
        gen = done = 0
        interrupted = False
        try:
            while True:
                if at_floor():
                    break               # at the lower bound: no generation can win
                if generations is not None:
                    if gen >= generations:
                        break
                elif time.perf_counter() - t0 + cross_s + reserve > budget_s:
                    break
                gen += 1
                kids: dict = {id(isl): [] for isl in islands}
                pending: dict = {}
                c_start = time.perf_counter()
                n_cross = [max(1, isl.s.population // 4) if isl.pop else 0 for isl in islands]
                stop = False
                # workers start on a crossover's kids while the next is bred; islands take turns
                for r in range(max(n_cross)):
                    for isl, nc in zip(islands, n_cross):
                        if r >= nc:
                            continue
                        if generations is None and any(kids.values()):
                            # a time budget also bounds a generation: one crossover at a time, stopping when
                            # the next would not end in time (a generation can take minutes on large graphs)
                            _collect(known, pending)
                            cross_s = time.perf_counter() - c_start
                            if time.perf_counter() - t0 + cross_s + reserve > budget_s:
                                stop = True
                                break
                        c_start = time.perf_counter()
                        i, j = isl.rng.choice(len(isl.pop), size=2, replace=len(isl.pop) < 2)
                        new = isl.children(isl.pop[int(i)], isl.pop[int(j)])
                        isl.submit(pool, new, pending)
                        kids[id(isl)].extend(new)
                    if stop:
                        break
                _collect(known, pending)
                for isl in islands:
                    for g in kids[id(isl)]:
                        g.time_s = known[g.key()]
                    isl.pop = isl.select(isl.pop + kids[id(isl)], isl.s.population)
                history.append([gen, round(time.perf_counter() - t0, 4), best_genome(islands).time_s])
                _show_progress(bar, islands, t0)
                done = gen
        except KeyboardInterrupt:      # Ctrl-C: the islands hold their last whole generation; the caller says it was cut
            interrupted = True
        res = SearchResult(best_genome(islands), done, sum(isl.evaluations for isl in islands),
                           time.perf_counter() - t0, history, seed_times, interrupted, batch_s)
        if then is not None:
            then(res, pool)
    finally:
        if gc_was:
            gc.enable()
        pool.close()
        if bar is not None:
            bar.close()
    return res


def progress_postfix(best_s: float, evaluations: int, elapsed_s: float) -> dict:
    """What the progress bar shows after a generation: the best time so far and the evaluation rate (at 10^5
    ops a generation takes minutes, so the rate is what tells a user the search is alive and how fast)."""
    return {"best_s": f"{best_s:.4g}", "evals": evaluations,
            "evals/s": f"{evaluations / max(elapsed_s, 1e-9):.3g}"}


def _progress_bar(progress: bool, generations: int | None):
    """A tqdm bar (generation, best time) on an interactive terminal only."""
    if not progress or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=generations, desc="swapadvisor", unit="gen", file=sys.stderr, leave=False)
