"""A plan finds its graph from any folder (tvm_swap.frontends.graph_ref) and `tvm-swap graph` writes the graph
`plan` reads."""
from __future__ import annotations

import json

import pytest

from tvm_swap import testing
from tvm_swap.errors import TvmSwapError
from tvm_swap.frontends.graph_ref import graph_of_plan, graph_reference

from test_cli import tvm_swap


@pytest.fixture
def saved(tmp_path):
    g = testing.random_training_graph(1, n_layers=3)
    path = tmp_path / "models" / "g.json"
    path.parent.mkdir()
    g.save(path)
    plan = testing.simple_plan_for(g)
    return g, plan, path


def test_reference_is_absolute_and_found_from_another_folder(saved, tmp_path, monkeypatch):
    g, plan, path = saved
    monkeypatch.chdir(path.parent)
    ref = graph_reference("g.json")
    assert ref == {"graph_spec": str(path.resolve())}
    assert graph_reference("zoo:bert-large@batch=8") == {"graph_spec": "zoo:bert-large@batch=8"}
    plan.search.update(ref)
    monkeypatch.chdir(tmp_path)
    assert graph_of_plan(plan).fingerprint() == g.fingerprint()


def test_a_moved_or_changed_graph_says_to_pass_graph(saved, tmp_path):
    g, plan, path = saved
    plan.search.update(graph_reference(str(path)))
    moved = tmp_path / "elsewhere.json"
    path.rename(moved)
    with pytest.raises(TvmSwapError, match=r"not there any more.*--graph GRAPH.*tvm-swap graph MODEL"):
        graph_of_plan(plan)
    assert graph_of_plan(plan, str(moved)).fingerprint() == g.fingerprint()
    testing.random_training_graph(2, n_layers=3).save(path)            # another graph at the old path
    with pytest.raises(TvmSwapError, match=r"changed since the plan was made.*--graph"):
        graph_of_plan(plan)


def test_graph_command_writes_what_plan_and_report_read(tmp_path):
    g_path = tmp_path / "g.json"
    r = tvm_swap("graph", "zoo:inception-4@batch=2", "-o", str(g_path), "-q")
    assert r.returncode == 0, r.stderr
    assert json.loads(g_path.read_text())["format"] == "tvm_swap.graph"
    (tmp_path / "a").mkdir()
    r = tvm_swap("plan", "../g.json", "--mem-limit", "16GB", "--planner", "noswap", "-q",
                 "-o", "p.json", cwd=tmp_path / "a")
    assert r.returncode == 0, r.stderr
    (tmp_path / "b").mkdir()
    r = tvm_swap("report", "../a/p.json", "-o", "p.trace.json", "-q", cwd=tmp_path / "b")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "b" / "p.trace.json").read_text())["otherData"]["graph"] == "inception-4@batch=2"
