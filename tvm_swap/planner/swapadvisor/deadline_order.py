"""A schedule for training steps: each op run for the first parameter update it leads to ("deadline" order).

Graph orders interleave independent backward chains: a bidirectional RNN's layer runs both directions'
backward steps side by side, so both directions' transposed weights and gradient accumulators (1 GiB each on
BRNN-4-8K) hold the device at once, and their updates come together at the layer's end, where the link must
copy every updated weight and momentum out and bring the next layer's weights in at the same time (issue 28:
both link directions 60-100% busy at each backward layer boundary, 0.24-0.44 s of stalls per second there).

Earliest deadline first, with the updates as deadlines: an op's deadline is the parent rank of the first update
it leads to (the earliest update among its descendants, itself included; an op that leads to no update, such as
the loss, runs as soon as it is ready, so what it reads is not held for it); list scheduling runs the ready op
with the earliest deadline, ties in parent order. So each update's chain runs to the end before the next one's
starts: one direction's backward, then its updates (whose copies then overlap the other direction's kernels),
then the other direction's; each update right after its last gradient. The forward pass leads to the first update as a whole and keeps the parent's order.

Where the search meets it: the polish's last move (polish_schedule.py). Measured on BRNN-4-8K@64 at 16 GB
(v100-16gb; `python -m bench deadline-seed`): every arena and size-class seed faster on the deadline order of the
graph order (no search: nosearch 15.50 -> 12.42 s, 0.709 -> 0.885 of ideal); the 3-generation plan's genome
13.47 s on its searched schedule, 11.58 s on that schedule's deadline order (0.949).
"""
from __future__ import annotations

import heapq

import numpy as np

from ..graphindex import GraphIndex

NO_DEADLINE = np.iinfo(np.int64).max


def update_deadlines(gi: GraphIndex, parent: np.ndarray) -> np.ndarray:
    """Per op: the parent rank of the first update op it leads to (itself included), NO_DEADLINE for none.
    An update op writes a tensor that replaces a param next iteration (graph.updates)."""
    n = gi.n_ops
    parent = np.asarray(parent, dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[parent] = np.arange(n)
    prod = gi.graph.producer()
    upd = np.unique(prod[np.fromiter(gi.graph.updates, dtype=np.int64, count=len(gi.graph.updates))])
    upd = upd[upd >= 0]
    key = np.full(n, NO_DEADLINE, dtype=np.int64)
    key[upd] = rank[upd]
    key_l = key.tolist()
    succ_ptr, succ = gi.succ_ptr.tolist(), gi.succ.tolist()
    for o in reversed(parent.tolist()):          # successors before their predecessors
        k = key_l[o]
        for j in range(succ_ptr[o], succ_ptr[o + 1]):
            ks = key_l[succ[j]]
            if ks < k:
                k = ks
        key_l[o] = k
    return np.asarray(key_l, dtype=np.int64)


def deadline_schedule(gi: GraphIndex, parent: np.ndarray) -> np.ndarray:
    """`parent` (a topological order) list-scheduled by update deadline (see the module docstring); the parent
    itself where the graph updates nothing."""
    parent = np.asarray(parent, dtype=np.int64)
    n = gi.n_ops
    if n == 0 or not gi.graph.updates:
        return parent.copy()
    key = update_deadlines(gi, parent)
    key = np.where(key == NO_DEADLINE, -1, key).tolist()
    rank = np.empty(n, dtype=np.int64)
    rank[parent] = np.arange(n)
    rank_l = rank.tolist()
    succ_ptr, succ = gi.succ_ptr.tolist(), gi.succ.tolist()
    deg = gi.indeg.tolist()
    ready = [(key[o], rank_l[o], o) for o in range(n) if deg[o] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, o = heapq.heappop(ready)
        out.append(o)
        for j in range(succ_ptr[o], succ_ptr[o + 1]):
            s = succ[j]
            deg[s] -= 1
            if deg[s] == 0:
                heapq.heappush(ready, (key[s], rank_l[s], s))
    return np.asarray(out, dtype=np.int64)

