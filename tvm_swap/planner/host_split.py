"""Plans that run some ops on the host (Plan.host_ops): the device part planned as a graph of its own.

`device_graph(graph, host_ops)` is the graph the device runs when `host_ops` run on the host (first the
optimizer's updates, as ZeRO-Offload does):
- the host ops are left out (the other ops renumbered, tensors kept with their ids);
- a produced tensor a host op reads becomes a graph output: the device copies it out when it exists (a gradient);
- a persistent tensor whose update a host op writes becomes an input: it is fetched from the host every step,
  never kept on the device between steps (its new value is written in host memory);
- tensors only host ops touch (fp32 master weights, optimizer moments) are unused: they never cross the link.
Any planner plans that graph; `lift_plan` puts the host ops back (after the copies out of what they read, on
the host stream) and returns a plan of the original graph that the verifier checks like any other.
Host ops may only read produced tensors of device ops or of earlier host ops, and a device op may not read a
host op's output in the same step (it would need a swap_in of it: not modelled here): `check_host_ops` says so.
"""
from __future__ import annotations

from dataclasses import replace

from ..errors import TvmSwapError
from ..graph import DataflowGraph
from ..graph.dataflow import OpInfo, TensorInfo
from ..plan import Action, Plan


def update_ops(graph: DataflowGraph) -> set[int]:
    """Ops that write an update of a persistent tensor (the optimizer's kernels)."""
    prod = graph.producer()
    return {int(prod[new]) for new in graph.updates if prod[new] >= 0}


# an op at most this many flops per byte it touches is memory-bound (an elementwise kernel does ~1-10)
MEMORY_BOUND_FLOPS_PER_BYTE = 16.0


def host_eligible(graph: DataflowGraph) -> list[int]:
    """Ops the placement search (swapadvisor/host_genes.py) may put on the host, in graph order: the update
    kernels, then memory-bound ops (at most MEMORY_BOUND_FLOPS_PER_BYTE flops per byte they touch: elementwise
    work, which the host's bandwidth runs as well as anything) whose every reader is eligible and whose
    outputs leave the step through no graph output, no update and no persistent tensor."""
    ups = update_ops(graph)
    cons = graph.consumers()
    leaving = set(graph.outputs) | set(graph.updates)
    nbytes = graph.tensor_bytes()
    ok = set(ups)
    for op in reversed(graph.ops):          # (readers come later in graph order: decided first)
        if op.id in ok or not op.outputs:
            continue
        touched = float(sum(int(nbytes[t]) for t in set(op.inputs) | set(op.outputs)))
        if op.flops > MEMORY_BOUND_FLOPS_PER_BYTE * max(touched, 1.0):
            continue
        if any(t in leaving or graph.is_persistent(t) or not cons[t] for t in op.outputs):
            continue
        if all(c in ok for t in op.outputs for c in cons[t]):
            ok.add(op.id)
    return sorted(ok)


def optimizer_host_ops(graph: DataflowGraph) -> list[int]:
    """The optimizer's update kernels: the ops that write an update of a persistent tensor."""
    return sorted(update_ops(graph))


def close_host_ops(graph: DataflowGraph, host_ops) -> list[int]:
    """host_ops with the update op of every persistent tensor a host op reads (an optimizer's step counter): the
    host copy of a tensor updated on the device and kept there would be stale, so its update runs on the host
    too (where the tensor is then kept); repeated until nothing is added."""
    prod = graph.producer()
    update_of = {old: int(prod[new]) for new, old in graph.updates.items() if prod[new] >= 0}
    host = {int(o) for o in host_ops}
    todo = list(host)
    while todo:
        for t in graph.ops[todo.pop()].inputs:
            u = update_of.get(t)
            if u is not None and u not in host:
                host.add(u)
                todo.append(u)
    return sorted(host)


def check_host_ops(graph: DataflowGraph, host_ops) -> set[int]:
    """host_ops as a set, or TvmSwapError when a device op reads a host op's output."""
    host = {int(o) for o in host_ops}
    if any(not 0 <= o < graph.num_ops for o in host):
        raise TvmSwapError(f"host_ops must name ops of the graph (0..{graph.num_ops - 1})")
    cons = graph.consumers()
    for o in sorted(host):
        for t in graph.ops[o].outputs:
            dev = [c for c in cons[t] if c not in host]
            if dev:
                raise TvmSwapError(f"op {graph.ops[o].name!r} cannot run on the host: device op "
                                   f"{graph.ops[dev[0]].name!r} reads its output {graph.tensors[t].name!r} in the "
                                   f"same step; place that op on the host too, or keep both on the device")
    return host


def device_graph(graph: DataflowGraph, host_ops) -> tuple[DataflowGraph, list[int]]:
    """(the device's graph, original op id of each of its ops); see the module docstring. One graph object per
    host set, kept with `graph`: what planners keep with a graph (its index, floors, the GA's genome times)
    then serves every plan of that split (the placement search screens a set, then searches from it; the
    planners and limits of one step share its optimizer split)."""
    host = check_host_ops(graph, host_ops)
    key = ("device_graph", frozenset(host))
    if key not in graph._cache:
        graph._cache[key] = _device_graph(graph, host)
    g, keep = graph._cache[key]
    return g, list(keep)


def _device_graph(graph: DataflowGraph, host: set) -> tuple[DataflowGraph, list[int]]:
    keep = [o for o in range(graph.num_ops) if o not in host]
    new_id = {o: i for i, o in enumerate(keep)}
    prod = graph.producer()
    host_read = {t for o in host for t in graph.ops[o].inputs}
    written_on_host = {graph.updates[t] for o in host for t in graph.ops[o].outputs if t in graph.updates}
    tensors = [TensorInfo(**{**t.__dict__, "kind": "input"}) if t.id in written_on_host else t
               for t in graph.tensors]
    ops = [OpInfo(**{**graph.ops[o].__dict__, "id": new_id[o]}) for o in keep]
    outputs = [t for t in graph.outputs if prod[t] >= 0 and int(prod[t]) not in host and t not in graph.updates]
    outputs += sorted(t for t in host_read if prod[t] >= 0 and int(prod[t]) not in host and t not in outputs)
    updates = {new: old for new, old in graph.updates.items() if int(prod[new]) not in host}
    meta = dict(graph.meta)
    if meta.get("inplace"):     # the in-place pairs of the ops kept, renumbered (DataflowGraph.inplace_pairs)
        meta["inplace"] = [[new_id[o], y, x] for o, y, x in meta["inplace"] if o in new_id]
    g = DataflowGraph(f"{graph.name} (device part)", tensors, ops, outputs, updates, meta)
    return g, keep


def lift_plan(graph: DataflowGraph, dev_plan: Plan, keep: list[int], host_ops) -> Plan:
    """The plan of `graph` that runs `dev_plan` (a plan of device_graph(graph, host_ops)) on the device and the
    host ops on the host: after every device action, in the order of the last copy out (or host op) each waits
    for, then graph order."""
    host = sorted(check_host_ops(graph, host_ops))
    prod = graph.producer()
    # where each host op's produced inputs become host copies in the device plan: their first swap_out
    copied = {}
    for i, a in enumerate(dev_plan.actions):
        if a.kind == "swap_out" and a.tensor not in copied:
            copied[a.tensor] = i
    after: dict[int, list[int]] = {}      # device-plan index -> host ops to insert after it (-1: at the start)
    host_at = {}
    for o in host:
        need = [copied[t] for t in graph.ops[o].inputs if prod[t] >= 0 and int(prod[t]) not in host]
        at = max(need, default=-1)
        at = max([at] + [host_at[int(prod[t])] for t in graph.ops[o].inputs if prod[t] >= 0
                         and int(prod[t]) in host_at])
        host_at[o] = at
        after.setdefault(at, []).append(o)
    actions: list[Action] = []
    index = {}                              # device-plan index -> new index

    def emit_host(o: int) -> None:
        deps = [index[copied[t]] for t in graph.ops[o].inputs if prod[t] >= 0 and int(prod[t]) not in host]
        actions.append(Action("compute", op=o, deps=tuple(sorted(set(deps)))))

    for i, a in enumerate(dev_plan.actions):
        a = replace(a, deps=tuple(index[d] for d in a.deps))
        if a.kind in ("compute", "recompute"):
            a = replace(a, op=keep[a.op])
        index[i] = len(actions)
        actions.append(a)
    # the host ops after every device action, in the order their inputs are copied out: the program runs a
    # host op on the thread that issues every action (relay_passes/host_ops.py), so an action after one is
    # issued only once it has run (host_sim models that); no device action of the step waits on a host op,
    # so after all of them it delays none
    for at in sorted(after):
        for o in after[at]:
            emit_host(o)
    schedule = [a.op for a in actions if a.kind == "compute"]
    search = {**dev_plan.search, "host_ops": len(host)}
    return Plan(graph.name, graph.fingerprint(), dev_plan.planner, dev_plan.mem_limit, dev_plan.device, schedule,
                dev_plan.pool, dev_plan.tensor_class, list(dev_plan.initial_residents), actions, {}, search,
                False, host, inplace=[(keep[o], y, x) for o, y, x in dev_plan.inplace])
