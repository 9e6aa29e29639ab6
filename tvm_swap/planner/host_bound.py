"""A lower bound for plans that may run some ops on the host: seconds no verified plan beats in the simulator,
when the ops of `eligible` may each run on the device or on the host (Plan.host_ops within `eligible`).

The device-only bounds (bounds.py, tight_bound.py) assume every op runs on the compute stream and every
produced tensor is produced on the device; neither holds here. What still holds (the same arguments as
bounds.py, restricted to what an op on the host cannot avoid):
  compute: the ops outside `eligible` (C0 seconds) run on the device stream one at a time; an eligible op
     adds its device seconds d_o there or its host seconds h_o on the host stream, so T >= max(C0 + D(E\\S),
     H(S)) for the set S placed on the host; the bound takes the least over fractional S (sort by h_o/d_o:
     the linear relaxation of that min-max, never above any real choice);
  bytes: an input some non-eligible op reads must cross in; a non-update graph output a non-eligible op
     produces must cross out; of the persistent tensors some non-eligible op reads (bounds.py's K, with its
     rule for updated ones), those that cannot stay resident (the fractional knapsack, with the capacity left
     by the non-eligible ops' working sets: a larger capacity than bounds.py's, so fewer bytes) cross in; of the
     updates that non-eligible ops write, those that cannot stay cross out. A tensor only eligible ops touch
     may live on the host all step: it is not counted.
The activation terms of tight_bound.py are not used (a tensor read on the host needs no swap_in): this bound
is sound and weaker; `tight_lower_bound_detail` stays the bound of plans without host ops.
"""
from __future__ import annotations

import numpy as np

from ..graph import DataflowGraph
from ..plan import DEFAULT_ALIGNMENT, aligned_bytes
from .bounds import _kept_bytes_bound
from .simulator import _link_rates


def split_compute_bound(c0: float, dev_time: np.ndarray, host_time: np.ndarray) -> float:
    """min over fractional S of max(c0 + D(E minus S), H(S)), D and H the eligible ops' device and host seconds."""
    d = np.asarray(dev_time, dtype=np.float64)
    h = np.asarray(host_time, dtype=np.float64)
    if len(d) == 0:
        return float(c0)
    order = np.argsort(h / np.maximum(d, 1e-300), kind="stable")    # cheapest host seconds per device second
    d, h = d[order], h[order]
    dev_left = c0 + d.sum() - np.concatenate([[0.0], np.cumsum(d)])  # device seconds with the first k on host
    host = np.concatenate([[0.0], np.cumsum(h)])
    k = int(np.searchsorted(host - dev_left, 0.0))                   # first k where the host is no faster
    if k == 0:
        return float(dev_left[0])
    if k > len(d):              # the host is faster even with every eligible op: the device's c0 remains
        return float(dev_left[-1])
    # move a fraction x of op k-1 to the host: dev_left[k-1] - x d = host[k-1] + x h
    x = (dev_left[k - 1] - host[k - 1]) / (d[k - 1] + h[k - 1])
    return float(host[k - 1] + x * h[k - 1])


def host_lower_bound_detail(graph: DataflowGraph, op_time, host_time, device, mem_limit: int, eligible,
                            alignment: int = DEFAULT_ALIGNMENT) -> dict:
    """The bound (seconds) and its terms, bytes in and out that no plan with host ops within `eligible` avoids."""
    op_time = np.asarray(op_time, dtype=np.float64)
    host_time = np.asarray(host_time, dtype=np.float64)
    e = sorted({int(o) for o in eligible})
    on_dev = np.ones(graph.num_ops, dtype=bool)
    on_dev[e] = False
    nbytes = graph.tensor_bytes()
    aligned = aligned_bytes(nbytes, alignment)
    prod = graph.producer()
    cons = graph.consumers()
    read_on_dev = lambda t: any(on_dev[c] for c in cons[t])    # noqa: E731
    update_of = {old: new for new, old in graph.updates.items()}
    inputs_in = float(sum(nbytes[t] for t in graph.used_tensors()
                          if graph.tensors[t].kind == "input" and prod[t] < 0 and read_on_dev(t)))
    outputs_out = float(sum(nbytes[t] for t in set(graph.outputs)
                            if prod[t] >= 0 and t not in graph.updates and on_dev[prod[t]]))
    saved = graph.inplace_savings(aligned)        # an op run in place holds its output in its input's bytes
    f_max = max((int(aligned[[t for t in dict.fromkeys((*op.inputs, *op.outputs)) if not graph.is_persistent(t)]]
                             .sum()) - int(saved[op.id]) for op in graph.ops if on_dev[op.id]), default=0)
    max_ws = max((op.workspace for op in graph.ops if on_dev[op.id]), default=0)
    k = [t for t in graph.used_tensors() if graph.is_persistent(t) and read_on_dev(t)
         and (t not in update_of or t in graph.ops[int(prod[update_of[t]])].inputs)]
    k = np.array(k, dtype=np.int64)
    kept = _kept_bytes_bound(nbytes[k], aligned[k], float(mem_limit) - f_max - max_ws) if len(k) else 0.0
    persistent_in = max(0.0, float(nbytes[k].sum()) - kept) if len(k) else 0.0
    upd = np.array([new for new in graph.updates if on_dev[prod[new]]], dtype=np.int64)
    kept_out = _kept_bytes_bound(nbytes[upd], aligned[upd], float(mem_limit) - max_ws) if len(upd) else 0.0
    updates_out = max(0.0, float(nbytes[upd].sum()) - kept_out) if len(upd) else 0.0
    in_b, out_b = inputs_in + persistent_in, outputs_out + updates_out
    d_solo, h_solo, d_both, h_both = _link_rates(device)
    c0 = float(op_time[on_dev].sum())
    terms = {
        "compute_s": split_compute_bound(c0, op_time[e], host_time[e]),
        "h2d_s": in_b / h_solo, "d2h_s": out_b / d_solo,
        "link_s": (in_b + out_b) / max(d_solo, h_solo, d_both + h_both),
    }
    fixed = {"in_bytes": in_b, "out_bytes": out_b, "k_members": k.tolist()}
    terms["split_s"] = split_lp_bound(graph, op_time, host_time, device, mem_limit, e, fixed) if e else 0.0
    return {"host_lower_bound_s": float(max(terms.values())), **{f"host_{k}": float(v) for k, v in terms.items()},
            "inputs_in": inputs_in, "persistent_in": persistent_in, "outputs_out": outputs_out,
            "updates_out": updates_out, "in_bytes": in_b, "out_bytes": out_b, "eligible_ops": len(e)}


# ---------------------------------------------------------------- the split as a linear program
def _state_groups(graph: DataflowGraph, eligible: set[int], on_dev: np.ndarray, k_members: set[int]):
    """Per eligible op u: S_u (bytes of the persistent tensors only u reads, each not updated or updated by u:
    on the device they stay or cross both ways), W_u (persistent tensors a device op reads whose update u
    writes, not in k_members: they cross in when u runs on the host) and G_u (produced tensors only u reads,
    made by device ops: they cross out when u runs on the host)."""
    nbytes = graph.tensor_bytes()
    prod = graph.producer()
    cons = graph.consumers()
    new_of = {old: new for new, old in graph.updates.items()}
    ops = sorted(eligible)
    s = np.zeros(len(ops))
    w = np.zeros(len(ops))
    gr = np.zeros(len(ops))
    for i, u in enumerate(ops):
        outs = set(graph.ops[u].outputs)
        for t in dict.fromkeys(graph.ops[u].inputs):
            only_u = set(cons[t]) == {u}
            if graph.is_persistent(t) and only_u and (t not in new_of or new_of[t] in outs):
                s[i] += min(nbytes[t], nbytes[new_of[t]]) if t in new_of else nbytes[t]
            elif prod[t] >= 0 and only_u and on_dev[prod[t]]:
                gr[i] += nbytes[t]
        for new in outs:
            old = graph.updates.get(new)
            if old is not None and old not in k_members and any(on_dev[c] for c in cons[old]):
                w[i] += min(nbytes[old], nbytes[new])
    return ops, s, w, gr


def _restricted_live(graph: DataflowGraph, on_dev: np.ndarray) -> np.ndarray:
    """L_o of tight_bound.py for device ops o, counting only tensors a device op makes and a later device op
    reads (a tensor a host op makes, or only host ops read, need not cross both ways); 0 for host-able ops."""
    from .tight_bound import ancestor_bitsets

    anc, desc = ancestor_bitsets(graph)
    n = graph.num_ops
    nbytes = graph.tensor_bytes().astype(np.float64)
    prod = graph.producer()
    cons = graph.consumers()
    excluded = set(graph.outputs) | set(graph.updates)
    live = np.zeros(n)
    for t in range(graph.num_tensors):
        p = int(prod[t])
        readers = [r for r in cons[t] if on_dev[r]]
        if p < 0 or not on_dev[p] or t in excluded or not readers:
            continue
        later = np.zeros(anc.shape[1], dtype=np.uint8)
        for r in readers:
            np.bitwise_or(later, anc[r], out=later)
        bits = np.unpackbits(desc[p] & later, bitorder="little", count=n).astype(bool)
        live[bits] += nbytes[t]
        for o in {p, *cons[t]}:          # o's own tensors count in W_o, not in L_o
            if bits[o]:
                live[o] -= nbytes[t]
    live[~on_dev] = 0.0
    return live


def _device_heads(graph: DataflowGraph, op_time: np.ndarray, on_dev: np.ndarray) -> np.ndarray:
    """Per op: the device seconds of its ancestors that must run on the device (and its own, if it must)."""
    from .tight_bound import _closure_times, ancestor_bitsets

    anc, _ = ancestor_bitsets(graph)
    return _closure_times(anc, np.where(on_dev, op_time, 0.0))


def split_lp_bound(graph: DataflowGraph, op_time, host_time, device, mem_limit: int, eligible, fixed: dict,
                   hot_ops: int = 32, placement: bool = False):
    """min T over fractional placements x_u (1: on the host) and kept bytes k_u <= (1 - x_u) S_u of
      T >= c0 + sum (1 - x) d,  T >= sum x h,  in / h2d, out / d2h, (in + out) / link, where
      in  = fixed in  + sum x W + sum ((1 - x) S - k) + y_o,  out = fixed out + sum x G + sum ((1 - x) S - k) + y_o,
      y_o >= sum k + L_o + W_o + ws_o - mem_limit for the device ops o with the largest L_o + W_o + ws_o.
    Sound for every plan with host ops within `eligible`: a kept member (never swapped in) needs its op on the
    device and holds its bytes during every op; a member that is swapped in also crosses out (as itself, when
    it stayed from the last step and its host copy is stale, or as its update, which must reach the host or
    stay); a host op's gradient crosses out and its device-read weight crosses in; y_o is Claim 1 of
    tight_bound.py restricted to tensors made and read again on the device; and a host op waits for the device
    ops it descends from (T >= theta + the host seconds of the host ops whose ancestors take >= theta
    there). `fixed`: host_lower_bound_detail's
    byte terms (inputs, the other persistent tensors, outputs, updates of device ops), disjoint from these.
    placement=True: (the bound, {eligible op: its x in the linear program's optimum}) (a hint, not a plan)."""
    from scipy.optimize import linprog

    op_time = np.asarray(op_time, dtype=np.float64)
    host_time = np.asarray(host_time, dtype=np.float64)
    elig = {int(o) for o in eligible}
    on_dev = np.ones(graph.num_ops, dtype=bool)
    on_dev[sorted(elig)] = False
    k_members = set(fixed.get("k_members", ()))
    ops, s, w, gr = _state_groups(graph, elig, on_dev, k_members)
    m = len(ops)
    if m == 0:
        return (0.0, {}) if placement else 0.0
    nbytes = graph.tensor_bytes()
    saved = graph.inplace_savings(nbytes)        # (as tight_bound.py: an op run in place holds less at once)
    own = np.array([float(nbytes[list(dict.fromkeys((*op.inputs, *op.outputs)))].sum()) - float(saved[op.id])
                    + op.workspace for op in graph.ops])
    live = _restricted_live(graph, on_dev)
    need = np.where(on_dev, live + own, -np.inf)
    hot = [int(o) for o in np.argsort(-need, kind="stable")[:hot_ops] if np.isfinite(need[o])]
    gb = 1e-9                         # bytes in GB: coefficients of like size for the solver
    s, w, gr, need = s * gb, w * gb, gr * gb, need * gb
    d_solo, h_solo, d_both, h_both = (x * gb for x in _link_rates(device))
    link = max(d_solo, h_solo, d_both + h_both)
    d, h = op_time[ops], host_time[ops]
    c0 = float(op_time[on_dev].sum())
    in_f, out_f = float(fixed["in_bytes"]) * gb, float(fixed["out_bytes"]) * gb
    nh = max(1, len(hot))
    nv = 2 * m + nh + 1                         # x, k, y per hot op, T
    X, K, Y, T = 0, m, 2 * m, 2 * m + nh
    rows, rhs = [], []

    def row():
        r = np.zeros(nv)
        rows.append(r)
        return r

    r = row(); r[X:X + m] = -d; r[T] = -1; rhs.append(-(c0 + d.sum()))           # noqa: E702
    r = row(); r[X:X + m] = h; r[T] = -1; rhs.append(0.0)                         # noqa: E702
    for j in range(nh):
        for coef_x, coef_k, coef_y, rate, base in ((w - s, -1, 1, h_solo, in_f + s.sum()),
                                                   (gr - s, -1, 1, d_solo, out_f + s.sum()),
                                                   (w + gr - 2 * s, -2, 2, link, in_f + out_f + 2 * s.sum())):
            r = row()
            r[X:X + m], r[K:K + m], r[Y + j], r[T] = coef_x, coef_k, coef_y, -rate
            rhs.append(-base)
        if hot:
            r = row(); r[K:K + m] = 1; r[Y + j] = -1; rhs.append(float(mem_limit) * gb - need[hot[j]])   # noqa: E702
    for i in range(m):
        r = row(); r[K + i] = 1; r[X + i] = s[i]; rhs.append(float(s[i]))         # noqa: E702
    # a host op starts after the device has run its ancestors (head: their device seconds, host-able ones
    # counted as 0), and the host runs one op at a time: T >= theta + sum of x h over the ops with head >= theta
    head = _device_heads(graph, op_time, on_dev)[ops]
    for theta in np.unique(head):
        r = row(); r[X:X + m] = np.where(head >= theta, h, 0.0); r[T] = -1; rhs.append(-float(theta))  # noqa: E702
    bounds = [(0, 1)] * m + [(0, float(x)) for x in s] + [(0, None)] * nh + [(0, None)]
    c = np.zeros(nv)
    c[T] = 1.0
    res = linprog(c, A_ub=np.array(rows), b_ub=np.array(rhs), bounds=bounds, method="highs")
    if res.status != 0:             # (no answer: the other terms still bound the plan)
        return (0.0, {}) if placement else 0.0
    bound = float(res.fun) * (1 - 1e-9)
    return (bound, dict(zip(ops, res.x[X:X + m].tolist()))) if placement else bound
