"""The plan picture: memory in use by kind, the three streams' Gantt, and the search's convergence.

Draws a ReportData with matplotlib's Agg canvas (report.py checks matplotlib is installed). Bars go into one
collection per stream (broken_barh), never one artist per op, so 10^4-op plans draw in seconds.
"""
from __future__ import annotations

import numpy as np

from .data import COMPUTE_COLORS, KIND_COLORS, RECOMPUTE_COLOR, KIND_ORDER, STREAM_LABELS, STREAMS, ReportData
from ..units import format_bytes, format_seconds

WIDTH_IN = 13.0
DPI = 100
PANEL_IN = {"memory": 3.4, "gantt": 1.9, "search": 2.3}
LEFT_IN, TOP_IN, BOTTOM_IN = 1.35, 0.75, 0.6   # room for row labels, the title and the x label
SPACER_IN = 0.1            # between the Gantt's time axis and the search panel
RIGHT_FRACTION = 0.80      # the legend lives right of the axes, so it never hides data
RASTERIZE_ABOVE = 3000     # bars or memory points: beyond this, vector output would be megabytes
MIN_BAR_PX = 0.7           # a bar thinner than this would vanish; widen it to stay visible


def has_search_panel(data: ReportData) -> bool:
    return data.history is not None and len(data.history) > 0


def figure_size_px(data: ReportData) -> tuple[int, int]:
    """(width, height) in pixels of the PNG, for callers and tests."""
    w, h = _figure_size_in(data)
    return int(round(w * DPI)), int(round(h * DPI))


def _figure_size_in(data: ReportData) -> tuple[float, float]:
    h = PANEL_IN["memory"] + PANEL_IN["gantt"] + TOP_IN + BOTTOM_IN + 0.3
    if has_search_panel(data):
        h += PANEL_IN["search"] + SPACER_IN
    return WIDTH_IN, h


def _time_unit(total_s: float) -> tuple[float, str]:
    if total_s >= 2.0:
        return 1.0, "s"
    if total_s >= 2e-3:
        return 1e3, "ms"
    return 1e6, "us"


def _byte_unit(max_bytes: float) -> tuple[float, str]:
    for div, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if max_bytes >= 2 * div:
            return float(div), unit
    return 1.0, "B"


def draw_figure(data: ReportData):
    """A matplotlib Figure on an Agg canvas (no pyplot: no global state, no backend switch)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    w, h = _figure_size_in(data)
    fig = Figure(figsize=(w, h), dpi=DPI)
    FigureCanvasAgg(fig)
    search = has_search_panel(data)
    # memory and Gantt share the time axis and sit close; a spacer row keeps the search panel apart
    ratios = [PANEL_IN["memory"], PANEL_IN["gantt"]] + ([SPACER_IN, PANEL_IN["search"]] if search else [])
    gs = fig.add_gridspec(len(ratios), 1, height_ratios=ratios, hspace=0.25 * len(ratios) / 4,
                          left=LEFT_IN / w, right=RIGHT_FRACTION, top=1 - TOP_IN / h, bottom=BOTTOM_IN / h)
    ax_mem = fig.add_subplot(gs[0])
    ax_gantt = fig.add_subplot(gs[1], sharex=ax_mem)
    fig.suptitle(data.title, fontsize=12, x=LEFT_IN / w, y=1 - 0.12 / h, ha="left", va="top")

    scale, tunit = _time_unit(max(data.time_s, 1e-12))
    _draw_memory(ax_mem, data, scale)
    _draw_gantt(ax_gantt, data, scale, fig)
    ax_gantt.set_xlabel(f"time within one iteration ({tunit})")
    ax_mem.tick_params(labelbottom=False)
    ax_mem.set_xlim(0, data.time_s * scale * 1.002)
    if search:
        _draw_search(fig.add_subplot(gs[3]), data, scale, tunit)
    return fig


def _draw_memory(ax, data: ReportData, scale: float) -> None:
    t = np.asarray(data.mem_times, dtype=np.float64)
    kinds = [k for k in KIND_ORDER if k in data.mem_by_kind] + \
            sorted(k for k in data.mem_by_kind if k not in KIND_ORDER)
    total = np.zeros(len(t))
    for k in kinds:
        total = total + data.mem_by_kind[k]
    peak = float(total.max()) if len(total) else 0.0
    has_objects = data.mem_objects is not None and len(data.mem_objects) > 0
    obj_peak = float(data.mem_objects.max()) if has_objects else 0.0
    top = max(data.mem_limit, data.pool_bytes, peak, obj_peak, 1)
    div, bunit = _byte_unit(top)
    if len(t):
        # Memory holds its value until the next event; extend the last step to the iteration's end.
        x = np.append(t, max(data.time_s, t[-1])) * scale
        ys = [np.append(data.mem_by_kind[k], data.mem_by_kind[k][-1]) / div for k in kinds]
        polys = ax.stackplot(x, ys, step="post", colors=[KIND_COLORS.get(k, "#999999") for k in kinds],
                             labels=[k.replace("_", " ") for k in kinds], linewidth=0)
        if len(t) > RASTERIZE_ABOVE:
            for p in polys:
                p.set_rasterized(True)
    if has_objects and len(t):
        ax.step(x, np.append(data.mem_objects, data.mem_objects[-1]) / div, where="post", color="#222222",
                linewidth=0.8 if len(t) <= RASTERIZE_ABOVE else 0.4,  # dense plans: a hairline, not a wall
                label="pool objects occupied", rasterized=len(t) > RASTERIZE_ABOVE)
    # the pool often fills the limit: a wide pale band under a thin dashed line keeps both visible
    ax.axhline(data.pool_bytes / div, color="#888888", linewidth=4, alpha=0.5,
               label=f"pool {format_bytes(data.pool_bytes)}")
    ax.axhline(data.mem_limit / div, color="#C00000", linestyle="--", linewidth=1.3,
               label=f"memory limit {format_bytes(data.mem_limit)}")
    ax.set_ylim(0, top / div * 1.1)
    ax.set_ylabel(f"device memory ({bunit})")
    title = f"device memory in use by tensor kind: peak {format_bytes(peak)}"
    if has_objects and obj_peak > 1.01 * peak:  # size classes round tensors up; say so when it shows
        title += f"; occupied pool objects peak at {format_bytes(obj_peak)}"
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(axis="y", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    n = len(kinds) if len(t) else 0
    order = list(range(n))[::-1] + list(range(n, len(handles)))  # legend reads top-down like the stack
    ax.legend([handles[i] for i in order], [labels[i] for i in order], loc="upper left",
              bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)


def _draw_gantt(ax, data: ReportData, scale: float, fig) -> None:
    width_px = max(1.0, fig.get_figwidth() * DPI * (RIGHT_FRACTION - LEFT_IN / WIDTH_IN))
    min_w = data.time_s * scale / width_px * MIN_BAR_PX
    rows = {s: len(STREAMS) - 1 - i for i, s in enumerate(STREAMS)}  # compute on top
    labels = []
    big = data.num_bars > RASTERIZE_ABOVE
    for s in STREAMS:
        b = data.bars[s]
        y = rows[s]
        busy = float((b.end - b.start).sum()) / data.time_s if data.time_s > 0 and len(b) else 0.0
        labels.append((y, f"{STREAM_LABELS[s]}\n{len(b)} ops, busy {100 * busy:.0f}%"))
        if not len(b):
            continue
        x0 = b.start * scale
        wd = np.maximum((b.end - b.start) * scale, min_w)
        if s == "compute":
            colors = [RECOMPUTE_COLOR if k == "recompute" else COMPUTE_COLORS[i % 2] for i, k in enumerate(b.kinds)]
        else:
            colors = [KIND_COLORS.get(k, "#999999") for k in b.kinds]
        coll = ax.broken_barh(np.column_stack([x0, wd]), (y - 0.38, 0.76), facecolors=colors, linewidth=0)
        coll.set_rasterized(big)
    ax.set_yticks([y for y, _ in labels], [lab for _, lab in labels], fontsize=8)
    ax.set_ylim(-0.6, len(STREAMS) - 0.4)
    ax.grid(axis="x", alpha=0.3)
    idle = data.notes.get("compute_idle_s")
    ax.set_title("streams (swap bars coloured by tensor kind, as above)" +
                 (f"; the compute stream waits {format_seconds(idle)} in all" if idle and idle > 0 else ""),
                 fontsize=10, loc="left")


def _draw_search(ax, data: ReportData, scale: float, tunit: str) -> None:
    h = data.history
    gen, elapsed, best = h[:, 0], h[:, 1], h[:, 2]
    ax.step(gen, best * scale, where="post", color="#4C72B0", linewidth=1.8, label="best plan found")
    ax.plot(gen, best * scale, "o", color="#4C72B0", markersize=3)
    # the lower bound is often the ideal itself: wide pale line under a thin dashed one
    if data.ideal_s:
        ax.axhline(data.ideal_s * scale, color="#55A868", linewidth=4, alpha=0.5,
                   label=f"ideal (no limit) {format_seconds(data.ideal_s)}")
    if data.lower_bound_s:
        ax.axhline(data.lower_bound_s * scale, color="#C00000", linestyle="--", linewidth=1.3,
                   label=f"lower bound {format_seconds(data.lower_bound_s)}")
    lo = min([float(best.min())] + [v for v in (data.ideal_s, data.lower_bound_s) if v])
    hi = float(best.max())
    pad = (hi - lo) * 0.1 or hi * 0.05 or 1e-9
    ax.set_ylim(max(0.0, (lo - pad) * scale), (hi + pad) * scale)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("generation")
    ax.set_ylabel(f"iteration time ({tunit})")
    ax.set_title(f"search: best {format_seconds(best[-1])} after {int(gen[-1])} generations, "
                 f"{format_seconds(elapsed[-1])}", fontsize=10, loc="left")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
