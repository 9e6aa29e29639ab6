"""What the plan pictures show, as plain arrays: stream bars, memory in use by kind, search history.

The figure (report_figure) and the HTML page (report_html) only draw a ReportData; all knowledge of
plans, the simulator and the memory timeline lives here. No TVM and no matplotlib imports.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import PlanError
from ..plan import STREAM_OF, ActionKind
from ..units import format_bytes, format_seconds

# Streams in the order they are drawn (top to bottom), with the row labels people read.
STREAMS = ("compute", "d2h", "h2d")
STREAM_LABELS = {"compute": "compute", "d2h": "swap-out (D2H)", "h2d": "swap-in (H2D)"}

# One colour per tensor kind, shared by the memory stack and the swap bars so they read together.
# Stack order, bottom up: the constant workspace reservation first, so the varying kinds ride on a flat floor.
KIND_ORDER = ("workspace", "param", "optimizer_state", "input", "activation", "gradient", "output")
KIND_COLORS = {
    "param": "#4C72B0", "optimizer_state": "#8172B3", "input": "#64B5CD", "activation": "#DD8452",
    "gradient": "#55A868", "output": "#937860", "workspace": "#B8B8B8",
}
COMPUTE_COLORS = ("#3B4A5A", "#7A8B9C")  # alternating, so neighbouring kernels stay apart
RECOMPUTE_COLOR = "#C44E52"               # recomputed kernels: the extra work a plan pays instead of copies


@dataclass
class StreamBars:
    """Bars of one stream, in issue order: action index, start and end (seconds), label, kind."""
    action: np.ndarray
    start: np.ndarray
    end: np.ndarray
    labels: list[str]      # hover text of each bar
    kinds: list[str]       # tensor kind (swaps), "compute" or "recompute"

    def __len__(self) -> int:
        return len(self.action)


@dataclass
class ReportData:
    title: str
    time_s: float                      # simulated iteration time
    bars: dict[str, StreamBars]        # by stream name (STREAMS)
    mem_times: np.ndarray              # seconds, increasing; memory is constant from t[i] to t[i+1]
    mem_by_kind: dict[str, np.ndarray]  # kind -> bytes in use at mem_times (same length)
    mem_limit: int
    pool_bytes: int
    summary: dict                      # Plan.summary()
    mem_objects: np.ndarray | None = None  # pool object bytes occupied (>= the stack: size-class slack)
    history: np.ndarray | None = None  # rows (generation, elapsed_s, best_time_s) or None
    ideal_s: float | None = None
    lower_bound_s: float | None = None
    notes: dict = field(default_factory=dict)

    @property
    def num_bars(self) -> int:
        return sum(len(b) for b in self.bars.values())


def plan_op_times(graph, plan, op_time=None) -> np.ndarray:
    """Seconds per op: the caller's, else the roofline of the device the plan was made for."""
    if op_time is not None:
        t = np.asarray(op_time, dtype=np.float64)
        if t.shape != (graph.num_ops,):
            raise ValueError(f"op_time has {t.size} entries but the graph has {graph.num_ops} ops")
        return t
    from ..cost.roofline import roofline_times
    from ..cost.devices import DeviceSpec

    return np.asarray(roofline_times(graph, DeviceSpec.from_dict(plan.device)), dtype=np.float64)


def _history(plan) -> np.ndarray | None:
    rows = (plan.search or {}).get("history") or []
    try:
        h = np.asarray([[float(r[0]), float(r[1]), float(r[2])] for r in rows], dtype=np.float64)
    except (TypeError, ValueError, IndexError):
        return None  # a history we cannot read is not worth failing the picture over
    return h if len(h) else None


def _bars(graph, plan, start: np.ndarray, end: np.ndarray) -> dict[str, StreamBars]:
    acc: dict[str, tuple[list, list, list]] = {s: ([], [], []) for s in STREAMS}
    tb = graph.tensor_bytes()
    for i, a in enumerate(plan.actions):
        stream = STREAM_OF[a.kind]
        if stream is None:
            continue
        idx, labels, kinds = acc[stream]
        dur = format_seconds(end[i] - start[i])
        if a.kind == ActionKind.COMPUTE:
            op = graph.ops[a.op]
            labels.append(f"{op.name} [{op.kernel}] {dur}")
            kinds.append("compute")
        elif a.kind == ActionKind.RECOMPUTE:
            op = graph.ops[a.op]
            labels.append(f"recompute {op.name} [{op.kernel}] {dur}")
            kinds.append("recompute")
        else:
            t = graph.tensors[a.tensor]
            verb = "swap-out" if a.kind == ActionKind.SWAP_OUT else "swap-in"
            labels.append(f"{verb} {t.name} ({t.kind}, {format_bytes(tb[a.tensor])}) {dur}")
            kinds.append(t.kind)
        idx.append(i)
    out = {}
    for s, (idx, labels, kinds) in acc.items():
        ix = np.asarray(idx, dtype=np.int64)
        out[s] = StreamBars(ix, start[ix] if len(ix) else np.zeros(0), end[ix] if len(ix) else np.zeros(0),
                            labels, kinds)
    return out


def _memory(graph, plan, sim) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """(times, tensor bytes by kind, object bytes occupied); the pool's workspace counts as a kind,
    reserved all iteration, so the stack compares directly with the pool size and the limit."""
    from ..planner.timeline import memory_timeline

    tl = memory_timeline(graph, plan, sim)
    times = np.asarray(tl["time"], dtype=np.float64)
    by_kind = {k: np.asarray(v, dtype=np.float64) for k, v in tl["by_kind"].items()}
    objects = np.asarray(tl["bytes"], dtype=np.float64)
    ws = float(plan.pool.workspace_bytes)
    if ws > 0:
        by_kind["workspace"] = np.full(len(times), ws)
        objects = objects + ws
    return times, by_kind, objects


def check_plan_graph(graph, plan) -> None:
    """PlanError unless `plan` was made for `graph`."""
    if plan.graph_fingerprint != graph.fingerprint():
        raise PlanError(f"the plan was made for graph {plan.graph_name!r} (fingerprint {plan.graph_fingerprint}), "
                        f"not for {graph.name!r} (fingerprint {graph.fingerprint()}): give the plan's own graph")


def build_report_data(graph, plan, op_time=None) -> ReportData:
    """Simulate `plan` with the op times and gather everything the pictures draw."""
    from ..cost.devices import DeviceSpec
    from ..planner.simulator import simulate

    check_plan_graph(graph, plan)
    from ..verify import refuse_invalid

    refuse_invalid(graph, plan, "draw")
    times = plan_op_times(graph, plan, op_time)
    sim = simulate(graph, plan, times, DeviceSpec.from_dict(plan.device))
    start = np.asarray(sim.start, dtype=np.float64)
    end = np.asarray(sim.end, dtype=np.float64)
    mem_t, mem_by_kind, mem_objects = _memory(graph, plan, sim)
    p = plan.predicted or {}
    dev = (plan.device or {}).get("name", "?")
    title = (f"{plan.graph_name}: {plan.planner} on {dev}, limit {format_bytes(plan.mem_limit)}, "
             f"iteration {format_seconds(sim.time_s)}")
    bars = _bars(graph, plan, start, end)
    c = bars["compute"]
    compute_idle = float(sim.time_s) - float((c.end - c.start).sum())
    return ReportData(
        title=title, time_s=float(sim.time_s), bars=bars,
        mem_times=mem_t, mem_by_kind=mem_by_kind, mem_objects=mem_objects, mem_limit=int(plan.mem_limit),
        pool_bytes=int(p.get("pool_bytes") or plan.pool.total_bytes()), summary=plan.summary(),
        history=_history(plan), ideal_s=p.get("ideal_time_s"), lower_bound_s=p.get("lower_bound_s"),
        notes={"compute_idle_s": compute_idle},
    )
