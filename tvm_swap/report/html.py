"""A self-contained HTML page of a plan: summary table, a hoverable Gantt, the PNG and the SVG.

Nothing external is loaded (no JS, no CDN): the Gantt is hand-written inline SVG whose bars each
carry a <title>, which every browser shows on hover. Bars too thin to point at are merged with
their neighbours, so a 10^4-op plan stays a page of a few MB.
"""
from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass

import numpy as np

from .data import COMPUTE_COLORS, KIND_COLORS, RECOMPUTE_COLOR, STREAM_LABELS, STREAMS, ReportData, StreamBars
from ..units import format_bytes, format_seconds
from ..vocabulary import LABELS

GANTT_MIN_PX, GANTT_MAX_PX = 1200, 8000   # drawing width grows with the op count, then scrolls
PX_PER_OP = 3                             # target width per compute op before merging kicks in
MERGE_PX = 3.0                            # a group of bars may grow to this width in pixels
ROW_PX, LABEL_PX, AXIS_PX = 26, 150, 24
NAMES_IN_MERGED_TITLE = 4


@dataclass(frozen=True)
class MergedBar:
    start: float
    end: float
    first: int     # index into the stream's bars
    last: int      # inclusive

    @property
    def count(self) -> int:
        return self.last - self.first + 1


def gantt_width_px(data: ReportData) -> int:
    return int(np.clip(PX_PER_OP * len(data.bars["compute"]), GANTT_MIN_PX, GANTT_MAX_PX))


def merge_bars(bars: StreamBars, seconds_per_px: float, merge_px: float = MERGE_PX) -> list[MergedBar]:
    """Group consecutive bars while the group stays under `merge_px` wide; wider bars stand alone."""
    limit = merge_px * seconds_per_px
    out: list[MergedBar] = []
    n = len(bars)
    i = 0
    while i < n:
        j = i
        s0 = float(bars.start[i])
        while j + 1 < n and float(bars.end[j + 1]) - s0 <= limit:
            j += 1
        out.append(MergedBar(s0, float(bars.end[i:j + 1].max()), i, j))
        i = j + 1
    return out


def _title(bars: StreamBars, m: MergedBar) -> str:
    if m.count == 1:
        return f"{bars.labels[m.first]} at {format_seconds(bars.start[m.first])}"
    busy = float((bars.end[m.first:m.last + 1] - bars.start[m.first:m.last + 1]).sum())
    names = [bars.labels[k] for k in range(m.first, min(m.last + 1, m.first + NAMES_IN_MERGED_TITLE))]
    more = m.count - len(names)
    return (f"{m.count} bars merged, {format_seconds(m.start)} to {format_seconds(m.end)}, busy "
            f"{format_seconds(busy)}:\n" + "\n".join(names) + (f"\n(+{more} more)" if more > 0 else ""))


def _tick_step(total_s: float, target: int = 10) -> tuple[float, float, str]:
    """A round tick spacing (1, 2 or 5 times a power of ten) giving about `target` ticks, and its unit."""
    raw = total_s / target
    mag = 10 ** np.floor(np.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    div, unit = (1.0, "s") if total_s >= 2 else ((1e-3, "ms") if total_s >= 2e-3 else (1e-6, "us"))
    return float(step), div, unit


def gantt_svg(data: ReportData) -> tuple[str, int]:
    """Inline SVG of the three streams; returns (svg text, number of bars with a hover title)."""
    width = gantt_width_px(data)
    total = max(data.time_s, 1e-12)
    spp = total / width
    height = ROW_PX * len(STREAMS) + AXIS_PX
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + LABEL_PX + 10}" height="{height}" '
             f'font-family="sans-serif" font-size="11">']
    n_titled = 0
    for row, s in enumerate(STREAMS):
        y = row * ROW_PX
        parts.append(f'<text x="4" y="{y + ROW_PX * 0.65:.0f}">{html.escape(STREAM_LABELS[s])}</text>')
        parts.append(f'<rect x="{LABEL_PX}" y="{y + 2}" width="{width}" height="{ROW_PX - 4}" fill="#f3f3f3"/>')
        bars = data.bars[s]
        for k, m in enumerate(merge_bars(bars, spp)):
            x = LABEL_PX + m.start / spp
            w = max((m.end - m.start) / spp, 0.8)
            if s == "compute":
                color = RECOMPUTE_COLOR if bars.kinds[m.first] == "recompute" else COMPUTE_COLORS[k % 2]
            else:
                color = KIND_COLORS.get(bars.kinds[m.first], "#999999")
            parts.append(f'<rect class="bar" x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="{ROW_PX - 8}" '
                         f'fill="{color}"><title>{html.escape(_title(bars, m))}</title></rect>')
            n_titled += 1
    axis_y = ROW_PX * len(STREAMS) + 14
    step, div, unit = _tick_step(total, target=max(10, width // 120))  # a label every ~120 px
    for k in range(int(total / step + 1e-9) + 1):
        x = LABEL_PX + k * step / spp
        parts.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{axis_y - 10}" stroke="#ccc" stroke-width="0.5"/>')
        parts.append(f'<text x="{x:.1f}" y="{axis_y + 6}" text-anchor="{"start" if k == 0 else "middle"}">'
                     f'{k * step / div:g} {unit}</text>')
    parts.append("</svg>")
    return "\n".join(parts), n_titled


SUMMARY_LABELS = {     # the numbers' words where the commands print the same numbers (tvm_swap.vocabulary)
    "planner": "planner", "graph": "graph", "device": "device", "mem_limit_bytes": LABELS["mem_limit_bytes"],
    "peak_bytes": LABELS["peak_bytes"], "pool_bytes": LABELS["pool_bytes"], "ideal_time_s": "ideal (no limit)",
    "lower_bound_s": "lower bound", "predicted_time_s": LABELS["predicted_time_s"],
    "time_s": LABELS["predicted_time_s"], "throughput_vs_ideal": "throughput vs ideal",
    "time_vs_lower_bound": "time vs lower bound", "tight_lower_bound_s": "tight lower bound",
    "time_vs_tight_bound": "time vs tight bound", "swap_out_bytes": "swapped out",
    "swap_in_bytes": "swapped in", "swap_out_count": "swap-outs", "swap_in_count": "swap-ins",
    "verified": "verified", "search_s": "search time", "generations": "generations", "seed": "seed",
}


def format_summary_value(key: str, value) -> str:
    if value is None:
        return "-"
    if key == "verified":
        return "yes" if value else "no"
    if key.endswith("_bytes"):
        return f"{format_bytes(value)} ({int(value):,} B)"
    if key.endswith("_s"):
        return format_seconds(value)
    if key == "throughput_vs_ideal":
        return f"{float(value):.3f}"
    if key in ("time_vs_lower_bound", "time_vs_tight_bound"):
        return f"{float(value):.3f}x"
    return str(value)


def summary_table(summary: dict) -> str:
    rows = "\n".join(
        f"<tr><th>{html.escape(SUMMARY_LABELS.get(k, k.replace('_', ' ')))}</th>"
        f"<td>{html.escape(format_summary_value(k, v))}</td></tr>"
        for k, v in summary.items() if not (k == "time_s" and "predicted_time_s" in summary))   # (one number)
    return f'<table class="summary">\n{rows}\n</table>'


def _legend() -> str:
    items = [("compute", COMPUTE_COLORS[0]), ("recompute", RECOMPUTE_COLOR)] + \
        [(k.replace("_", " "), c) for k, c in KIND_COLORS.items()]
    return " ".join(f'<span class="key"><span class="sw" style="background:{c}"></span>{html.escape(n)}</span>'
                    for n, c in items)


def _inline_svg(svg_text: str) -> str:
    """matplotlib's SVG without the XML prolog, so it can sit inside the page."""
    svg_text = re.sub(r"^\s*<\?xml[^>]*\?>", "", svg_text)
    return re.sub(r"<!DOCTYPE[^>]*>", "", svg_text, count=1).strip()


CSS = """body{font-family:sans-serif;margin:1.5em;color:#222}
table.summary{border-collapse:collapse;margin:1em 0}
table.summary th{text-align:left;padding:2px 14px 2px 0;font-weight:normal;color:#555}
table.summary td{padding:2px 0;font-family:monospace}
.gantt{overflow-x:auto;border:1px solid #ddd;padding:4px}
.gantt rect.bar:hover{stroke:#000;stroke-width:1}
.key{margin-right:12px;font-size:12px}
.sw{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:middle}
img{max-width:100%}"""


def html_page(data: ReportData, png: bytes, svg_text: str) -> tuple[str, int]:
    """The page; returns (html text, number of hoverable Gantt bars)."""
    gantt, n_titled = gantt_svg(data)
    title = html.escape(data.title)
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>{CSS}</style></head>
<body>
<h1 style="font-size:1.3em">{title}</h1>
<h2 style="font-size:1.1em">Summary</h2>
{summary_table(data.summary)}
<h2 style="font-size:1.1em">Streams (hover a bar for the op, its kernel and duration)</h2>
<p>{_legend()}</p>
<div class="gantt">
{gantt}
</div>
<h2 style="font-size:1.1em">Memory timeline, streams and search</h2>
<img alt="plan picture" src="data:image/png;base64,{base64.b64encode(png).decode('ascii')}">
<details><summary>the same picture as vector graphics (SVG)</summary>
{_inline_svg(svg_text)}
</details>
</body></html>
"""
    return page, n_titled
