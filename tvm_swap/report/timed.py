"""A plan's actions with start and end seconds: what the trace and snapshot exports draw.

Two sources give the same shape, so a predicted and a measured file open side by side in one viewer:

    predicted_timing(graph, plan)                 # the simulator, with the plan device's roofline times
    measured_timing(graph, plan, stamps)          # one traced call of the runtime (runtime_ext executor)

A measured call stamps every copy (start/end on its stream) and each kernel where the program calls the runtime
around it (`tvm_swap.wait` / `tvm_swap.record`, tvm_swap.events.call_sites; all kernels in a library built
with trace=True). Kernels between two stamps ran one after another on the caller's thread, so the time
between the stamps is shared among them in proportion to the plan device's roofline times and marked
`exact=False`. A drop ends when its deps have finished, as the simulator has it (without deps: after the
compute before it in the list). No TVM, no matplotlib.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..plan import ActionKind


@dataclass
class TimedPlan:
    """start/end per action (seconds from the call's start); `exact[i]` False where a time was interpolated."""
    graph: object
    plan: object
    start: np.ndarray
    end: np.ndarray
    time_s: float
    source: str                      # "predicted" or "measured"
    exact: np.ndarray | None = None  # per action; None: all exact (a simulation)

    def is_exact(self, i: int) -> bool:
        return True if self.exact is None else bool(self.exact[i])


def _device_times(graph, plan) -> np.ndarray:
    from ..cost.roofline import roofline_times
    from ..cost.devices import DeviceSpec

    return np.asarray(roofline_times(graph, DeviceSpec.from_dict(plan.device)), dtype=np.float64)


def predicted_timing(graph, plan, op_time=None) -> TimedPlan:
    """The simulator's timeline of `plan` (op_time: seconds per op; default the plan device's roofline)."""
    from ..cost.devices import DeviceSpec
    from ..planner.simulator import simulate
    from .data import plan_op_times

    sim = simulate(graph, plan, plan_op_times(graph, plan, op_time), DeviceSpec.from_dict(plan.device))
    return TimedPlan(graph, plan, np.asarray(sim.start, dtype=np.float64), np.asarray(sim.end, dtype=np.float64),
                     float(sim.time_s), "predicted")


def _stamps(trace) -> dict:
    out: dict = {}
    for i, phase, t in trace:
        out.setdefault(int(i), {})[phase] = float(t)
    return out


def _fill_compute(points: list, weights: list) -> tuple[list, list]:
    """points: times of the caller thread's boundaries (None where unknown), alternating gap/kernel pieces;
    weights[j]: how much of an unknown stretch piece j (between points j and j+1) takes. Fills the unknowns
    linearly between known neighbours; returns (times, known)."""
    n = len(points)
    known = [p is not None for p in points]
    times = list(points)
    j = 0
    while j < n:
        if times[j] is not None:
            j += 1
            continue
        left = j - 1                          # points[0] (call start) is always known
        right = j
        while right < n and times[right] is None:
            right += 1
        if right == n:                        # no later stamp: the rest take their weights as seconds
            for k in range(j, n):
                times[k] = times[k - 1] + weights[k - 1]
            break
        w = np.asarray(weights[left:right], dtype=np.float64)
        span = max(0.0, times[right] - times[left])
        frac = np.cumsum(w) / w.sum() if w.sum() > 0 else np.arange(1, len(w) + 1) / len(w)
        for k, f in zip(range(left + 1, right), frac[:-1]):
            times[k] = times[left] + span * float(f)
        j = right
    return times, known


def measured_timing(graph, plan, trace) -> TimedPlan:
    """The timeline of one traced call: `trace` is [(action, phase, seconds since begin)] as
    runtime_ext.executor.PlanExecutor.traces holds it (see the module docstring for what is interpolated)."""
    st = _stamps(trace)
    acts = plan.actions
    n = len(acts)
    start = np.zeros(n)
    end = np.zeros(n)
    exact = np.zeros(n, dtype=bool)
    weight = _device_times(graph, plan)
    # recomputes are kernels on the caller's thread too (the executor stamps them as it does computes)
    kernels = (ActionKind.COMPUTE, ActionKind.RECOMPUTE)
    computes = [i for i, a in enumerate(acts) if a.kind in kernels]
    end_call = st.get(-1, {}).get("end_call")
    # caller-thread boundaries: call start, then (start, end) of each kernel in order, then the call's end
    points: list = [0.0]
    weights: list = []
    for i in computes:
        s = st.get(i, {})
        weights.append(0.0)                                   # the gap before the kernel
        points.append(s.get("start"))
        weights.append(float(weight[acts[i].op]))             # the kernel
        points.append(s.get("end"))
    weights.append(0.0)
    points.append(end_call)
    times, known = _fill_compute(points, weights)
    for k, i in enumerate(computes):
        start[i], end[i] = times[1 + 2 * k], times[2 + 2 * k]
        exact[i] = known[1 + 2 * k] and known[2 + 2 * k]
    last_compute_end = 0.0
    for i, a in enumerate(acts):
        if a.kind in kernels:
            last_compute_end = end[i]
        elif a.kind in (ActionKind.SWAP_OUT, ActionKind.SWAP_IN):
            s = st.get(i, {})
            if "start" in s and "end" in s:
                start[i], end[i], exact[i] = s["start"], s["end"], True
            else:                                # a copy small enough to run inline: at its place in the program
                start[i] = end[i] = last_compute_end
        else:                                    # a drop: the object is free once its deps are done
            t = max(end[d] for d in a.deps) if a.deps else last_compute_end
            start[i] = end[i] = t
    time_s = float(max(end.max() if n else 0.0, end_call or 0.0))
    return TimedPlan(graph, plan, start, end, time_s, "measured", exact)


__all__ = ["TimedPlan", "predicted_timing", "measured_timing"]
