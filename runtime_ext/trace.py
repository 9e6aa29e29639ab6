"""Reading the executor's stamps: measured per-action timelines and in-situ per-op times.

A traced run (apply_plan(..., trace=True) + executor.trace = True) stamps, relative to `tvm_swap.begin`:
compute i: "wait" (its wait call starts), "start" (the wait is over), "end" (the kernel returned); copies:
"start"/"end" on their stream's worker; the call: "end_call" when `tvm_swap.end` is entered.

`op_times` turns traces of an (unthrottled, no-swap) run into seconds per op as the simulator needs them:
everything the caller's thread does from one kernel's start to the next kernel's wait (view lookups, issuing
copies and drops, VM dispatch) is charged to that kernel, and the call's fixed cost (VM entry, results,
synchronisation, numpy conversion) to the first one. Time spent waiting on other streams is left out: the
simulator adds it from the plan's deps.
"""
from __future__ import annotations

import numpy as np


def stamps(trace) -> dict:
    """action -> {phase: seconds}; the call's own stamps are under action -1."""
    out: dict = {}
    for i, phase, t in trace:
        out.setdefault(int(i), {})[phase] = float(t)
    return out


def timeline(trace, plan) -> dict:
    """action -> (start, end) seconds for every compute and copy that was stamped."""
    st = stamps(trace)
    return {i: (d["start"], d["end"]) for i, d in st.items() if i >= 0 and "start" in d and "end" in d
            and plan.actions[i].kind in ("compute", "recompute", "swap_out", "swap_in")}


def op_times(traces, call_times, plan, num_ops: int, fastest: float = 1 / 3) -> np.ndarray:
    """Seconds per op: the median over the `fastest` fraction of traced calls (by wall time), so calls that
    another process preempted on a shared machine do not inflate the costs (see the module docstring)."""
    computes = [i for i, a in enumerate(plan.actions) if a.kind == "compute"]
    if not computes:
        return np.zeros(num_ops)
    per_call = []
    for trace, call_s in zip(traces, call_times):
        st = stamps(trace)
        if any("wait" not in st.get(i, {}) or "start" not in st.get(i, {}) for i in computes):
            raise ValueError("the trace lacks stamps around every kernel; build with apply_plan(..., trace=True)")
        end_call = st[-1]["end_call"]
        busy = np.zeros(num_ops)
        for k, i in enumerate(computes):
            nxt = st[computes[k + 1]]["wait"] if k + 1 < len(computes) else end_call
            busy[plan.actions[i].op] = max(0.0, nxt - st[i]["start"])
        fixed = max(0.0, float(call_s) - end_call) + st[computes[0]]["wait"]
        busy[plan.actions[computes[0]].op] += fixed
        per_call.append(busy)
    order = np.argsort(np.asarray(call_times[:len(per_call)], dtype=np.float64))
    keep = order[:max(1, int(round(len(per_call) * fastest)))]
    return np.median(np.stack(per_call)[keep], axis=0)
