"""checkpoint-sqrt: activation checkpointing every sqrt(n) layers with recomputation (Chen et al. 2016,
"Training deep nets with sublinear memory cost"), under the shared pool and simulator.

It stands for `torch.utils.checkpoint.checkpoint_sequential(model, segments=round(sqrt(n)), x)`: forward
runs as usual but keeps, of each checkpointed segment, only the tensors that flow into later segments
(its boundary: what `checkpoint` saves as the next segment's inputs); in backward, just before the
segment's backward needs its activations, the segment's forward runs again from its saved inputs and
its backward reads the rebuilt activations. The last segment is not checkpointed (checkpoint_sequential
runs it normally: its backward follows at once). Weights, gradients and optimizer state stay on the GPU and
nothing is copied to the host; what does not fit is refused, naming what this policy needs.

What a "layer" is on a DataflowGraph. The forward ops (the loss's ancestors; all ops of an inference
graph) in schedule order are the n layers: Chen et al. count the nodes of the computation graph (their
MXNet implementation segments the op graph), and our ops are the kernels a model runs, at the granularity
the importers give. They are cut into k = round(sqrt(n)) contiguous segments of equal compute time (per the
cost table), not of equal op count: a kernel-level graph mixes a convolution with a bias add or a ReLU that
costs 1/100 of it, and a user splits a model into segments of similar cost (blocks of a ResNet, layers of a
BERT), which makes each segment's recompute cost the same and, for the repeated blocks of the zoo's models,
its memory about the same too. sqrt(n) segments of sqrt(n) layers each is the split that minimises
boundaries + one segment's activations when layers are alike (Chen et al.'s O(sqrt(n)) analysis).

The schedule is the one autograd runs (`autograd_order`): TVM's order, except that backward ops reading no
gradient (BERT's transposes of saved attention probabilities, of weights) run just before their first
reader, inside their layer's backward, instead of all at once right after the loss, where they would make
every segment's rebuild happen at the start of backward.

Which tensors are dropped. A tensor backward reads that a forward op of a checkpointed segment produces is
dropped after its last forward use, unless it is a boundary (a forward op of a later segment reads it), a
graph output, the output of an op that cannot be recomputed (`planner.recompute`: several outputs, or a
random kernel), or its producer reads a param whose update is computed before the segment's backward.
Those stay, as the tensor `checkpoint` itself would have to keep.

The rebuild. A segment's dropped tensors come back at the first backward use of any of them: their
producers and the producers of the forward-only tensors between them and the segment's kept inputs run
again, in schedule order, each output written into free memory and released after its last reader in the
chain unless backward reads it; the inputs the chain reads (the segment's boundary inputs, params, graph
inputs) stay on the device until then. The chain is as long as the segment: checkpoint-sqrt does not obey
`planner.recompute.MAX_CHAIN_DEPTH`, which bounds the on-demand planners' rebuilds, since whole segments
are what Chen et al. recompute.

Simplified: PyTorch reruns the whole segment, also the ops whose outputs backward does not read and no
dropped tensor depends on (here only the ancestors of dropped tensors run again; on a chain of layers that is
the whole segment but its last ops); the boundary is read from the graph, not from the module list a user
passes (a boundary inside a ResNet block keeps the skip input as well); memory is the shared exact-size pool,
not the caching allocator; the random-number state `checkpoint` restores is not needed (no op of ours draws
random numbers, `planner.recompute`).

Option: `checkpoint_segments` (plan_graph keyword): k instead of round(sqrt(n)); 1 checkpoints nothing.
"""
from __future__ import annotations

import math
from bisect import insort
from dataclasses import dataclass, replace

import numpy as np

from ...errors import TvmSwapError
from ...graph import DataflowGraph
from ...plan import Plan
from ..context import PlanningContext
from ..recompute import recomputable_ops, update_positions
from .offload import Policy, PolicyLayout, PolicyWalker, forward_of, plan_policy, saved_activations
from .walker import OnDemandWalker

WHY = ("checkpoint-sqrt keeps weights, gradients, optimizer state, every segment's boundary and one segment's "
       "activations on the GPU; it needs this much")


def segment_forward(fwd_order: list[int], op_time, k: int | None = None) -> list[list[int]]:
    """The forward ops (in schedule order) cut into k (default round(sqrt(n))) contiguous segments of about
    equal compute: op o goes to segment floor(k * (time before o + half of o's) / total). Empty segments
    (an op costing more than a segment's share) are left out."""
    n = len(fwd_order)
    if n == 0:
        return []
    k = max(1, round(math.sqrt(n))) if k is None else max(1, min(int(k), n))
    times = np.maximum(np.asarray([float(op_time[o]) for o in fwd_order]), 0.0)
    if not times.sum() > 0:
        times = np.ones(n)
    mid = np.cumsum(times) - times / 2
    seg = np.minimum((mid * k / times.sum()).astype(np.int64), k - 1)
    out: list[list[int]] = [[] for _ in range(k)]
    for o, s in zip(fwd_order, seg):
        out[int(s)].append(o)
    return [s for s in out if s]


@dataclass
class Checkpointing:
    """What checkpoint-sqrt does: segments of forward ops, the tensors dropped after forward with the position
    each is rebuilt before, and the ops recomputed before each such position (schedule order)."""
    segments: list[list[int]]
    rebuild_at: dict[int, int]          # dropped tensor -> schedule position whose op it is rebuilt before
    chains: dict[int, list[int]]        # schedule position -> ops recomputed just before that op runs
    kept_saved: int                     # saved activations of checkpointed segments that stay (see why above)

    def recomputed_ops(self) -> int:
        return sum(len(c) for c in self.chains.values())


def plan_checkpointing(graph: DataflowGraph, order: list[int], op_time, k: int | None = None) -> Checkpointing:
    """Segments, dropped tensors and rebuild chains for `order` (the module docstring says which and why)."""
    g = graph
    pos = {o: i for i, o in enumerate(order)}
    fwd = forward_of(g)
    segments = segment_forward(sorted(fwd, key=pos.__getitem__), op_time, k)
    seg_of = {o: s for s, ops in enumerate(segments) for o in ops}
    last = len(segments) - 1
    producer = g.producer()
    consumers = g.consumers()
    recomputable = recomputable_ops(g)
    upd = update_positions(g, order)
    outputs = set(g.outputs)

    def seg(t: int) -> int:
        p = int(producer[t])
        return seg_of[p] if p >= 0 and p in seg_of else -1

    def first_backward_use(t: int) -> int | None:
        return min((pos[c] for c in consumers[t] if c not in fwd), default=None)

    def boundary(t: int) -> bool:
        return any(c in seg_of and seg_of[c] > seg(t) for c in consumers[t])

    def can_rebuild(op: int, at: int) -> bool:
        """op may run again before position `at`: pure, one output, no param it reads updated before then."""
        return recomputable[op] and all(upd.get(i, at) >= at for i in g.ops[op].inputs)

    saved = saved_activations(g, fwd)
    saved_set = set(saved)
    candidates = []
    for t in saved:
        s, fb = seg(t), first_backward_use(t)
        if 0 <= s < last and fb is not None and t not in outputs and not boundary(t) \
                and max((pos[c] for c in consumers[t] if c in fwd), default=-1) < fb:
            candidates.append(t)
    kept: set[int] = set()             # candidates whose producer cannot run again before their rebuild

    while True:
        dropped: dict[int, list[int]] = {}
        for t in candidates:
            if t not in kept:
                dropped.setdefault(seg(t), []).append(t)
        drop_set = {t for ts in dropped.values() for t in ts}

        def resident_then(i: int, s: int) -> bool:
            """Whether input i of a segment-s op is still on the device when the segment is rebuilt: a param, a
            graph input, an earlier segment's boundary, or a tensor of this segment that backward reads or a
            later segment reads, unless it is dropped. Otherwise it died after forward and is rebuilt too."""
            return (g.is_persistent(i) or producer[i] < 0 or seg(i) != s or boundary(i)
                    or (i in saved_set and i not in drop_set))

        rebuild_at, chains, again = {}, {}, False
        for s, ts in sorted(dropped.items()):
            at = min(first_backward_use(t) for t in ts)
            chain, stack = set(), list(ts)
            while stack:
                t = stack.pop()
                op = int(producer[t])
                if op in chain:
                    continue
                if not can_rebuild(op, at):
                    if t in drop_set:           # keep it, and plan again without it
                        kept.add(t)
                        again = True
                    continue                    # forward-only: the walker keeps it until the chain reads it
                chain.add(op)
                stack.extend(i for i in dict.fromkeys(g.ops[op].inputs) if not resident_then(i, s))
            for t in ts:
                rebuild_at[t] = at
            chains.setdefault(at, []).extend(chain)
        if not again:
            break
    for at in chains:
        chains[at] = sorted(set(chains[at]), key=pos.__getitem__)
    n_ckpt_saved = sum(1 for t in saved if 0 <= seg(t) < last)
    return Checkpointing(segments, rebuild_at, chains, n_ckpt_saved - len(rebuild_at))


class CheckpointWalker(PolicyWalker):
    """Walks a Checkpointing: dropped tensors leave without a copy after their last forward use, and each
    chain runs as recomputes just before its position's op; the chain's inputs stay resident until then."""

    def __init__(self, graph, order, pool, tensor_class, resident_params, ck: Checkpointing):
        super().__init__(graph, order, pool, tensor_class, resident_params, Policy({}))
        self.ck = ck
        self.recomputes = 0
        self._no_copy: set[int] = set()
        for at, ops in ck.chains.items():
            made = {t for o in ops for t in graph.ops[o].outputs}
            for o in ops:
                for t in graph.ops[o].inputs:
                    if t not in made and at not in self.uses[t]:
                        insort(self.uses[t], at)    # read by the chain: it stays (or comes back) until then

    def drop_early(self, t: int, pos: int, nxt: int) -> bool:
        at = self.ck.rebuild_at.get(t)
        if at is not None and pos < at <= nxt:
            self._no_copy.add(t)
            return True
        return False

    def evict(self, t: int) -> None:
        if t in self._no_copy:                # dropped without a copy: its chain rebuilds it
            self._no_copy.discard(t)
            self.policy_drops += 1
            self.evictions += 1
            OnDemandWalker.drop(self, t)
        else:
            super().evict(t)

    def before_inputs(self, pos: int, pinned: set[int]) -> None:
        ops = self.ck.chains.get(pos)
        if not ops:
            return
        g, b = self.g, self.b
        op_now = set(g.ops[self.order[pos]].inputs) | set(g.ops[self.order[pos]].outputs)
        todo = [o for o in ops if not b.is_resident(g.ops[o].outputs[0])]
        last_read = {}
        for k, o in enumerate(todo):
            for t in g.ops[o].inputs:
                last_read[t] = k
        live = set(pinned)
        no = lambda v: False  # noqa: E731  (a fixed policy never evicts on demand)
        for k, o in enumerate(todo):
            ins = list(dict.fromkeys(g.ops[o].inputs))
            for t in ins:
                if not b.is_resident(t) and not self.bring_in(t, live | set(ins), may_evict=no):
                    self.failed_prefetches += 1
                    return
                self.touch(t)
            live |= set(ins)
            out = g.ops[o].outputs[0]
            obj = self.acquire(self.cls[out], live, may_evict=no)
            if obj is None:
                self.failed_prefetches += 1
                return
            b.recompute(o, [obj])
            self.recomputes += 1
            self.touch(out)
            live.add(out)
            for t in ins:        # read for the last time in this chain and not needed at or after pos
                if last_read[t] == k and t not in op_now and t not in self.keep_resident \
                        and self.next_use(t, pos) is None and b.is_resident(t):
                    self.drop(t)
                    live.discard(t)


def autograd_order(graph: DataflowGraph, fwd: set[int] | None = None) -> list[int]:
    """The graph's order, with each backward op that reads only forward values (no gradient: a transpose of a
    saved activation or of a weight, a reduction of one) moved to just before the first op that reads its
    result, which is where autograd runs it: inside the backward of the layer that needs it. TVM's order
    runs them all as soon as forward ends (BERT-large: 340 of them, 105 ops early on average), which would
    rebuild every segment at once at the start of backward."""
    g = graph
    fwd = forward_of(g) if fwd is None else fwd
    producer, consumers = g.producer(), g.consumers()
    early: list[int] = []
    moved: set[int] = set()
    for op in g.ops:
        if op.id in fwd or any(g.tensors[t].kind != "activation" or not consumers[t] for t in op.outputs):
            continue
        if all(g.is_persistent(i) or producer[i] < 0 or int(producer[i]) in fwd or int(producer[i]) in moved
               for i in op.inputs):
            moved.add(op.id)
            early.append(op.id)
    order = [o for o in range(g.num_ops) if o not in moved]
    for h in reversed(early):          # its readers are in place: the base order's, and moved ops after it
        readers = {c for t in g.ops[h].outputs for c in consumers[t]}
        order.insert(min(i for i, o in enumerate(order) if o in readers), h)
    return order


def plan_checkpoint_sqrt(ctx: PlanningContext) -> Plan:
    g = ctx.graph
    layout = PolicyLayout.build(ctx, autograd_order(g))
    # a pool that never fills: an object per tensor (a chain keeps its inputs past their last use)
    per_class = np.bincount([layout.tensor_class[t] for t in g.used_tensors()], minlength=len(layout.sizes))
    layout = replace(layout, roomy=np.maximum(layout.roomy, per_class + layout.floor + 1))
    k = ctx.options.get("checkpoint_segments")
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1):
        raise TvmSwapError(f"checkpoint_segments must be a positive number of segments, got {k!r}")
    ck = plan_checkpointing(g, layout.order, ctx.op_time, k)

    def make(pool):
        return CheckpointWalker(ctx.graph, layout.order, pool, layout.tensor_class, layout.resident, ck)

    return plan_policy(ctx, layout, Policy({}), "checkpoint-sqrt", WHY, make_walker=make,
                       search={"segments": len(ck.segments), "forward_ops": sum(map(len, ck.segments)),
                               "dropped": len(ck.rebuild_at), "kept_saved": ck.kept_saved,
                               "recomputed_ops": ck.recomputed_ops()})
