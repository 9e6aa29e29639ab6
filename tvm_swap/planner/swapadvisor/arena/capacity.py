"""The arena's size under a limit and the least any arena can be (schedule-free)."""
from __future__ import annotations

import numpy as np

from ...graphindex import GraphIndex


def arena_bytes_for(gi: GraphIndex, mem_limit: int) -> int:
    """The arena's size under `mem_limit`: the limit less the workspace reserve, rounded down to alignment."""
    a = gi.alignment
    return max(0, (int(mem_limit) - gi.workspace) // a * a)


def op_bytes(gi: GraphIndex) -> np.ndarray:
    """Each op's aligned bytes touched (inputs + outputs), kept with the index: the schedule-free floor below
    and every walk's floor (walk.ArenaWalk.floor) start from them (a Python sum per op and walk was ~2% of the
    fuzz's CPU). Read-only to callers."""
    got = gi.__dict__.get("_op_bytes")
    if got is None:
        cum = np.concatenate([[0], np.cumsum(gi.size[gi.op_tensors], dtype=np.int64)])
        got = gi.__dict__["_op_bytes"] = cum[gi.op_ptr[1:]] - cum[gi.op_ptr[:-1]]
    return got


def working_set_floor(gi: GraphIndex) -> int:
    """The largest op's own aligned bytes (inputs + outputs, less what running in place saves): no arena can
    be smaller."""
    per_op = op_bytes(gi)
    if len(per_op):
        per_op = per_op - gi.graph.inplace_savings(gi.size)
    return int(per_op.max(initial=0))
