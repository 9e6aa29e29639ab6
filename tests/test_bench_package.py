"""The benchmarks are one package (bench/) with one writer: every result carries the commit, the machine and
its load, and no benchmark writes its JSON by itself."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import SUBCOMMANDS, record

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(p for p in (ROOT / "bench").glob("*.py") if p.stem not in ("__init__", "__main__", "record"))


def _writes_json_itself(path: Path) -> list[int]:
    """Lines where `path` calls json.dump(...) or .write_text(json.dumps(...)): results that bypass bench.record."""
    lines, source = [], path.read_text().splitlines()
    for node in ast.walk(ast.parse("\n".join(source))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "dump" and getattr(node.func.value, "id", "") == "json":
            lines.append(node.lineno)
        if node.func.attr == "write_text" and node.args and isinstance(node.args[0], ast.Call) \
                and getattr(node.args[0].func, "attr", "") == "dumps" \
                and "an input, not a result" not in source[node.lineno - 1]:
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_a_benchmark_has_a_summary_a_main_and_no_writer_of_its_own(path):
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree), f"{path.name}: no docstring (python -m bench lists its first line)"
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body), f"{path.name}: no main()"
    assert _writes_json_itself(path) == [], f"{path.name} writes JSON itself (use bench.record.write)"


def test_the_writer_check_sees_a_json_dump(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import json\nfrom pathlib import Path\n"
                   "def main():\n    Path('x').write_text(json.dumps({}))\n    json.dump({}, open('y', 'w'))\n")
    assert _writes_json_itself(bad) == [4, 5]


def test_python_m_bench_lists_every_benchmark():
    out = subprocess.run([sys.executable, "-m", "bench"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for path in MODULES:
        assert f"  {path.stem.replace('_', '-')} " in out
    assert len(SUBCOMMANDS) == len(MODULES)
    bad = subprocess.run([sys.executable, "-m", "bench", "no-such-bench"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown benchmark 'no-such-bench'" in bad.stderr


def test_record_write_stamps_commit_machine_and_load(tmp_path):
    run = record.start()
    path = record.write(tmp_path / "sub" / "r.json", {"rows": [1, 2]}, run)
    doc = json.loads(path.read_text())
    assert doc["rows"] == [1, 2]
    prov = doc["provenance"]
    assert doc["commit"] == prov["commit"] and prov["commit"]
    for key in ("machine", "cpu", "cpus", "load_before", "load_after", "started_utc", "wall_s", "argv"):
        assert key in prov, key


def test_record_keeps_a_measured_trees_commit_and_one_spelling(tmp_path):
    a = json.loads(record.write(tmp_path / "a.json", {"commit": "other-tree"}).read_text())
    assert a["commit"] == "other-tree" and a["provenance"]["commit"] != ""
    b = json.loads(record.write(tmp_path / "b.json", {"git_commit": "abc123"}).read_text())
    assert b["commit"] == "abc123" and "git_commit" not in b


def test_record_write_is_all_or_nothing(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{"old": true}')
    with pytest.raises(TypeError):
        record.write(path, {"bad": object()})          # not JSON: the old file stays, no temporary left
    assert json.loads(path.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
