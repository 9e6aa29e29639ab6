"""vdnn: the static offload policy of vDNN (Rhu et al., MICRO'16) under the shared pool and simulator.

Forward pass = the ops the loss (the graph's first output) depends on; the rest is backward and update.
In forward, the input of every layer (an op whose kernel is a conv2d / matmul / dense) that backward needs
again is copied out while that layer runs and released after its last forward use. In backward, each such
tensor is prefetched one layer ahead: while the layer that first needs the previous offloaded tensor runs.
Params stay on the device if they fit; if not, each is swapped in for the layer that uses it and released
after. Whatever this static policy cannot fit falls back to on-demand LRU eviction (vDNN had the same
safety net), so a plan exists at every limit the pool's floor meets.
"""
from __future__ import annotations

from ...graph import DataflowGraph
from ...plan import Plan
from .common import assemble_plan, default_order, default_pool, keepable_params
from .walker import OnDemandWalker, two_pass
from ..context import PlanningContext

LAYER_KERNELS = ("conv2d", "matmul", "dense")


def forward_ops(graph: DataflowGraph) -> set[int]:
    """Ops the loss depends on (the loss's producer and its ancestors). Empty if the graph has no loss."""
    if not graph.outputs:
        return set()
    start = int(graph.producer()[graph.outputs[0]])
    if start < 0:
        return set()
    preds = graph.op_preds()
    seen, stack = {start}, [start]
    while stack:
        for p in preds[stack.pop()]:
            if p not in seen:
                seen.add(p)
                stack.append(p)
    return seen


def offload_candidates(graph: DataflowGraph, fwd: set[int]) -> list[int]:
    """Tensors vDNN offloads: activation inputs of forward layer ops that a backward op reads again.
    Without any conv/matmul/dense kernel in forward, every forward activation backward reads."""
    consumers = graph.consumers()
    producer = graph.producer()

    def needed_by_backward(t: int) -> bool:
        return any(c not in fwd for c in consumers[t])

    def is_activation(t: int) -> bool:
        return not graph.is_persistent(t) and (producer[t] < 0 or int(producer[t]) in fwd)

    layers = [o for o in sorted(fwd) if any(k in graph.ops[o].kernel.lower() for k in LAYER_KERNELS)]
    if layers:
        cand = {t for o in layers for t in graph.ops[o].inputs}
    else:
        cand = {t for o in fwd for t in graph.ops[o].outputs}
    return sorted(t for t in cand if is_activation(t) and needed_by_backward(t))


class VdnnWalker(OnDemandWalker):
    def __init__(self, graph, order, pool, tensor_class, resident_params=(), keep=None, *,
                 offload: list[int], fwd: set[int], params_per_layer: bool):
        super().__init__(graph, order, pool, tensor_class, resident_params, keep)
        self.offload = set(offload)
        self.is_fwd = [o in fwd for o in self.order]
        self.params_per_layer = params_per_layer
        self.resident_start = {p for p, _ in self.initial}
        self.prefetch_at: dict[int, list[int]] = {}
        self.first_bw_use: dict[int, int] = {}
        self._plan_prefetches()

    def _plan_prefetches(self) -> None:
        """Offloaded tensor whose first backward use is the k-th such position is prefetched at the (k-1)-th."""
        bw_positions = [p for p, f in enumerate(self.is_fwd) if not f]
        if not bw_positions:
            return
        for t in self.offload:
            bw = [p for p in self.uses[t] if not self.is_fwd[p]]
            fw = [p for p in self.uses[t] if self.is_fwd[p]]
            if bw and fw and bw[0] > fw[-1]:
                self.first_bw_use[t] = bw[0]
        firsts = sorted(set(self.first_bw_use.values()))
        rank = {f: k for k, f in enumerate(firsts)}
        for t, first in self.first_bw_use.items():
            k = rank[first]
            at = firsts[k - 1] if k > 0 else min(bw_positions[0], first)
            last_fw = [p for p in self.uses[t] if self.is_fwd[p]][-1]
            at = max(at, last_fw + 1)
            self.prefetch_at.setdefault(at, []).append(t)

    def before_compute(self, pos: int, pinned: set[int]) -> None:
        op = self.g.ops[self.order[pos]]
        if self.is_fwd[pos]:
            # Offload overlaps the layer that reads the tensor.
            for t in dict.fromkeys(op.inputs):
                if t in self.first_bw_use and not self.valid_host_copy(t):
                    self.b.swap_out(t)
        for t in sorted(self.prefetch_at.get(pos, ())):
            if self.b.is_resident(t):
                continue
            due = self.first_bw_use[t]

            def later(v, due=due):  # never trade a tensor needed sooner, nor one kept for the next iteration
                nu = self.next_use(v)
                return v not in self.keep_resident and (nu is None or nu > due)

            self.bring_in(t, pinned, may_evict=later)
        if pos + 1 < len(self.order):  # params (and stragglers) for the next layer, into free objects only
            for t in dict.fromkeys(self.g.ops[self.order[pos + 1]].inputs):
                if not self.b.is_resident(t) and self.valid_host_copy(t) and self.has_free(self.cls[t]):
                    self.bring_in(t, pinned, may_evict=lambda v: False)

    def drop_early(self, t: int, pos: int, nxt: int) -> bool:
        if t in self.first_bw_use and self.is_fwd[pos] and not self.is_fwd[nxt]:
            return True
        # Per-layer params: released after each use unless the very next op needs them again.
        return (self.params_per_layer and self.g.is_persistent(t) and t not in self.resident_start
                and nxt > pos + 1)


def plan_vdnn(ctx: PlanningContext) -> Plan:
    g = ctx.graph
    order = default_order(g)
    layout = default_pool(ctx, g, order, planner="vdnn")
    fwd = forward_ops(g)
    offload = offload_candidates(g, fwd)

    def make(per_layer):
        def build(resident, keep):
            return VdnnWalker(g, order, layout.pool, layout.tensor_class, resident, keep,
                              offload=offload, fwd=fwd, params_per_layer=per_layer)
        return build

    # All params resident if that never forces one of them out; otherwise params per layer.
    w = make(False)(_fitting_residents(g, layout), None).run_ops()
    params_fit = w.evicted_kept == 0 and len(w.initial) == len(keepable_params(g, layout.tensor_class))
    if params_fit:
        w.finish()
    else:
        w = two_pass(make(True), g, layout.tensor_class)
    return assemble_plan(ctx, "vdnn", order, layout.pool, layout.tensor_class, w.initial, w.b,
                         search={"evictions": w.evictions, "offloaded": len(offload), "params_resident": params_fit})


def _fitting_residents(g: DataflowGraph, layout) -> list[int]:
    """Keepable params, as many per class as the class has objects (in id order)."""
    room = list(layout.pool.class_count)
    out = []
    for p in keepable_params(g, layout.tensor_class):
        c = layout.tensor_class[p]
        if room[c] > 0:
            room[c] -= 1
            out.append(p)
    return out
