"""The memory side of an arena genome (ArenaGenes) and the genetic operators over it (ArenaSpace)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....errors import InfeasibleLimitError
from ...graphindex import GraphIndex
from ...recompute import MAX_CHAIN_DEPTH
from . import tuning
from .pairs import pair_candidates
from .recomputable import cheap_to_recompute, recompute_candidates


@dataclass
class ArenaGenes:
    """What the genetic search tunes besides the schedule (see ArenaSpace for why these two).

    headroom: fraction of the arena the walk leaves unplanned (placement slack; fewer retries and
    fewer copies cut short by fragmentation). keep: how much of what the largest op leaves of the capacity
    goes to updated params that stay on the device between iterations (a kept pair holds bytes only while its
    old value or its update is alive: see pairs.py and layout.py); 0 reads
    every updated param from the host; above 1, pairs that do not fit beside every op are kept too (they
    leave when room is short and come back by the end; pairs.choose_pairs). split: a soft
    partition (what size classes give the paper's pool): when room is needed, the group (params and optimizer
    state / everything else) over its share of the capacity gives up a victim first; < 0 is one Belady
    over all. bias: per tensor, slots added to its next use when
    choosing a victim (> 0: evicted sooner, < 0: kept longer); all zeros is Belady. recompute: per tensor, when
    it is evicted, drop it and recompute it at its next use instead of copying it out and back (where the
    walk allows it, see soundness.py); None (or all False) is SwapAdvisor's swap-only plan. partly: placement
    may also cool only some stays (cooling.partly_cooled; constant within a genome space: the partly-cooled island)."""
    headroom: float
    bias: np.ndarray
    keep: float = 0.0      # share of the room beside the largest op for kept updated params (ping-pong pairs)
    split: float = -1.0    # share of the capacity protected for params and optimizer state (< 0: shared)
    recompute: np.ndarray | None = None   # bool per tensor: swap (False) or drop + recompute (True) when evicted
    classes: object = None  # an encoding.Allocation: plan with these size classes laid out in the arena
    depth: int = MAX_CHAIN_DEPTH  # recomputes a rebuild chain may take (with recompute genes; see soundness.py)
    partly: bool = False   # small instances: a placement cooling only some stays may win (cooling.partly_cooled)

    def key(self) -> bytes:
        rc = b"" if self.recompute is None else b"|rc|" + np.packbits(self.recompute).tobytes() \
            + (b"" if self.depth == MAX_CHAIN_DEPTH else b"|d%d" % self.depth)
        k = (np.float64(self.headroom).tobytes() + np.float64(self.keep).tobytes()
             + np.float64(self.split).tobytes() + self.bias.tobytes() + rc + (b"|partly" if self.partly else b""))
        return k if self.classes is None else k + b"|classes|" + b"|".join(self.classes.key())

    def recomputes(self) -> bool:
        return self.recompute is not None and bool(self.recompute.any())

    def is_plain(self) -> bool:
        """Belady with no headroom, nothing kept, no split, no recompute: the no-search genome."""
        return self.headroom == 0 and self.keep <= 0 and self.split < 0 and not self.bias.any() \
            and self.classes is None and not self.recomputes()

    def copy(self) -> "ArenaGenes":
        return ArenaGenes(headroom=float(self.headroom), bias=self.bias.copy(), keep=float(self.keep),
                          split=float(self.split),
                          recompute=None if self.recompute is None else self.recompute.copy(),
                          classes=None if self.classes is None else self.classes.copy(), depth=int(self.depth),
                          partly=self.partly)

    @staticmethod
    def plain(n_tensors: int) -> "ArenaGenes":
        """The no-search genome: Belady, no headroom, nothing kept, no split, no recompute."""
        return ArenaGenes(headroom=0.0, bias=np.zeros(n_tensors, dtype=np.int64))


class ArenaSpace:
    """The arena genomes of one graph under one limit, with their genetic operators.

    Why these genes (the arena counterpart of the paper's CLS/CNT): with one region, what remains to
    decide on the memory side is *who leaves* when room is short, and how much slack the placement gets.
    Belady alone ignores that bringing a tensor back costs its size on the link while recomputing nothing
    else: per-tensor biases let the search keep the tensors whose copies hurt (e.g. large ones read soon
    after a burst of other copies) and evict others earlier; the headroom trades capacity for placements
    that fit at the first try."""

    MAX_HEADROOM = 0.15
    # seeds tried with the default schedule only (GeneticSearch.seed_genomes gives the others three schedules):
    # recomputing every candidate lost to recomputing the cheap ones on every schedule of BERT-large@32 and
    # WResNet-152-10@64 at 16 GB, so two more evaluations of it would only delay the search
    DEFAULT_SCHEDULE_ONLY = frozenset({"recompute-all"})

    def __init__(self, gi: GraphIndex, mem_limit: int, recompute: bool = False, op_time=None, device=None,
                 partly: bool = False):
        self.gi = gi
        self.partly = partly                     # every genome of this space has partly set (its own island)
        self.mem_limit = int(mem_limit)
        self.n_t = gi.n_tensors
        self.scale = max(1, gi.n_ops // 8)       # a bias moves a next use by up to ~1/8 of the iteration
        self.has_pairs = bool(pair_candidates(gi))
        # recompute genes only where a drop could be recomputed at all (planner.recompute); the cheap ones
        # (rebuilding costs less compute time than the two copies take on the link) seed the search
        self.rc_able = recompute_candidates(gi) if recompute else None
        self.rc_cheap = self.rc_cheapest = None
        if self.rc_able is not None and op_time is not None and device is not None:
            self.rc_cheap = self.rc_able & cheap_to_recompute(gi, op_time, device)
            self.rc_cheapest = self.rc_able & cheap_to_recompute(gi, op_time, device,
                                                                 tuning.MEMORY_BOUND_FRACTION)
        self._classes = None                     # AllocationSpace, for class genomes (see class_seeds)

    def zero(self, headroom: float = 0.0, keep: float = 0.0) -> ArenaGenes:
        rc = None if self.rc_able is None else np.zeros(self.n_t, dtype=bool)
        return ArenaGenes(headroom=float(headroom), bias=np.zeros(self.n_t, dtype=np.int64), keep=float(keep),
                          split=-1.0, recompute=rc, partly=self.partly)

    def seeds(self) -> list[tuple[str, ArenaGenes]]:
        out = [("nosearch", self.zero())]
        classes = self.class_seeds()
        out += classes[:1] + [("headroom3", self.zero(0.03))]
        if self.has_pairs:
            out += [("keep50", self.zero(0.0, 0.5)), ("keepall", self.zero(0.0, 1.0)),
                    ("keepall-evictable", self.zero(0.0, 2.0))]
        if self.rc_able is not None and self.rc_able.any():     # the swap-only seeds above stay: never worse
            every = self.zero()
            every.recompute = self.rc_able.copy()
            out.append(("recompute-all", every))
            if self.rc_cheap is not None and self.rc_cheap.any():
                cheap = self.zero()
                cheap.recompute = self.rc_cheap.copy()
                out.append(("recompute-cheap", cheap))
                deep = cheap.copy()
                deep.depth = tuning.DEEP_SEED_DEPTH
                out.append(("recompute-cheap-deep", deep))
            if self.rc_cheapest is not None and self.rc_cheapest.any() \
                    and not np.array_equal(self.rc_cheapest, self.rc_cheap):
                # memory-bound kernels only, in deep chains: recomputing convolutions as well (the cheap
                # seeds) costs more compute than their copies cost where the link has time to spare
                # (Inception-4@32: 0.93 of ideal against 0.985 with no search); NasNet-25@16 rebuilds its
                # ReLU outputs through batch norms from the pointwise convolutions' outputs (0.62 -> 0.87)
                mb = self.zero()
                mb.recompute = self.rc_cheapest.copy()
                mb.depth = tuning.DEEP_SEED_DEPTH
                out.append(("recompute-memory-bound", mb))
        return out + classes[1:]

    def class_seeds(self) -> list[tuple[str, ArenaGenes]]:
        """The paper's pool as arena genomes: a size-class pool is an arena placement whose objects never
        overlap, so the arena search also starts from size-class plans (geometric2 and the minimal pool,
        no updated param kept: the arena's periodicity rule); their children stay class genomes and search
        the schedule and the pool (CLS/CNT mutation)."""
        try:
            sp = self._class_space()
        except InfeasibleLimitError:        # below the size-class floor: an arena limit only
            return []
        out = []
        for name, a in (("classes-geometric2", sp.geometric(2.0)), ("classes-minimal", sp.minimal_pool())):
            g = self.zero()
            g.classes = a
            out.append((name, g))
        return out

    def random(self, rng: np.random.Generator) -> ArenaGenes:
        g = self.zero(float(rng.uniform(0, self.MAX_HEADROOM / 2)),
                      float(rng.uniform(0, tuning.MAX_KEEP)) if self.has_pairs else 0.0)
        pick = rng.random(self.n_t) < float(rng.uniform(0.0, 0.2))
        g.bias[pick] = rng.integers(-self.scale, self.scale + 1, size=int(pick.sum()))
        if self.rc_able is not None:
            g.recompute = self.rc_able & (rng.random(self.n_t) < float(rng.uniform(0.0, 1.0)))
            g.depth = int(rng.integers(1, tuning.MAX_DEPTH_GENE + 1))
        return g

    def crossover(self, a: ArenaGenes, b: ArenaGenes, rng: np.random.Generator) -> tuple[ArenaGenes, ArenaGenes]:
        cut = int(rng.integers(0, self.n_t + 1))
        k1 = ArenaGenes(headroom=a.headroom, bias=np.concatenate((a.bias[:cut], b.bias[cut:])), keep=b.keep,
                        split=a.split, classes=a.classes, partly=a.partly)
        k2 = ArenaGenes(headroom=b.headroom, bias=np.concatenate((b.bias[:cut], a.bias[cut:])), keep=a.keep,
                        split=b.split, classes=b.classes, partly=b.partly)
        if a.recompute is not None and b.recompute is not None:
            k1.recompute = np.concatenate((a.recompute[:cut], b.recompute[cut:]))
            k2.recompute = np.concatenate((b.recompute[:cut], a.recompute[cut:]))
            k1.depth, k2.depth = a.depth, b.depth
        return k1, k2

    def mutate(self, a: ArenaGenes, rng: np.random.Generator, p_bias: float = 0.02, p_head: float = 0.3,
               sigma: float = 0.02) -> ArenaGenes:
        g = a.copy()
        pick = rng.random(self.n_t) < p_bias
        if pick.any():
            # half of the redrawn biases return to Belady, so the search can also undo them
            draw = rng.integers(-self.scale, self.scale + 1, size=int(pick.sum()))
            draw[rng.random(len(draw)) < 0.5] = 0
            g.bias[pick] = draw
        if rng.random() < p_head:
            g.headroom = float(np.clip(rng.normal(g.headroom, sigma), 0.0, self.MAX_HEADROOM))
        if self.has_pairs and rng.random() < p_head:
            g.keep = float(np.clip(rng.normal(g.keep, 0.15), 0.0, tuning.MAX_KEEP))
        if rng.random() < p_head / 2:
            g.split = -1.0 if g.split >= 0 and rng.random() < 0.5 else float(rng.uniform(0.2, 0.8))
        if g.recompute is not None:
            flip = self.rc_able & (rng.random(self.n_t) < p_bias)
            g.recompute = g.recompute ^ flip
            if rng.random() < p_head / 2:
                g.depth = int(np.clip(g.depth + rng.choice((-2, -1, 1, 2)), 1, tuning.MAX_DEPTH_GENE))
        if g.classes is not None:
            # a class genome also searches its pool, with the paper's CLS/CNT mutation (ga.GASettings' rates)
            g.classes = self._class_space().mutate(g.classes, rng, 0.1, 0.3, 0.25)
        return g

    def _class_space(self):
        """The size-class encoding of this graph and limit (InfeasibleLimitError below its floor)."""
        if self._classes is None:
            from ..encoding import AllocationSpace

            self._classes = AllocationSpace(self.gi, self.mem_limit)
        return self._classes


def class_genome(genes):
    """The size-class Allocation a memory genome plans with, or None (an arena genome). A genome is either
    ArenaGenes (with `classes` set: a class genome of the arena search) or a size-class Allocation itself (the
    size-class search run as an island of the arena search, islands.size_class_island): both plan as
    swapplan.plan_swaps with the pool's objects laid side by side in the arena."""
    if genes is None:
        return None
    return genes.classes if isinstance(genes, ArenaGenes) else genes
