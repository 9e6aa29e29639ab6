"""bench/paper.py keeps both pools' cells: labels old ones, merges runs, writes the README table."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    import bench.paper

    return bench.paper


def _ok(v, pool=None, commit="abc"):
    r = {"status": "ok", "time_s": 1.0 / v, "throughput_vs_ideal": v, "commit": commit}
    if pool:
        r["pool"] = pool
    return r


def _row(cells, batch=32):
    return {"model": "nasnet-25", "batch": batch, "ops": 10, "need_bytes": 190 * 2**30, "mem_limit_bytes": 16 * 10**9,
            "ideal_time_s": 1.0, "lower_bound_s": 1.0, "tight_lower_bound_s": 1.0, "commit": "abc", "budget_s": 60.0,
            "paper": {"swapadvisor": 0.60, "odswap": 0.30}, "planners": cells}


def test_cells_from_before_pools_are_size_class_cells(bench):
    old = _row({"swapadvisor": _ok(0.7), "odswap": _ok(0.3), "swapadvisor-nosearch": _ok(0.5)})
    res = bench.label_pools({"rows": [old]})
    cells = res["rows"][0]["planners"]
    assert set(cells) == {"swapadvisor@size-classes", "swapadvisor-nosearch@size-classes", "odswap"}
    assert all(c["pool"] == "size-classes" for c in cells.values())
    new = _row({"swapadvisor": _ok(0.8, "arena")})
    assert bench.label_pools({"rows": [new]})["rows"][0]["planners"] == {"swapadvisor": _ok(0.8, "arena")}


def test_readme_table_shows_both_pools_and_the_better_one_against_the_bound(bench):
    cells = {"swapadvisor": _ok(0.8, "arena"), "swapadvisor@size-classes": _ok(0.6, "size-classes"),
             "odswap": {"status": "infeasible", "needs_bytes": 20 * 2**30, "pool": "size-classes"}}
    table = bench.readme_table({"rows": [_row(cells)]})
    line = table.splitlines()[2]
    got = [c.strip() for c in line.strip("|").split("|")]
    assert got[:6] == ["nasnet-25", "32", "190.00 GiB", "12.8x", "0.800", "0.600"]
    assert got[6:] == ["-", "-", "infeasible", "-", "0.60", "0.30", "1.25x"]
    assert table.splitlines()[-1] == "Measured at `abc`, 60 s."


def test_the_results_table_says_where_it_was_measured_once_per_run(bench):
    """The README repeated a 150-character "measured at" cell on every row: now one line per distinct run."""
    late = {"odswap": _ok(0.3, commit="old"), "vdnn": _ok(0.2, commit="old")}
    rows = [_row({"swapadvisor": _ok(0.8, "arena"), **late}, batch=b) for b in (16, 32)]
    rows.append(_row({"swapadvisor": _ok(0.8, "arena"), "vdnn": _ok(0.2, commit="old"),
                      "odswap": _ok(0.3, commit="old")}, batch=64))          # the same run, names in another order
    table = bench.readme_table({"rows": rows})
    assert "measured at" not in table.splitlines()[0]
    assert [ln for ln in table.splitlines() if ln.startswith("Measured at")] == \
        ["Measured at `abc`, 60 s; odswap, vdnn at `old`."]
    rows.append(_row({"swapadvisor": _ok(0.8, "arena")}, batch=128) | {"commit": "new"})
    stamps = [ln for ln in bench.readme_table({"rows": rows}).splitlines() if ln.startswith("Measured at")]
    assert stamps == ["Measured at `abc`, 60 s; odswap, vdnn at `old`: nasnet-25@16, nasnet-25@32, nasnet-25@64.",
                      "Measured at `new`, 60 s; swapadvisor at `abc`: nasnet-25@128."]


def test_write_readme_replaces_only_between_the_markers(bench, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{bench.README_BEGIN}\nold table\n{bench.README_END}\noutro\n")
    bench.write_readme({"rows": [_row({"swapadvisor": _ok(0.5, "arena")})]}, readme)
    text = readme.read_text()
    assert "old table" not in text and text.startswith("intro\n") and text.endswith(f"{bench.README_END}\noutro\n")
    assert "| nasnet-25 | 32 |" in text
    readme.write_text("no markers")
    with pytest.raises(SystemExit, match="markers"):
        bench.write_readme({"rows": []}, readme)


def test_generations_and_both_pools_are_recorded_and_shown(bench):
    args = bench.parse_args(["--points", "nasnet-25@batch=32", "--pool", "both", "--generations", "3"])
    assert args.pools == ["arena", "size-classes"] and args.generations == 3
    assert bench.pools_for("swapadvisor", args) == ["arena", "size-classes"]
    assert bench.pools_for("odswap", args) == ["size-classes"]
    assert bench.parse_args(["--points", "nasnet-25@batch=32"]).pools == ["arena"]
    cells = {"swapadvisor": {**_ok(0.5, "arena"), "search_generations": 3},
             "swapadvisor@size-classes": {**_ok(0.7, "size-classes"), "search_generations": 3},
             "odswap": _ok(0.3, "size-classes", commit="old")}
    row = {**_row(cells), "generations": 3}
    assert bench.measured_at(row, {}) == "`abc`, 3 gen; odswap at `old`"
    cells["swapadvisor"]["search_generations"] = 5          # a cell searched differently names its search
    assert bench.measured_at(row, {}) == "`abc`, 3 gen; swapadvisor at `abc`, 5 gen; odswap at `old`"


def test_pools_section_marks_the_arena_short_of_size_classes_or_the_paper(bench):
    def r(v, pool, out=2 * 2**30, inn=3 * 2**30):
        return {**_ok(v, pool), "swap_out_bytes": out, "swap_in_bytes": inn}

    rows = [{**_row({"swapadvisor": r(0.5, "arena"), "swapadvisor@size-classes": r(0.55, "size-classes")}, batch=16),
             "bound_out_bytes": 2**30, "bound_in_bytes": 2**31},
            _row({"swapadvisor": r(0.9, "arena"), "swapadvisor@size-classes": r(0.8, "size-classes")}, batch=32)]
    lines = [x for x in bench.pools_section({"rows": rows}, {}) if x.startswith("| nasnet-25")]
    got = [[c.strip() for c in x.strip("|").split("|")] for x in lines]
    assert got[0][2:6] == ["0.500", "0.550", "-0.050", "0.60"]
    assert got[0][8:11] == ["2.0 / 3.0", "2.0 / 3.0", "1.0 / 2.0"]
    assert got[0][-1] == "size classes, paper"
    assert got[1][4] == "+0.100" and got[1][-1] == "-" and got[1][10] == "-"


def test_a_sweep_with_both_pools_plots_and_names_its_commit(bench, tmp_path):
    """The sweep's cells are keyed planner[@pool]: the plot orders them by planner (it raised on
    'swapadvisor@size-classes' before), and the markdown names the sweep's commit and generations."""
    pytest.importorskip("matplotlib")
    pts = [{"mem_limit_bytes": 16 * 10**9, "fraction_of_need": 1.0,
            "planners": {"swapadvisor": _ok(0.9), "swapadvisor@size-classes": _ok(0.8, "size-classes"),
                         "noswap": {"status": "oom", "needs_bytes": 10}}},
           {"mem_limit_bytes": 8 * 10**9, "fraction_of_need": 0.5, "planners": {"swapadvisor": _ok(0.7)}}]
    sw = {"model": "m", "batch": 1, "need_bytes": 16 * 10**9, "min_feasible_bytes": 8 * 10**9, "points": pts,
          "commit": "abc1234", "generations": 3}
    bench.plot_sweep(sw, tmp_path / "s.png", "v100-16gb")
    assert (tmp_path / "s.png").stat().st_size > 0
    import json

    result = bench.label_pools(json.loads((ROOT / "benchmarks" / "paper.json").read_text()))
    md = bench.markdown({**result, "sweeps": [sw]})
    assert "Measured at `abc1234`, 3 GA generations per search." in md
