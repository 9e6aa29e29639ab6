"""Bounds a plan is measured against: ideal time, a sound lower bound under a limit, the no-swap peak.

`lower_bound` argument (every plan the verifier accepts takes at least this long in the simulator):

1. The compute stream runs every op once, one at a time: time >= sum(op_time).
2. Bytes that must cross the link, whatever the schedule, pool or swaps:
   - inputs have no producer and may not be initial residents (only persistent tensors may), so each
     used input is swapped in every iteration;
   - a produced graph output that is not an update must reach the host (a swap_out);
   - take a used persistent tensor p that is never swapped in. It is read, so it is an initial
     resident that stays in its object O_p until its last read.
     * If p is updated and the op u producing its update p_new reads p, p sits in O_p until u and
       p_new (same class at the end: periodicity is per size class) from u on: one of them holds an
       object of p's class during every op, so p counts in K below.
     * If p is updated and u does not read p, p may leave O_p before u writes p_new there: it need
       not cross and it occupies nothing certain; it is left out (free).
     * If p is not updated, periodicity needs it in an object of its class at the end, so it is
       resident during every op. Call these (with the first case) K. During op o the device holds K, o's inputs and outputs that are not
       persistent (F_o, aligned; distinct live tensors need distinct objects) and the pool's
       workspace, which must cover the largest op workspace (the verifier checks it). So
       aligned(K) <= limit - max_o F_o - max workspace =: capK.
     Every other used persistent tensor crosses in at least once, as itself or as its update: the
     smaller of the two sizes.
   - an updated persistent tensor whose update is not an initial resident's replacement at the end
     must be swapped out (its new value is lost otherwise). Initial residents I are all on the device
     at the start: aligned(I) <= limit - max workspace =: capI.
   Minimising the crossing bytes over K and I is a knapsack; its fractional relaxation (greedy by
   bytes per aligned byte) keeps at least as many bytes as any real choice, so the bytes it leaves
   to cross are a lower bound. in_min and out_min are each minimised on their own, which can only
   lower them.
3. Copies: h2d moves at most h2d_bandwidth, d2h at most d2h_bandwidth, and the link as a whole at
   most max(one-way rates, both-ways total). So time >= in_min/h2d, out_min/d2h,
   (in_min+out_min)/max(...).
"""
from __future__ import annotations

import numpy as np

from ..graph import DataflowGraph
from ..plan import DEFAULT_ALIGNMENT, aligned_bytes
from .simulator import _link_rates


def ideal_time(graph: DataflowGraph, op_time) -> float:
    """The same schedule with unlimited memory: the compute stream never waits."""
    return float(np.sum(np.asarray(op_time, dtype=np.float64)))


def _kept_bytes_bound(nbytes: np.ndarray, aligned: np.ndarray, cap: float) -> float:
    """Most bytes a set with aligned size <= cap can hold (fractional knapsack: an upper bound)."""
    if cap <= 0 or len(nbytes) == 0:
        return 0.0
    order = np.argsort(-(nbytes / aligned), kind="stable")
    nb, al = nbytes[order].astype(np.float64), aligned[order].astype(np.float64)
    cum = np.cumsum(al)
    full = int(np.searchsorted(cum, cap, side="right"))   # items that fit whole
    kept = float(nb[:full].sum())
    if full < len(nb):
        room = cap - (cum[full - 1] if full else 0.0)
        kept += float(nb[full]) * room / float(al[full])
    return kept


def must_move_bytes(graph: DataflowGraph, mem_limit: int, alignment: int = DEFAULT_ALIGNMENT) -> dict:
    """Lower bounds on the bytes any valid plan copies in and out per iteration (see module docstring)."""
    nbytes = graph.tensor_bytes()
    aligned = aligned_bytes(graph.tensor_bytes(), alignment)
    prod = graph.producer()
    used = np.zeros(graph.num_tensors, dtype=bool)
    used[graph.used_tensors()] = True
    kinds = [t.kind for t in graph.tensors]
    persistent = np.array([graph.is_persistent(t) for t in range(graph.num_tensors)], dtype=bool)
    is_update = np.zeros(graph.num_tensors, dtype=bool)
    is_update[list(graph.updates)] = True
    update_of = {old: new for new, old in graph.updates.items()}
    max_ws = max((op.workspace for op in graph.ops), default=0)

    inputs_in = int(sum(nbytes[t] for t in range(graph.num_tensors)
                        if kinds[t] == "input" and prod[t] < 0 and used[t]))
    outputs_out = int(sum(nbytes[t] for t in set(graph.outputs) if prod[t] >= 0 and not is_update[t]))

    # F_o: an op's own non-persistent tensors (distinct ones, aligned)
    f_max = 0
    saved = graph.inplace_savings(aligned)        # an op run in place holds its output in its input's bytes
    for op in graph.ops:
        ts = [t for t in dict.fromkeys((*op.inputs, *op.outputs)) if not persistent[t]]
        f_max = max(f_max, (int(aligned[ts].sum()) if ts else 0) - int(saved[op.id]))
    cap_k = float(mem_limit) - f_max - max_ws

    must, resident_or_cross = 0.0, []
    for t in np.flatnonzero(persistent & used).tolist():
        new = update_of.get(t)
        if new is None or t in graph.ops[int(prod[new])].inputs:
            resident_or_cross.append(t)
        # else: free (see the module docstring)
    k = np.array(resident_or_cross, dtype=np.int64)
    kept = _kept_bytes_bound(nbytes[k], aligned[k], cap_k) if len(k) else 0.0
    persistent_in = must + max(0.0, float(nbytes[k].sum()) - kept)

    upd_old = np.array(sorted(update_of), dtype=np.int64)
    upd_new_bytes = np.array([nbytes[update_of[t]] for t in upd_old], dtype=np.int64)
    upd_new_aligned = np.array([aligned[update_of[t]] for t in upd_old], dtype=np.int64)
    cap_i = float(mem_limit) - max_ws
    out_total = float(upd_new_bytes.sum()) if len(upd_old) else 0.0
    kept_out = _kept_bytes_bound(upd_new_bytes, upd_new_aligned, cap_i) if len(upd_old) else 0.0
    updates_out = max(0.0, out_total - kept_out)
    return {
        "inputs_in": float(inputs_in), "persistent_in": float(persistent_in),
        "outputs_out": float(outputs_out), "updates_out": float(updates_out),
        "in_bytes": float(inputs_in + persistent_in), "out_bytes": float(outputs_out + updates_out),
        "op_working_set": int(f_max), "max_workspace": int(max_ws), "resident_capacity": float(cap_k),
    }


def lower_bound_detail(graph: DataflowGraph, op_time, device, mem_limit: int,
                       alignment: int = DEFAULT_ALIGNMENT) -> dict:
    """The lower bound and the terms it is the max of (seconds), with the must-move bytes."""
    d_solo, h_solo, d_both, h_both = _link_rates(device)
    mv = must_move_bytes(graph, mem_limit, alignment)
    terms = {
        "compute_s": ideal_time(graph, op_time),
        "h2d_s": mv["in_bytes"] / h_solo,
        "d2h_s": mv["out_bytes"] / d_solo,
        "link_s": (mv["in_bytes"] + mv["out_bytes"]) / max(d_solo, h_solo, d_both + h_both),
    }
    terms = {k: float(v) for k, v in terms.items()}
    return {"lower_bound_s": max(terms.values()), **terms, **mv}


def lower_bound(graph: DataflowGraph, op_time, device, mem_limit: int, alignment: int = DEFAULT_ALIGNMENT) -> float:
    """Seconds no valid plan under `mem_limit` can beat in the simulator (see the module docstring)."""
    return float(lower_bound_detail(graph, op_time, device, mem_limit, alignment)["lower_bound_s"])


def noswap_profile(graph: DataflowGraph, order=None, alignment: int = DEFAULT_ALIGNMENT) -> np.ndarray:
    """Device bytes in use during each op of `order` (default: graph order) without swapping.

    Params, optimizer state and inputs are resident the whole call; a produced tensor lives from its
    producer to its last reader (graph outputs and updates to the end); each op adds its workspace.
    Entry i is the bytes during the i-th op of the order."""
    order = list(range(graph.num_ops)) if order is None else [int(o) for o in order]
    aligned = aligned_bytes(graph.tensor_bytes(), alignment)
    prod = graph.producer()
    used = graph.used_tensors()
    base = int(sum(aligned[t] for t in used if prod[t] < 0))
    pos = {o: i for i, o in enumerate(order)}
    n = len(order)
    delta = np.zeros(n + 1, dtype=np.int64)      # +bytes at birth, -bytes after death
    keep = set(graph.outputs) | set(graph.updates)
    last = {}
    for o in order:
        for t in graph.ops[o].inputs:
            last[t] = pos[o]
    for t in used:
        if prod[t] < 0:
            continue
        born = pos[int(prod[t])]
        dies = n - 1 if t in keep else max(born, last.get(t, born))
        delta[born] += aligned[t]
        delta[dies + 1] -= aligned[t]
    live = base + np.cumsum(delta[:n])
    ws = np.array([graph.ops[o].workspace for o in order], dtype=np.int64)
    return live + ws


def noswap_peak(graph: DataflowGraph, order=None, alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Peak of `noswap_profile`: the memory the graph needs with everything kept on the device."""
    prof = noswap_profile(graph, order, alignment)
    return int(prof.max()) if len(prof) else 0
