"""The GA's fitness in arena mode (ArenaScorer): the simulated time of a genome's arena plan, packed for the
simulator straight from the decisions and placement (packed_builder.pack_decisions with byte ranges),
without building Action objects. Measurements: notes/arena.md."""
from __future__ import annotations

import numpy as np

from ....errors import PlanError
from ...graphindex import GraphIndex
from ...simulator import simulate_time
from ..packed_builder import pack_decisions
from .decide import decide_arena
from .genes import ArenaGenes, class_genome


class ArenaScorer:
    """Simulated time of the arena plan of (schedule, genes): the GA's fitness in arena mode."""

    def __init__(self, gi: GraphIndex, mem_limit: int, op_time, device):
        self.gi, self.mem_limit, self.device = gi, int(mem_limit), device
        self.op_time = np.asarray(op_time, dtype=np.float64)
        self.nbytes = gi.graph.tensor_bytes().astype(np.float64)
        self._classes: dict = {}   # class genome's type -> the size-class scorer, built at its first genome

    def packed(self, schedule, genes: ArenaGenes):
        """The simulator's arrays of plan_arena's actions, without building them: the same decisions and
        placement, packed with the arena's dep rule (packed_builder.pack_decisions with ranges)."""
        from ...gc_pause import gc_paused

        gi = self.gi
        schedule = np.asarray(schedule, dtype=np.int64)
        classes = class_genome(genes)
        if classes is not None:
            return self._class_scorer(classes).packed(schedule, classes)
        with gc_paused():
            try:
                walk, d, offsets, sizes, _, _ = decide_arena(gi, schedule, self.mem_limit, genes, self.op_time,
                                                             self.device)
            except PlanError:
                if not genes.recomputes():
                    raise
                # as plan_arena: recompute genes whose plan does not fit are planned without recompute
                genes = genes.copy()
                genes.recompute = None
                walk, d, offsets, sizes, _, _ = decide_arena(gi, schedule, self.mem_limit, genes, self.op_time,
                                                             self.device)
            return pack_decisions(walk.n, schedule, d.out_stays, d.swap_outs, d.drops, d.swap_ins, gi.op_ptr,
                                  gi.op_tensors, gi.op_nin, self.op_time, self.nbytes, ranges=(offsets, sizes),
                                  recomputes=d.recomputes)

    def _class_scorer(self, alloc):
        """The size-class scorer for class genomes like `alloc` (same decisions and deps as _plan_with_classes),
        over the index its kind plans on (encoding.class_index: kept updated params, the wrap index, or none)."""
        kind = type(alloc)
        if kind not in self._classes:
            from ..encoding import AllocationSpace, class_index
            from ..swapplan import SwapPlanScorer

            gi = class_index(self.gi, alloc)
            self._classes[kind] = SwapPlanScorer(gi, AllocationSpace(gi, self.mem_limit), self.op_time, self.device)
        return self._classes[kind]

    def time_of(self, schedule, genes: ArenaGenes) -> float:
        return float(simulate_time(self.packed(schedule, genes), self.device))

    def rebuilt(self, schedule, genes: ArenaGenes) -> list[int]:
        """The tensors the arena plan of (schedule, genes) drops and rebuilds: each recompute's first output,
        the tensor whose recompute gene chose it (none when the genes' plan does not fit with recomputes, and
        plan_arena plans them without)."""
        from ...gc_pause import gc_paused

        if class_genome(genes) is not None or not genes.recomputes():
            return []
        with gc_paused():
            try:
                d = decide_arena(self.gi, np.asarray(schedule, dtype=np.int64), self.mem_limit, genes,
                                 self.op_time, self.device).decisions
            except PlanError:
                return []
        ops = self.gi.graph.ops
        return sorted({ops[op].outputs[0] for _, op, _ in d.recomputes})
