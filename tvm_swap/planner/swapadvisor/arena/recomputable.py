"""Which tensors the walk may drop and recompute instead of copying out and back (the recompute genes' domain),
and what a recompute writes again beside its tensor."""
from __future__ import annotations

import numpy as np

from ...graphindex import ROLE_TEMP, GraphIndex
from ...recompute import multi_output_recomputable, recomputable_ops


def recompute_candidates(gi: GraphIndex) -> np.ndarray:
    """Per tensor: produced, temporary (not a result or update: those get a host copy anyway) and made by an
    op that may be recomputed (planner.recompute.recomputable_ops), or the first output of one that may be
    recomputed for it (multi_output_recomputable: its other outputs temporaries too, see `secondaries`)."""
    g = gi.graph
    sec = secondaries(gi)
    ok_op = recomputable_ops(g)
    prod = g.producer()
    return np.array([prod[t] >= 0 and int(gi.role[t]) == ROLE_TEMP
                     and (ok_op[int(prod[t])] or (bool(sec[int(prod[t])]) and g.ops[int(prod[t])].outputs[0] == t))
                     for t in range(gi.n_tensors)], dtype=bool)


def secondaries(gi: GraphIndex) -> list[tuple]:
    """Per op: the outputs a recompute for its first output writes again beside it (its other outputs), for
    the ops planner.recompute.multi_output_recomputable allows whose outputs are all temporaries; () for
    the rest. The walk drops a resident secondary and places it anew with the recompute (same value)."""
    g = gi.graph
    ok = multi_output_recomputable(g)
    role = gi.role
    return [tuple(op.outputs[1:]) if ok[op.id] and all(int(role[t]) == ROLE_TEMP for t in op.outputs) else ()
            for op in g.ops]


def cheap_to_recompute(gi: GraphIndex, op_time, device, fraction: float = 1.0) -> np.ndarray:
    """Per tensor: its producer's time is below `fraction` of the time its copy out and back takes on the link."""
    g = gi.graph
    prod = g.producer()
    t_op = np.where(prod >= 0, np.asarray(op_time, dtype=np.float64)[np.maximum(prod, 0)], np.inf)
    link = gi.size / float(device.d2h_bandwidth) + gi.size / float(device.h2d_bandwidth)
    return t_op < fraction * link

