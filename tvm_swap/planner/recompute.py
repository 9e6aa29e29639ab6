"""Which ops may be recomputed, and the chain-depth bound the planners that recompute on demand obey
(recompute-only, swapadvisor with recompute on; checkpoint-sqrt rebuilds whole segments by design, see
baselines/checkpoint.py).

Randomness. Recomputing an op must give the bits the original run gave. No op in our IR draws random
numbers: the MXNet importer turns `Dropout` (training mode) into the identity, PyTorch models are exported in
eval mode (dropout off), and the zoo's BERT, RNN and CNN generators build no dropout (`tvm_swap/zoo/models`).
So every kernel of our graphs is a pure function of its inputs and qualifies. A kernel whose name says it
draws random numbers (dropout, random, rng, philox, bernoulli, multinomial, uniform, normal_) without explicit
seed/offset inputs would not be pure in our IR; `is_pure` refuses those names, so such an op is never
recomputed, should a frontend ever emit one.

What else may keep an op from being recomputed (the planners check these; `tvm_swap.verify` checks the
result): it must have exactly one output (a recompute writes every output, and another output may still be
live), or be an op `multi_output_recomputable` allows, recomputed for its first output (the arena planner
then places its other outputs anew beside it); it must not read a param whose update is computed before the rebuilt value is needed (the update
may replace the param's value); the recompute's inputs must be resident when it runs, each brought back
by a swap-in or itself rebuilt, at most `MAX_CHAIN_DEPTH` recomputes deep (the default: the arena planner's
search tunes the depth per genome, 1 to swapadvisor.arena.MAX_DEPTH_GENE).
"""
from __future__ import annotations

import re

from ..graph import DataflowGraph

# A dropped tensor is rebuilt by a chain of at most this many recomputes (its own included): each input of
# a recompute is resident, has a host copy, or was itself dropped with a chain at most one shorter.
# Deeper chains save little memory (the intermediate results need room while the chain runs) and cost
# compute that grows with the depth; 3 covers the elementwise tails of a layer (bias add -> GELU -> dropout).
# The arena search's depth gene goes deeper where it pays (BERT-large@32's softmax/GELU transposes: 8-12).
MAX_CHAIN_DEPTH = 3

_RANDOM = re.compile(r"dropout|random|rng|philox|bernoulli|multinomial|uniform|normal_", re.IGNORECASE)


def is_pure(graph: DataflowGraph, op_id: int) -> bool:
    """The op's outputs are a function of its inputs alone (see the module docstring)."""
    op = graph.ops[op_id]
    return not (_RANDOM.search(op.kernel or "") or _RANDOM.search(op.name or ""))


def recomputable_ops(graph: DataflowGraph) -> list[bool]:
    """Per op: pure and with exactly one output, so a recompute rebuilds just the dropped tensor."""
    return [len(op.outputs) == 1 and is_pure(graph, op.id) for op in graph.ops]


def update_positions(graph: DataflowGraph, order: list[int]) -> dict[int, int]:
    """param -> schedule position of the op that computes its update (params nothing updates: absent)."""
    pos = {o: i for i, o in enumerate(order)}
    prod = graph.producer()
    return {old: pos[int(prod[new])] for new, old in graph.updates.items() if prod[new] >= 0}


def multi_output_recomputable(graph: DataflowGraph) -> list[bool]:
    """Per op: pure with several outputs, recomputable for its first output (a training batch norm: its
    output, with its saved mean and inverse std beside it). A recompute writes every output, so its other
    outputs ("secondaries") are written again too: the planner places them anew (the value is the same),
    after dropping a resident copy. That is sound only where no rebuild reads a secondary (a rebuild's
    inputs are held for its slot), so such an op qualifies only if no op that may be recomputed reads one
    of its secondaries: not a single-output op (`recomputable_ops`), and not another such op, where an op
    that reads a secondary of one never qualifies itself (a batch norm's backward reads the forward's mean:
    the forward qualifies, the backward does not). The planner also keeps the op at the rebuild's slot from
    reading a secondary (swapadvisor.arena)."""
    single = recomputable_ops(graph)
    multi = [len(op.outputs) > 1 and is_pure(graph, op.id) for op in graph.ops]
    secondary = {t for op in graph.ops if multi[op.id] for t in op.outputs[1:]}
    ok = [multi[op.id] and not any(t in secondary for t in op.inputs) for op in graph.ops]
    readers = graph.consumers()
    for op in graph.ops:       # a reader that may be recomputed (single output, or qualified above) excludes
        if ok[op.id] and any(single[r] or ok[r] for t in op.outputs[1:] for r in readers[t]):
            ok[op.id] = False
    return ok
