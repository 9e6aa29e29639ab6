"""Updated params kept on the device across the iteration boundary only: the "wrap" index.

A training step updates each weight after its last gradient; a network's first layers are updated last (the
backward pass ends there) and read first (the forward pass starts there). Copying those updates to the host
at the end of the iteration and reading them back at its start puts copies where nothing overlaps them: on
BRNN-4-8K@64 the updates of l0 and the embedding left 10 GiB to copy out after the last kernel (0.36 s of the
iteration after it) and the first kernels waited 0.26 s for the same weights to come back. Keeping every
updated param (keep_updated=True) costs more than it saves there (16.4 s against 13.98 s on the searched
genome: the kept updates hold the 1 GiB class through the backward pass).

The wrap index keeps only the pairs whose update is made within WRAP_GAP_FRACTION of the iteration's end plus
whose old value is first read within the same distance of its start (on the graph's own order), and marks the
index `early_out`: a kept param the walk evicts mid-iteration (read in the forward pass, again in the backward
pass) is copied to the host at the start of the iteration, where the host link is idle, instead of its update
at the end (swapplan._Walk). Every other update goes to the host as with keep_updated=False. Measured on the
searched BRNN-4-8K@64 genome: 13.98 s -> 13.48 s (the 4 pairs this rule picks; keeping the first 2 by that
distance: 13.64 s, 8: 13.78, 16: 14.52; without the early copy-out, 2/4/8: 13.81/13.72/13.72).

Where the search meets it: the polish moves a size-class winner onto this index (polish_classes.wrap_move), one
evaluation. As an island of its own (the size-class search over WrapAllocations) it cost 64 more evaluations at
3 generations on BRNN-4-8K@64 and ended at 14.08 s, slower than the plain island's 13.99 s, so it is not one.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..graph import DataflowGraph
from .graphindex import ROLE_KEEP_NEW, GraphIndex

WRAP_GAP_FRACTION = 0.02   # a pair is kept when (ops after its update) + (ops before its first read) <= this x ops


def wrap_pairs(gi: GraphIndex) -> list[tuple[int, int]]:
    """(param, update) pairs of a keep_updated index whose update is made last and param read first, on the
    graph's own order (op ids): the pairs the wrap index keeps."""
    n = gi.n_ops
    prod_op = np.full(gi.n_tensors, -1, dtype=np.int64)
    outs = np.arange(len(gi.op_tensors)) - np.repeat(gi.op_ptr[:-1], np.diff(gi.op_ptr)) \
        >= np.repeat(gi.op_nin, np.diff(gi.op_ptr))
    prod_op[gi.op_tensors[outs]] = np.repeat(np.arange(n, dtype=np.int64), np.diff(gi.op_ptr))[outs]
    limit = WRAP_GAP_FRACTION * n
    out = []
    for new in np.flatnonzero(gi.role == ROLE_KEEP_NEW).tolist():
        old = int(gi.old_of[new])
        a, b = gi.reader_ptr[old], gi.reader_ptr[old + 1]
        if b == a or prod_op[new] < 0:
            continue
        if (n - 1 - prod_op[new]) + int(gi.readers[a]) <= limit:
            out.append((old, int(new)))
    return out


def wrap_index(graph: DataflowGraph, alignment: int = 256) -> GraphIndex | None:
    """The keep_updated index with only wrap_pairs kept and early_out set (None when no pair qualifies, or
    every one does: the keep_updated index then keeps the same pairs), cached with the graph."""
    key = ("graph_index_wrap", int(alignment))
    if key in graph._cache:
        return graph._cache[key]
    kept = GraphIndex.of(graph, alignment, keep_updated=True)
    plain = GraphIndex.of(graph, alignment, keep_updated=False)
    pairs = wrap_pairs(kept)
    n_pairs = int((kept.old_of >= 0).sum())
    gi = None
    if 0 < len(pairs) < n_pairs:
        role, old_of = kept.role.copy(), kept.old_of.copy()
        chosen = {new for _, new in pairs}
        for new in np.flatnonzero(old_of >= 0).tolist():
            if new not in chosen:
                old = int(old_of[new])
                role[old], role[new], old_of[new] = plain.role[old], plain.role[new], -1
        gi = dataclasses.replace(kept, role=role, old_of=old_of, early_out=True)
    graph._cache[key] = gi
    return gi
