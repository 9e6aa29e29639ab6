"""bench.min_limit --code-tree: every row measured by two trees' code side by side (each in a child with its tree
first on sys.path), merged into one table with issue 26's target verdict; a row a tree cannot measure is n/a."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.min_limit import label_of, render_both, target_of

ROOT = Path(__file__).resolve().parents[1]


def test_targets_are_issue_26s():
    row = {"kind": "mxnet", "train": False}
    assert target_of({**row, "name": "small_cnn", "batch": 1}) == 0.15
    assert target_of({**row, "name": "small_cnn", "batch": 128}) == 0.40
    assert target_of({**row, "name": "mlp", "batch": 1}) is None              # not a CNN
    assert target_of({**row, "name": "resnet18_v1", "batch": 8}) is None
    assert target_of({**row, "name": "mlp", "batch": 128, "train": True}) == 0.30
    assert target_of({"kind": "imagenet", "name": "vgg16", "batch": 1, "train": False}) == 0.15


def test_the_table_names_a_row_over_its_target_and_a_row_a_tree_could_not_measure():
    spec = {"kind": "mxnet", "name": "small_cnn", "batch": 128, "train": True}
    after = {"model": label_of(spec), "noswap_peak": 1000, "arena_min": 450, "workspace": 0,
             "floor_op": {"kernel": "fused_conv2d_relu", "bytes": 400}}
    text = render_both([{"spec": spec, "before": {"model": label_of(spec), "error": "KeyError: x"},
                         "after": after}], "old", "new")
    line = next(l for l in text.splitlines() if l.startswith(f"| {label_of(spec)} |"))
    assert "n/a (KeyError: x)" in line and "45.0%" in line and "**OVER** (45.0%)" in line
    assert "fused_conv2d_relu" in line


@pytest.mark.slow
def test_a_code_tree_measures_a_small_row_with_its_own_code(tmp_path):
    """The 'before' side imports the code tree's tvm_swap (here a tree of links to this checkout's packages, so
    the numbers must agree with the 'after' side's), and an example the trees lack is n/a on both sides."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for pkg in ("tvm_swap", "relay_passes", "runtime_ext"):
        (tree / pkg).symlink_to(ROOT / pkg)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "bench", "min-limit", "--code-tree", str(tree), "--code-tree-commit", "linked",
           "--models", "", "--examples", "cnn,no-such-example", "--imagenet", "", "--out-dir", str(out),
           "--symbols-dir", str(tmp_path / "syms"), "--piece", "one"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=600)
    doc = json.loads((out / "min_limit_both.json").read_text())
    assert doc["before_commit"] == "linked" and "provenance" in doc
    rows = {r["spec"]["name"]: r for r in doc["rows"]}
    cnn = rows["cnn"]
    assert cnn["before"]["code_from"] == str(tree) and cnn["after"]["code_from"] == str(ROOT)
    for key in ("noswap_peak", "arena_min", "arena_min_unsplit", "floor_op"):
        assert cnn["before"][key] == cnn["after"][key]
    assert cnn["after"]["arena_min"] < cnn["after"]["noswap_peak"]
    assert "error" in rows["no-such-example"]["before"] and "error" in rows["no-such-example"]["after"]
    table = (out / "min_limit_both.md").read_text()
    assert "| example cnn |" in table and "| example no-such-example |" in table and "n/a (" in table
    assert (out / "min_limit_both" / "one.json").exists()
