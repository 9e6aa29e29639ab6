"""What every planner gets: the graph, per-op times, the device, the limit and the search settings."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..cost.devices import DeviceSpec
from ..graph import DataflowGraph
from ..plan import DEFAULT_ALIGNMENT, aligned_bytes


@dataclass
class PlanningContext:
    graph: DataflowGraph
    op_time: np.ndarray            # seconds per op, indexed by op id
    device: DeviceSpec
    mem_limit: int                 # bytes: pool + workspace must fit
    alignment: int = DEFAULT_ALIGNMENT
    seed: int = 0
    budget_s: float = 60.0         # wall-clock search budget
    generations: int | None = None  # if set, stop after this many generations (reproducible runs)
    workers: int | None = None     # processes for parallel evaluation; None = all cores
    progress: bool = False         # show a progress bar on a terminal
    options: dict = field(default_factory=dict)  # planner-specific knobs
    pool: str = "size-classes"     # device memory model: "arena" or "size-classes"

    def aligned(self, nbytes: int) -> int:
        return aligned_bytes(nbytes, self.alignment)
