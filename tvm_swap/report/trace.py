"""A plan's timeline in the Chrome trace event format, which Perfetto (ui.perfetto.dev) and chrome://tracing open.

    tvm-swap report plan.json -o plan.trace.json      # predicted (the simulator)
    tvm-swap run model.so --trace run.trace.json      # measured (one traced call of the runtime)

One process per file (named by its source), one thread per stream: compute, swap-out (D2H), swap-in (H2D),
named by "thread_name" metadata and ordered by "thread_sort_index". Each kernel is a complete ("X") slice
named by its op, each copy one named by its tensor; args carry the action index, kernel, bytes, tensor kind
and whether the time was stamped or interpolated (tvm_swap.report.timed). A counter ("C") track gives device
bytes in use by tensor kind (the pool's workspace as a kind of its own), and one more the object bytes the
pool has occupied next to the limit. Timestamps are microseconds from the call's start.
See https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU for the format.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..plan import STREAM_OF, ActionKind
from ..units import format_bytes
from .timed import TimedPlan

PID = 1
STREAM_TIDS = {"compute": 1, "d2h": 2, "h2d": 3}
STREAM_NAMES = {"compute": "compute", "d2h": "swap-out (D2H)", "h2d": "swap-in (H2D)"}
MEMORY_COUNTER = "device bytes by kind"
POOL_COUNTER = "pool bytes occupied"


def _us(seconds: float) -> float:
    return round(float(seconds) * 1e6, 3)


def _metadata(timed: TimedPlan) -> list[dict]:
    plan = timed.plan
    dev = (plan.device or {}).get("name", "?")
    proc = f"{timed.source}: {plan.graph_name} ({plan.planner} on {dev}, limit {format_bytes(plan.mem_limit)})"
    out = [{"name": "process_name", "ph": "M", "pid": PID, "tid": 0, "args": {"name": proc}},
           {"name": "process_sort_index", "ph": "M", "pid": PID, "tid": 0, "args": {"sort_index": 0}}]
    for stream, tid in STREAM_TIDS.items():
        out.append({"name": "thread_name", "ph": "M", "pid": PID, "tid": tid, "args": {"name": STREAM_NAMES[stream]}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": PID, "tid": tid, "args": {"sort_index": tid}})
    return out


def _slices(timed: TimedPlan) -> list[dict]:
    graph, plan = timed.graph, timed.plan
    tb = graph.tensor_bytes()
    out = []
    for i, a in enumerate(plan.actions):
        stream = STREAM_OF[a.kind]
        if stream is None:
            continue
        timing = "stamped" if timed.is_exact(i) else "interpolated"
        if a.kind == ActionKind.COMPUTE:
            op = graph.ops[a.op]
            name, cat = op.name, "kernel"
            args = {"action": i, "op": a.op, "kernel": op.kernel, "timing": timing}
        else:
            t = graph.tensors[a.tensor]
            name, cat = t.name, str(a.kind)
            args = {"action": i, "tensor": t.name, "kind": t.kind, "bytes": int(tb[a.tensor]), "object": a.obj,
                    "timing": timing}
        out.append({"name": name, "cat": cat, "ph": "X", "ts": _us(timed.start[i]),
                    "dur": _us(max(0.0, timed.end[i] - timed.start[i])), "pid": PID, "tid": STREAM_TIDS[stream],
                    "args": args})
    return out


def _counters(timed: TimedPlan) -> list[dict]:
    from ..planner.timeline import memory_timeline

    plan = timed.plan
    tl = memory_timeline(timed.graph, plan, timed)
    ws = int(plan.pool.workspace_bytes)
    kinds = sorted(tl["by_kind"])
    out = []
    last_kind = last_pool = None
    times = np.asarray(tl["time"], dtype=np.float64)
    for j, t in enumerate(times):
        if j + 1 < len(times) and times[j + 1] == t:
            continue                       # several changes at one instant: only the state after them all
        args = {k: int(tl["by_kind"][k][j]) for k in kinds}
        if ws:
            args["workspace"] = ws
        if args != last_kind:
            out.append({"name": MEMORY_COUNTER, "ph": "C", "ts": _us(t), "pid": PID, "tid": 0, "args": args})
            last_kind = args
        pool = {"occupied": int(tl["bytes"][j]) + ws, "limit": int(plan.mem_limit)}
        if pool != last_pool:
            out.append({"name": POOL_COUNTER, "ph": "C", "ts": _us(t), "pid": PID, "tid": 0, "args": pool})
            last_pool = pool
    return out


def chrome_trace(timed: TimedPlan) -> dict:
    """The JSON object (traceEvents + otherData) of `timed`."""
    plan = timed.plan
    p = plan.predicted or {}
    other = {"tool": "tvm_swap", "source": timed.source, "graph": plan.graph_name, "planner": plan.planner,
             "device": (plan.device or {}).get("name"), "mem_limit_bytes": int(plan.mem_limit),
             "pool_bytes": int(p.get("pool_bytes") or plan.pool.total_bytes()), "time_s": timed.time_s,
             "predicted_time_s": p.get("time_s")}
    events = _metadata(timed) + _slices(timed) + _counters(timed)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def write_chrome_trace(timed: TimedPlan, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(timed), separators=(",", ":")), encoding="utf-8")
    return path


__all__ = ["chrome_trace", "write_chrome_trace", "STREAM_TIDS", "STREAM_NAMES", "MEMORY_COUNTER", "POOL_COUNTER"]
