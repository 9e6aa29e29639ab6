"""scripts/bench_paper.py keeps both pools' cells: labels old ones, merges runs, writes the README table."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_paper_pools", ROOT / "scripts" / "bench_paper.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
