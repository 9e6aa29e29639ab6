"""The arena's size under a limit and the least any arena can be (schedule-free)."""
from __future__ import annotations

import numpy as np

from ...graphindex import GraphIndex


def arena_bytes_for(gi: GraphIndex, mem_limit: int) -> int:
    """The arena's size under `mem_limit`: the limit less the workspace reserve, rounded down to alignment."""
    a = gi.alignment
    return max(0, (int(mem_limit) - gi.workspace) // a * a)


def working_set_floor(gi: GraphIndex) -> int:
    """The largest op's own aligned bytes (inputs + outputs, less what running in place saves): no arena can
    be smaller."""
    per_op = np.add.reduceat(gi.size[gi.op_tensors], gi.op_ptr[:-1]) if len(gi.op_tensors) else np.zeros(0)
    per_op = np.where(np.diff(gi.op_ptr) > 0, per_op, 0)
    if len(per_op):
        per_op = per_op - gi.graph.inplace_savings(gi.size)
    return int(per_op.max(initial=0))
