"""Pictures of a plan (tvm_swap.report): files, sizes, the HTML's summary and hover titles, errors."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from tvm_swap import testing  # noqa: E402
from tvm_swap.errors import TvmSwapError  # noqa: E402
from tvm_swap.planner.simulator import simulate  # noqa: E402
from tvm_swap.report.write import write_report, write_report_file  # noqa: E402
from tvm_swap.report.data import STREAMS, ReportData, StreamBars, build_report_data  # noqa: E402
from tvm_swap.report.figure import figure_size_px  # noqa: E402
from tvm_swap.report.html import (GANTT_MAX_PX, MERGE_PX, format_summary_value, gantt_svg,  # noqa: E402
                                  html_page, merge_bars)
from tvm_swap.units import format_bytes, format_seconds  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _plan(with_history: bool, seed: int = 3):
    g = testing.random_training_graph(seed, n_layers=6, momentum=True)
    plan = testing.simple_plan_for(g)
    op_time = testing.random_op_times(g, seed=seed)
    sim = simulate(g, plan, op_time, plan.device)
    ideal = float(op_time.sum())
    plan.predicted = {"time_s": sim.time_s, "ideal_time_s": ideal, "lower_bound_s": 0.9 * ideal,
                      "throughput_vs_ideal": ideal / sim.time_s, "pool_bytes": plan.pool.total_bytes(),
                      "peak_bytes": plan.pool.total_bytes(), **plan.swap_stats(g.tensor_bytes())}
    if with_history:
        plan.search = {"search_s": 4.2, "generations": 12, "seed": 0,
                       "history": [[i, 0.35 * i, sim.time_s * (1 + 1.0 / (i + 1))] for i in range(13)]}
    return g, plan, op_time


@pytest.fixture(scope="module")
def searched():
    return _plan(with_history=True)


@pytest.fixture(scope="module")
def report_dir(searched, tmp_path_factory):
    g, plan, op_time = searched
    d = tmp_path_factory.mktemp("report")
    return write_report(g, plan, d / "out", op_time=op_time)


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_write_report_writes_png_svg_html(report_dir):
    assert [p.suffix for p in report_dir] == [".png", ".svg", ".html"]
    for p in report_dir:
        assert p.stat().st_size > 1000, p
    assert report_dir[0].read_bytes()[:8] == PNG_MAGIC
    assert "<svg" in report_dir[1].read_text()[:2000]
    assert report_dir[2].read_text().startswith("<!DOCTYPE html>")


def test_png_decodes_with_the_expected_size(searched, report_dir):
    import matplotlib.image

    g, plan, op_time = searched
    w, h = figure_size_px(build_report_data(g, plan, op_time))
    img = matplotlib.image.imread(report_dir[0])
    assert img.shape[:2] == (h, w)
    assert _png_size(report_dir[0].read_bytes()) == (w, h)
    # not a blank canvas: the panels put many distinct colours on it
    assert len(np.unique(img[::3, ::3].reshape(-1, img.shape[2]), axis=0)) > 50


def test_plan_without_search_history_renders_without_search_panel(searched, tmp_path):
    g, plan, op_time = _plan(with_history=False)
    path = write_report_file(g, plan, tmp_path / "plain.png", op_time=op_time)
    w, h = _png_size(path.read_bytes())
    w_s, h_s = figure_size_px(build_report_data(*searched))
    assert w == w_s and h < h_s          # the same width, one panel fewer
    assert (w, h) == figure_size_px(build_report_data(g, plan, op_time))


@pytest.mark.parametrize("ext", [".png", ".svg", ".html"])
def test_write_report_file_each_format(searched, tmp_path, ext):
    g, plan, op_time = searched
    path = write_report_file(g, plan, tmp_path / "sub" / f"plan{ext}", op_time=op_time)
    assert path.exists() and path.stat().st_size > 1000


def test_html_holds_summary_values_png_and_svg(searched, report_dir):
    g, plan, _ = searched
    page = report_dir[2].read_text()
    s = plan.summary()
    for text in (plan.planner, plan.graph_name, format_seconds(s["time_s"]), format_seconds(s["ideal_time_s"]),
                 format_bytes(s["mem_limit_bytes"]), format_bytes(s["pool_bytes"]), f"{s['throughput_vs_ideal']:.3f}",
                 format_summary_value("swap_in_bytes", s["swap_in_bytes"])):
        assert text in page, text
    assert "data:image/png;base64," in page
    assert page.count("<svg") == 2            # the hoverable Gantt and matplotlib's figure
    assert "<?xml" not in page                # the SVG prolog is stripped so it can sit inline
    # self-contained: nothing is fetched (namespace URIs in the SVG are names, not downloads)
    assert "<script" not in page and not re.search(r"""(src|href)=["']https?:""", page)


def test_html_has_one_hover_title_per_merged_bar(searched):
    g, plan, op_time = searched
    data = build_report_data(g, plan, op_time)
    page, n_titled = html_page(data, b"png", "<svg></svg>")
    bars = re.findall(r'<rect class="bar"[^>]*><title>([^<]*)</title></rect>', page)
    assert len(bars) == n_titled
    spp = data.time_s / _gantt_width(data)
    merged = [m for s in STREAMS for m in merge_bars(data.bars[s], spp)]
    assert n_titled == len(merged)
    assert sum(m.count for m in merged) == len([a for a in plan.actions if a.kind != "drop"])
    # a bar that stands alone is titled with its op's name, kernel and duration
    op_bars = [t for t in bars if ("[dense]" in t or "[sgd]" in t) and "merged" not in t]
    assert op_bars and all(re.search(r"\d (us|ms|s) at ", t) for t in op_bars)


def _gantt_width(data):
    from tvm_swap.report.html import gantt_width_px

    return gantt_width_px(data)


def _synthetic(n: int, total_s: float = 1.0) -> ReportData:
    """n equal back-to-back bars on each stream (no simulation needed)."""
    edges = np.linspace(0, total_s, n + 1)
    bars = {s: StreamBars(np.arange(n), edges[:-1].copy(), edges[1:].copy(), [f"op{i} [k] x" for i in range(n)],
                          ["compute" if s == "compute" else "activation"] * n) for s in STREAMS}
    t = edges[:-1]
    return ReportData(title="synthetic", time_s=total_s, bars=bars, mem_times=t,
                      mem_by_kind={"activation": (np.arange(n) % 50 + 1) * 1e6}, mem_limit=int(60e6),
                      pool_bytes=int(55e6), summary={"planner": "x", "time_s": total_s})


def test_merge_keeps_wide_bars_and_merges_tiny_ones():
    start = np.array([0.0, 0.10, 0.101, 0.102, 0.5])
    end = np.array([0.09, 0.1005, 0.1015, 0.103, 0.9])
    b = StreamBars(np.arange(5), start, end, [f"b{i}" for i in range(5)], ["compute"] * 5)
    m = merge_bars(b, seconds_per_px=0.001, merge_px=MERGE_PX)  # 3 ms per merged bar at most
    assert [(x.first, x.last) for x in m] == [(0, 0), (1, 3), (4, 4)]
    assert m[1].start == 0.10 and m[1].end == 0.103


def test_html_of_a_10k_op_plan_stays_small():
    data = _synthetic(12_000)
    svg, n_titled = gantt_svg(data)
    # two neighbouring merged bars always span more than MERGE_PX, which bounds their number
    assert n_titled <= len(STREAMS) * (2 * GANTT_MAX_PX / MERGE_PX + 1)
    assert n_titled < 3 * 12_000              # merging happened
    assert len(svg) < 3_000_000
    assert "bars merged" in svg


@pytest.mark.slow   # a wall-clock assertion: only with the slow tests
def test_html_of_a_10k_op_plan_is_fast():
    import time

    data = _synthetic(12_000)
    t0 = time.perf_counter()
    gantt_svg(data)
    assert time.perf_counter() - t0 < 3.0


def test_figure_of_a_10k_op_plan_stays_small(tmp_path):
    from tvm_swap.report.figure import draw_figure

    fig = draw_figure(_synthetic(12_000))
    fig.savefig(tmp_path / "big.png")
    fig.savefig(tmp_path / "big.svg")
    assert (tmp_path / "big.svg").stat().st_size < 2_000_000   # dense collections are rasterized


def test_unknown_extension_is_a_clear_error(searched, tmp_path):
    g, plan, op_time = searched
    with pytest.raises(TvmSwapError, match=r"\.png, \.svg, \.html.*'\.pdf'"):
        write_report_file(g, plan, tmp_path / "plan.pdf", op_time=op_time)
    with pytest.raises(TvmSwapError, match="no extension"):
        write_report_file(g, plan, tmp_path / "plan", op_time=op_time)
    assert not list(tmp_path.iterdir())       # refused before anything was written


def test_report_into_a_file_path_is_refused(searched, tmp_path):
    g, plan, op_time = searched
    f = tmp_path / "not_a_dir"
    f.write_text("x")
    with pytest.raises(TvmSwapError, match="directory"):
        write_report(g, plan, f, op_time=op_time)


def test_missing_matplotlib_says_what_to_install(searched, tmp_path, monkeypatch):
    g, plan, op_time = searched
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # makes `import matplotlib` fail
    with pytest.raises(TvmSwapError, match=r"pip install 'tvm_swap\[plots\]'"):
        write_report_file(g, plan, tmp_path / "p.png", op_time=op_time)


def test_op_time_of_the_wrong_length_is_refused(searched, tmp_path):
    g, plan, op_time = searched
    with pytest.raises(ValueError, match="op_time has"):
        write_report_file(g, plan, tmp_path / "p.png", op_time=op_time[:-1])


def test_report_modules_import_neither_tvm_nor_pyplot():
    code = ("import sys, tvm_swap.report, tvm_swap.report.data, tvm_swap.report.figure, tvm_swap.report.html; "
            "bad = [m for m in ('tvm', 'matplotlib.pyplot') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bars_follow_the_simulation(searched):
    g, plan, op_time = searched
    data = build_report_data(g, plan, op_time)
    sim = simulate(g, plan, op_time, plan.device)
    c = data.bars["compute"]
    assert len(c) == sum(a.kind == "compute" for a in plan.actions)
    np.testing.assert_allclose(c.start, sim.start[c.action])
    np.testing.assert_allclose(c.end, sim.end[c.action])
    assert data.time_s == pytest.approx(sim.time_s)
    assert all(plan.actions[i].kind == "swap_in" for i in data.bars["h2d"].action)


def test_a_plan_for_another_graph_is_refused(searched, tmp_path):
    from tvm_swap.errors import PlanError

    _, plan, _ = searched
    other = testing.random_training_graph(99, n_layers=3)
    with pytest.raises(PlanError, match="made for graph"):
        write_report_file(other, plan, tmp_path / "p.png", op_time=np.ones(other.num_ops))


def _bench_module():
    import bench.paper

    return bench.paper


def test_benchmark_table_shows_fractions_oom_and_paper_values():
    bench = _bench_module()
    ok = {"status": "ok", "time_s": 2.0, "throughput_vs_ideal": 0.5}
    row = {"model": "wresnet-152-10", "batch": 32, "ops": 10, "need_bytes": 95 * 2**30, "mem_limit_bytes": 16 * 10**9,
           "ideal_time_s": 1.0, "lower_bound_s": 1.6, "paper": {"swapadvisor": 0.95, "odswap": 0.82},
           "planners": {"swapadvisor": ok, "noswap": {"status": "oom", "needs_bytes": 95 * 2**30}}}
    meta = {"planners": ["swapadvisor", "noswap"], "device": "v100-16gb", "mem_limit_bytes": 16 * 10**9,
            "budget_s": 60.0, "cpus": 2, "seed": 0, "quick": False, "commit": "abc", "wall_s": 1.0}
    md = bench.markdown({"meta": meta, "rows": [row], "sweeps": [], "pictures": []})
    line = next(x for x in md.splitlines() if x.startswith("| wresnet-152-10"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    k = cells.index("0.500")                    # the planner cells, then the paper's and time / LB
    assert cells[k:k + 5] == ["0.500", "OOM (needs 95.00 GiB)", "0.95", "0.82", "1.25x"]
    assert bench.sweep_limits(100, 10, 3) == [100, 31, 10]
