"""The smallest memory limit our pool model can meet, found exactly.

A pool groups the sorted unique aligned tensor sizes TS into contiguous size classes (monotone CLS).
Every op must have all of its distinct tensors resident at once, so class g needs at least
M(g) = max over ops of how many of the op's tensors fall in g objects of size max(g). The cheapest pool
is the grouping minimising sum_g max(g) * M(g); the limit also has to hold the largest op workspace.

The 1-D partition DP f[j] = min_i f[i] + TS[j-1] * M(i, j) is fast because
- f is non-decreasing (dropping the largest sizes never costs more), so over the i with M(i, j) = v
  the smallest such i is best;
- M(i, j) >= v exactly when some op has v of its sorted size indices inside [i, j): a window of v
  consecutive indices (lo, hi) with lo >= i and hi < j. For each v the largest usable lo as a function
  of j is a prefix max over windows, computed with numpy over all ops at once.
So each j costs O(V) for V = the most tensors one op touches.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import DataflowGraph
from .graphindex import GraphIndex


@dataclass
class MinimalPool:
    """The cheapest feasible pool: `cls` maps size index -> class, `count` = objects per class (= need)."""
    cls: np.ndarray
    count: np.ndarray
    class_bytes: np.ndarray
    pool_bytes: int        # objects only
    limit: int             # pool_bytes + workspace


def _best_lo_tables(gi: GraphIndex) -> np.ndarray:
    """B[v, j] = the largest lo of a window of v+1 tensors of one op lying inside sizes [lo, j), or -1."""
    m = gi.num_sizes
    per_op = np.diff(gi.op_ptr)
    V = int(per_op.max()) if len(per_op) else 0
    B = np.full((V + 1, m + 1), -1, dtype=np.int64)
    ops, sizes = gi.pair_op, gi.pair_size           # sorted by op then size: each op's sizes ascending
    if len(ops) == 0:
        return B
    start_of_op = np.zeros(gi.n_ops + 1, dtype=np.int64)
    np.cumsum(per_op, out=start_of_op[1:])
    rank = np.arange(len(ops)) - start_of_op[ops]   # position of each entry within its op
    for v in range(1, V + 1):
        # windows of v consecutive entries of one op: (lo = sizes[k], hi = sizes[k + v - 1])
        k = np.flatnonzero(rank + v <= per_op[ops])
        lo, hi = sizes[k], sizes[k + v - 1]
        best_at_hi = np.full(m, -1, dtype=np.int64)
        np.maximum.at(best_at_hi, hi, lo)
        # usable for prefix [.., j) when hi < j: prefix max shifted by one
        B[v - 1, 1:] = np.maximum.accumulate(best_at_hi)
    return B


def minimal_pool(graph_or_index: DataflowGraph | GraphIndex, alignment: int = 256) -> MinimalPool:
    """The cheapest pool that holds every op's tensors at once (see the module docstring)."""
    gi = graph_or_index if isinstance(graph_or_index, GraphIndex) else GraphIndex.build(graph_or_index, alignment)
    m = gi.num_sizes
    if m == 0:
        z = np.zeros(0, dtype=np.int64)
        return MinimalPool(z, z, z, 0, gi.workspace)
    B = _best_lo_tables(gi).tolist()
    V = len(B) - 1
    ts = gi.ts.tolist()
    f = [0] * (m + 1)
    choice = [0] * (m + 1)
    for j in range(1, m + 1):
        s = ts[j - 1]
        best, arg = None, 0
        for v in range(1, V + 1):
            i = B[v][j] + 1                 # smallest i with M(i, j) <= v
            if i > j - 1:
                continue                    # even the single size j-1 needs more than v objects
            cost = f[i] + s * v
            if best is None or cost < best:
                best, arg = cost, i
        f[j], choice[j] = best, arg
    # walk the choices back into groups
    bounds = []
    j = m
    while j > 0:
        bounds.append((choice[j], j))
        j = choice[j]
    bounds.reverse()
    cls = np.zeros(m, dtype=np.int64)
    for c, (i, j) in enumerate(bounds):
        cls[i:j] = c
    need = gi.class_need(cls)
    class_bytes = gi.ts[[j - 1 for _, j in bounds]]
    pool_bytes = int((class_bytes * need).sum())
    assert pool_bytes == f[m], "feasibility DP disagrees with the grouping it chose"
    return MinimalPool(cls, need, class_bytes, pool_bytes, pool_bytes + gi.workspace)


def min_feasible_limit(graph: DataflowGraph | GraphIndex, alignment: int = 256) -> int:
    """The smallest mem_limit (bytes) at which a size-class pool can hold every op's inputs and outputs
    at once, plus the largest op workspace. Every planner can plan at any limit at or above it. (Kept with a
    DataflowGraph per alignment: the refusal checks and the baselines ask it again and again.)"""
    if isinstance(graph, DataflowGraph):
        key = ("min_feasible_limit", int(alignment))
        if key not in graph._cache:
            graph._cache[key] = int(minimal_pool(graph, alignment).limit)
        return graph._cache[key]
    return minimal_pool(graph, alignment).limit
