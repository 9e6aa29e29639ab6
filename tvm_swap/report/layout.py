"""The address layout of an arena plan over time, drawn as allocator visualisers draw it.

Every stay of a tensor on the device is a rectangle: from its arrival's start to its drop's end (simulated
seconds) along x, its byte range in the arena along y, coloured by tensor kind. Stays are drawn as one
PolyCollection per kind, so 10^4 stays draw in seconds.

    write_layout_png(graph, plan, "layout.png")
"""
from __future__ import annotations

from pathlib import Path


from .data import KIND_COLORS, KIND_ORDER, plan_op_times
from ..units import format_bytes


def arena_stays(graph, plan, sim) -> list[tuple[int, int, int, float, float]]:
    """(tensor, offset, bytes, begin_s, end_s) per stay; a stay still open at the end runs to the iteration's end."""
    off = plan.pool.object_offset()
    size = plan.pool.object_bytes()
    start, end = sim.start, sim.end
    t_end = float(sim.time_s)
    open_at = {t: (o, 0.0) for t, o in plan.initial_residents}
    over = plan.inplace_by_op()
    out = []
    for i, a in enumerate(plan.actions):
        if a.kind in ("compute", "recompute"):
            ip = over.get(a.op, {}) if a.kind == "compute" else {}
            for t, o in zip(graph.ops[a.op].outputs, a.out_objs):
                if t in ip and ip[t] in open_at:      # run in place: the input's stay ends as the output starts
                    ox, b = open_at.pop(ip[t])
                    out.append((ip[t], int(off[ox]), int(size[ox]), b, float(start[i])))
                open_at[t] = (o, float(start[i]))
        elif a.kind == "swap_in":
            open_at[a.tensor] = (a.obj, float(start[i]))
        elif a.kind == "drop":
            o, b = open_at.pop(a.tensor, (a.obj, 0.0))
            out.append((a.tensor, int(off[o]), int(size[o]), b, float(end[i])))
    out.extend((t, int(off[o]), int(size[o]), b, t_end) for t, (o, b) in open_at.items())
    return out


def draw_layout(graph, plan, op_time=None):
    """A matplotlib Figure (Agg canvas) of the arena's address layout over the simulated iteration."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import PolyCollection
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    from ..cost.devices import DeviceSpec
    from ..planner.simulator import simulate

    if getattr(plan.pool, "kind", "") != "arena":
        raise ValueError("the address layout exists for arena plans only (this plan uses size classes)")
    sim = simulate(graph, plan.actions, plan_op_times(graph, plan, op_time), DeviceSpec.from_dict(plan.device))
    stays = arena_stays(graph, plan, sim)
    fig = Figure(figsize=(13, 5.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes([0.08, 0.12, 0.74, 0.78])
    gib = float(2**30) if plan.pool.arena_bytes >= 2 * 2**30 else float(2**20)
    unit = "GiB" if gib == 2**30 else "MiB"
    by_kind: dict[str, list] = {}
    for t, o, b, x0, x1 in stays:
        x1 = max(x1, x0 + sim.time_s * 1e-4)          # a stay shorter than a pixel stays visible
        y0, y1 = o / gib, (o + b) / gib
        by_kind.setdefault(graph.tensors[t].kind, []).append([(x0, y0), (x1, y0), (x1, y1), (x0, y1)])
    handles = []
    for kind in KIND_ORDER:
        polys = by_kind.get(kind)
        if not polys:
            continue
        color = KIND_COLORS[kind]
        ax.add_collection(PolyCollection(polys, facecolors=color, edgecolors="black", linewidths=0.15,
                                         rasterized=len(polys) > 3000))
        handles.append(Patch(facecolor=color, edgecolor="black", label=f"{kind} ({len(polys)})"))
    top = plan.pool.arena_bytes / gib
    ax.axhline(top, color="crimson", lw=1.0, ls="--")
    ax.text(0, top, f" arena {format_bytes(plan.pool.arena_bytes)}", color="crimson", va="bottom", fontsize=8)
    ax.set_xlim(0, sim.time_s * 1.001 if sim.time_s > 0 else 1)
    ax.set_ylim(0, top * 1.06 if top > 0 else 1)
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel(f"arena offset ({unit})")
    ax.set_title(f"{plan.graph_name}: arena layout under {format_bytes(plan.mem_limit)} "
                 f"({len(stays)} stays, {plan.planner})", fontsize=10)
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.83, 0.9), fontsize=8, frameon=False)
    return fig


def write_layout_png(graph, plan, path, op_time=None) -> Path:
    path = Path(path)
    draw_layout(graph, plan, op_time).savefig(path, format="png", metadata={"Software": "tvm_swap"})
    return path
