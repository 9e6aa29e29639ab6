"""Host placement as a choice of the search: one gene per op that may run on the host (host_eligible), a
genetic search over those genes seeded from host_policy's candidates, each genome scored by the simulator's
host stream (host_sim.simulate_plan) on the plan its device part gets.

Why an outer search and not a gene inside ga.Genome: which ops run on the host changes the graph the device
plans (host_split.device_graph: the host ops leave it, what they read becomes an output, the parameters they
update become inputs), and the GA's whole state (GraphIndex, its seeds, its walk) is per graph. So a genome
here is a set of host ops, and its score is the simulated time of the device part's plan from the search
planner's seeds (generations=0: what host_policy's candidates were screened with), the host ops put back by
host_split.lift_plan. The operators know the structure that matters for a training step: one op flipped, a
run of ops in graph order (the updates of neighbouring layers, whose gradients come out together) set to one
side, and one-point crossover in graph order (a prefix of one parent, the rest of the other).

Eligible ops (host_split.host_eligible): the optimizer's update kernels, then memory-bound ops whose every
reader is eligible and whose outputs leave the step through no graph output (the gradient scaling or
clipping in front of an update). A genome is repaired before it is scored: an op whose
output a device op would read goes back to the device (host_split.check_host_ops' rule), and the update of
every persistent tensor a host op reads joins it (host_split.close_host_ops).
The host-aware bound (host_bound.py) takes every eligible op as placeable, so it stays a bound of whatever
this search returns.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...graph import DataflowGraph
from ..host_split import close_host_ops, host_eligible

INF = float("inf")
CHILDREN = 4            # genomes bred per generation
KEEP = 4                # the population: the fastest genomes so far
BLOCK_SHARE = 0.125
SEED_SHARE = 0.5        # of a deadline, what the seeds may take before children are bred     # a block mutation sets a run of up to this share of the eligible ops to one side


def repair(graph: DataflowGraph, host) -> list[int]:
    """`host` (op ids) made placeable: an op a device op reads from goes back to the device (latest first, so
    a chain of host ops is judged from its end), then close_host_ops adds the updates they need."""
    cons = graph.consumers()
    on_host = {int(o) for o in host}
    for o in sorted(on_host, reverse=True):
        if any(c not in on_host for t in graph.ops[o].outputs for c in cons[t]):
            on_host.discard(o)
    return close_host_ops(graph, on_host)


@dataclass
class Scored:
    ops: tuple          # the host ops (repaired, sorted)
    time_s: float       # simulated time of its plan (inf: no plan fits)
    plan: object = None
    origin: str = "seed"


@dataclass
class HostSearch:
    """The search over host placements of one planning context (see the module docstring).
    score(ops) -> (seconds, plan or None): the plan of the step with `ops` on the host, simulated."""
    graph: DataflowGraph
    eligible: list
    score: object
    seed: int = 0
    pop: list = field(default_factory=list)
    seen: dict = field(default_factory=dict)
    evaluations: int = 0
    generations: int = 0

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)
        self.index = {o: i for i, o in enumerate(self.eligible)}

    def evaluate(self, ops, origin: str) -> Scored:
        key = tuple(repair(self.graph, ops))
        if key in self.seen:
            return self.seen[key]
        t, plan = self.score(list(key))
        self.evaluations += 1
        s = self.seen[key] = Scored(key, t, plan, origin)
        self.pop = sorted([*self.pop, s], key=lambda x: x.time_s)[:KEEP]
        return s

    def mask(self, ops) -> np.ndarray:
        m = np.zeros(len(self.eligible), dtype=bool)
        m[[self.index[o] for o in ops if o in self.index]] = True
        return m

    def child(self) -> list[int]:
        """One new genome: crossover of two of the population (when it has two), then a mutation."""
        n = len(self.eligible)
        a = self.mask(self.pop[int(self.rng.integers(len(self.pop)))].ops)
        if len(self.pop) > 1 and self.rng.random() < 0.5:
            b = self.mask(self.pop[int(self.rng.integers(len(self.pop)))].ops)
            cut = int(self.rng.integers(1, n)) if n > 1 else 0
            a = np.concatenate([a[:cut], b[cut:]])
        if self.rng.random() < 0.5:                       # one op to the other side
            i = int(self.rng.integers(n))
            a[i] = not a[i]
        else:                                             # a run of neighbours to one side
            length = int(self.rng.integers(1, max(2, int(BLOCK_SHARE * n) + 1)))
            i = int(self.rng.integers(n))
            a[i:i + length] = bool(self.rng.random() < 0.5)
        return [o for o, on in zip(self.eligible, a) if on]

    def generation(self, deadline: float | None = None) -> None:
        """CHILDREN new genomes scored (a child already seen is bred again, up to a few times)."""
        for _ in range(CHILDREN):
            if deadline is not None and time.perf_counter() > deadline:
                return
            for _try in range(8):
                ops = self.child()
                if tuple(repair(self.graph, ops)) not in self.seen:
                    self.evaluate(ops, f"generation {self.generations + 1}")
                    break
        self.generations += 1


def search_host_ops(graph: DataflowGraph, score, seeds: list, deadline: float | None, generations: int | None,
                    seed: int = 0):
    """(best Scored or None, summary dict): the seeds (host_policy's candidates) scored in order while
    `deadline` lasts (the first always), then generations of children (`generations` of them, or until
    `deadline`). score(ops) -> (seconds, plan or None), as HostSearch.score."""
    hs = HostSearch(graph, host_eligible(graph), score, seed)
    tried = []
    t0 = time.perf_counter()
    # under a deadline the seeds get SEED_SHARE of it, the children the rest (a seeds-only plan of a 13B step's
    # device part takes ~8 s on a loaded 2-core machine: the policy's nine seeds alone would take a 60 s budget)
    seeds_until = None if deadline is None else t0 + SEED_SHARE * max(0.0, deadline - t0)
    for c in seeds:
        if tried and seeds_until is not None and time.perf_counter() > seeds_until:
            break
        s = hs.evaluate(c, "seed")
        tried.append({"host_ops": len(s.ops), "time_s": None if s.time_s == INF else s.time_s})
    seeds_best = hs.pop[0].time_s if hs.pop else INF
    while hs.pop and hs.eligible and hs.pop[0].time_s < INF:
        if generations is not None and hs.generations >= generations:
            break
        if generations is None and (deadline is None or time.perf_counter() > deadline):
            break
        hs.generation(deadline if generations is None else None)
    best = hs.pop[0] if hs.pop and hs.pop[0].time_s < INF else None
    summary = {"eligible": len(hs.eligible), "evaluations": hs.evaluations, "generations": hs.generations,
               "seeds_best_s": None if seeds_best == INF else seeds_best, "tried": tried,
               "best_from": None if best is None else best.origin}
    return best, summary
