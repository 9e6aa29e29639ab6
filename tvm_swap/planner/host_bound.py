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
    f_max = max((int(aligned[[t for t in dict.fromkeys((*op.inputs, *op.outputs)) if not graph.is_persistent(t)]]
                             .sum()) for op in graph.ops if on_dev[op.id]), default=0)
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
    return {"host_lower_bound_s": float(max(terms.values())), **{f"host_{k}": float(v) for k, v in terms.items()},
            "inputs_in": inputs_in, "persistent_in": persistent_in, "outputs_out": outputs_out,
            "updates_out": updates_out, "in_bytes": in_b, "out_bytes": out_b, "eligible_ops": len(e)}
