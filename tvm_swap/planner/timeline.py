"""Device memory over time for a simulated plan: for plots and for a plan's predicted peak.

An object is in use from its tenant's arrival start (the producer compute's start or the swap-in's
start; time 0 for an initial resident) until the end of the tenant's drop; a tenant never dropped
stays in use past the end (it is the next iteration's initial resident). Occupied objects count
with their pool size (what the pool reserves); `tensor_bytes` and `by_kind` count the tenants' own
bytes.

Events at equal times are ordered by their actions' places in the plan's list, which is a topological
order of happens-before (deps name earlier actions; streams are FIFO in list order): an arrival that
waits on a drop comes after it, one that does not comes first and counts with it. With the simulator's
times exact (a dependent never starts before its dependency's end), an object's tenancies never
overlap here, so the peak is at most the pool by construction.
"""
from __future__ import annotations

import numpy as np

from ..graph import KINDS, DataflowGraph
from ..plan import ActionKind, Plan, runs_kernel
from .simulator import SimResult


def tenancies(graph: DataflowGraph, plan: Plan, sim: SimResult):
    """(tensor, object, begin_s, end_s, begin action, end action) for every stay of a tensor in an object
    (action -1: the initial state; end action len(actions): never dropped)."""
    open_at: dict[int, tuple[int, float, int]] = {t: (o, 0.0, -1) for t, o in plan.initial_residents}
    out: list[tuple[int, int, float, float, int, int]] = []
    start, end = sim.start, sim.end
    over = plan.inplace_by_op()
    for i, a in enumerate(plan.actions):
        k = a.kind
        if runs_kernel(k):
            s = float(start[i])
            ip = over.get(a.op, {}) if k == ActionKind.COMPUTE else {}
            for t, o in zip(graph.ops[a.op].outputs, a.out_objs):
                if t in ip:       # the input run over in place leaves as its output arrives (just before it)
                    x = ip[t]
                    ox, b, bi = open_at.pop(x, (o, 0.0, -1))
                    out.append((x, ox, b, s, bi, i - 0.5))
                open_at[t] = (o, s, i)
        elif k == ActionKind.SWAP_IN:
            open_at[a.tensor] = (a.obj, float(start[i]), i)
        elif k == ActionKind.DROP:
            o, b, bi = open_at.pop(a.tensor, (a.obj, 0.0, -1))
            out.append((a.tensor, o, b, float(end[i]), bi, i))
    # still resident at the end: carried into the next iteration, never released
    n = len(plan.actions)
    out.extend((t, o, b, np.inf, bi, n) for t, (o, b, bi) in open_at.items())
    return out


def memory_timeline(graph: DataflowGraph, plan: Plan, sim: SimResult) -> dict:
    """Step functions of device memory in use: value[i] holds from time[i] until time[i+1].

    Keys: time, bytes (object bytes), tensor_bytes, by_kind {kind: tensor bytes}, peak_bytes
    (object bytes, without workspace), pool_bytes (the pool's total, workspace included)."""
    if len(sim.start) != len(plan.actions):
        raise ValueError(f"simulation has {len(sim.start)} actions but the plan has {len(plan.actions)}: "
                         f"simulate this plan first")
    ten = tenancies(graph, plan, sim)
    obj_bytes = plan.pool.object_bytes()
    nb = graph.tensor_bytes()
    kind_idx = {k: i for i, k in enumerate(KINDS)}
    m = len(ten)
    t_arr = np.array([x for x in ten], dtype=np.float64).reshape(m, 6) if m else np.zeros((0, 6))
    tensors = t_arr[:, 0].astype(np.int64)
    objs = t_arr[:, 1].astype(np.int64)
    times = np.concatenate([t_arr[:, 2], t_arr[:, 3]])
    sign = np.concatenate([np.ones(m, dtype=np.int64), -np.ones(m, dtype=np.int64)])
    sign[m:][~np.isfinite(t_arr[:, 3])] = 0     # residents at the end: no release event
    ob = obj_bytes[objs] if m else np.zeros(0, dtype=np.int64)
    tb = nb[tensors] if m else np.zeros(0, dtype=np.int64)
    kinds = np.array([kind_idx[graph.tensors[t].kind] for t in tensors.tolist()], dtype=np.int64)
    # at equal times, in action-list order (happens-before): an arrival that waited on a drop follows it
    at_action = np.concatenate([t_arr[:, 4], t_arr[:, 5]])
    order = np.lexsort((at_action, times))
    order = order[sign[order] != 0]
    times = times[order]
    s = sign[order]
    both = lambda a: np.concatenate([a, a])[order]  # noqa: E731
    d_obj = np.cumsum(s * both(ob))
    d_ten = np.cumsum(s * both(tb))
    k_all = both(kinds)
    tb_all = both(tb)
    by_kind = {}
    for k, i in kind_idx.items():
        sel = k_all == i
        if sel.any():
            by_kind[k] = np.cumsum(np.where(sel, s * tb_all, 0))
    return {
        "time": np.concatenate([[0.0], times]),
        "bytes": np.concatenate([[0], d_obj]).astype(np.int64),
        "tensor_bytes": np.concatenate([[0], d_ten]).astype(np.int64),
        "by_kind": {k: np.concatenate([[0], v]).astype(np.int64) for k, v in by_kind.items()},
        "peak_bytes": int(d_obj.max()) if m else 0,
        "pool_bytes": int(plan.pool.total_bytes()),
    }


def peak_in_use(graph: DataflowGraph, plan: Plan, sim: SimResult, include_workspace: bool = True) -> int:
    """Most device bytes in use at once: occupied objects (+ the pool's workspace, also device memory)."""
    peak = memory_timeline(graph, plan, sim)["peak_bytes"]
    return int(peak + (plan.pool.workspace_bytes if include_workspace else 0))
