"""Pictures of a plan: `tvm-swap report PLAN.json -o FILE` and `tvm-swap plan ... --report DIR`.

    write_report_file(graph, plan, "plan.png")      # or .svg, or .html (a page holding both + a summary)
    write_report(graph, plan, "out/")               # -> [out/NAME.png, out/NAME.svg, out/NAME.html]
    write_report_file(graph, plan, "plan.trace.json")   # Perfetto / chrome://tracing (report/trace.py)
    write_report_file(graph, plan, "plan.pickle")       # PyTorch's memory visualiser (report/snapshot.py)

One figure: memory in use over the iteration stacked by tensor kind with the limit and the pool size;
a Gantt of the compute, swap-out and swap-in streams on the same time axis; and the search's best
time per generation against the ideal and the lower bound, when the plan has a search history.
Needs matplotlib (`pip install 'tvm_swap[plots]'`); never imports TVM.
"""
from __future__ import annotations

import io
import re
from pathlib import Path

from ..errors import TvmSwapError

EXTENSIONS = (".png", ".svg", ".html")
# files for other people's viewers (no matplotlib): Chrome trace events (Perfetto), PyTorch's memory snapshot
EXPORTS = (".trace.json", ".pickle")


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise TvmSwapError("plan pictures need matplotlib: pip install 'tvm_swap[plots]'") from None


def _extension(path: Path) -> str:
    name = path.name.lower()
    export = next((e for e in EXPORTS if name.endswith(e)), None)
    if export:
        return export
    ext = path.suffix.lower()
    ext = ".html" if ext == ".htm" else ext
    if ext not in EXTENSIONS:
        raise TvmSwapError(f"cannot write a report to {str(path)!r}: the file name must end in "
                           f"{', '.join(EXTENSIONS + EXPORTS)} (got {ext or 'no extension'!r})")
    return ext


def _write_export(graph, plan, path: Path, ext: str, op_time=None) -> Path:
    from ..verify import refuse_invalid
    from .data import check_plan_graph
    from .timed import predicted_timing

    check_plan_graph(graph, plan)
    refuse_invalid(graph, plan, "export")
    timed = predicted_timing(graph, plan, op_time)
    if ext == ".trace.json":
        from .trace import write_chrome_trace

        return write_chrome_trace(timed, path)
    from .snapshot import write_memory_snapshot

    return write_memory_snapshot(timed, path)


class _Rendered:
    """The figure drawn once, saved in whichever formats are asked for."""

    def __init__(self, graph, plan, op_time=None):
        _require_matplotlib()
        from .data import build_report_data
        from .figure import draw_figure

        self.data = build_report_data(graph, plan, op_time)
        self.fig = draw_figure(self.data)
        self._cache: dict[str, bytes] = {}

    def image(self, fmt: str) -> bytes:
        if fmt not in self._cache:
            buf = io.BytesIO()
            # metadata without a date, so the same plan gives the same file
            meta = {"Software": "tvm_swap"} if fmt == "png" else {"Date": None}
            self.fig.savefig(buf, format=fmt, metadata=meta)
            self._cache[fmt] = buf.getvalue()
        return self._cache[fmt]

    def html(self) -> str:
        from .html import html_page

        page, _ = html_page(self.data, self.image("png"), self.image("svg").decode("utf-8"))
        return page

    def write(self, path: Path, ext: str) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        if ext == ".html":
            path.write_text(self.html(), encoding="utf-8")
        else:
            path.write_bytes(self.image(ext[1:]))
        return path


def write_report_file(graph, plan, path, op_time=None) -> Path:
    """Write one picture of `plan` to `path` (.png, .svg or .html), or its predicted timeline for another
    viewer (.trace.json: Chrome trace events for Perfetto; .pickle: PyTorch's memory snapshot); returns the path."""
    path = Path(path)
    ext = _extension(path)
    if ext in EXPORTS:
        return _write_export(graph, plan, path, ext, op_time)
    return _Rendered(graph, plan, op_time).write(path, ext)


def _stem(plan) -> str:
    name = f"{plan.graph_name}-{plan.planner}"
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", name).strip("_") or "plan"


def write_report(graph, plan, directory, op_time=None) -> list[Path]:
    """Write NAME.png, NAME.svg and NAME.html of `plan` into `directory` (and NAME-layout.png, the address
    layout over time, for an arena plan); returns the paths."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise TvmSwapError(f"--report {str(directory)!r} is a file; give a directory to write the pictures into")
    r = _Rendered(graph, plan, op_time)
    stem = _stem(plan)
    out = [r.write(directory / f"{stem}{ext}", ext) for ext in EXTENSIONS]
    if getattr(plan.pool, "kind", "") == "arena":     # and where each stay sits in the arena
        from .layout import write_layout_png

        out.append(write_layout_png(graph, plan, directory / f"{stem}-layout.png", op_time))
    return out


__all__ = ["write_report_file", "write_report", "EXTENSIONS", "EXPORTS"]
