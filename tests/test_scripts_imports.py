"""Every name a script under scripts/ imports from this project exists: a benchmark that is run once a week
must not die on a name that moved (bench_runtime imported InSituProfiler from tvm_swap.pipeline after it
moved to tvm_swap.cost.profile). Checked statically (the scripts' imports are parsed, the modules imported), so
no benchmark runs here."""
import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("tvm_swap", "relay_passes", "runtime_ext", "bench")
SCRIPTS = sorted((ROOT / "scripts").glob("*.py")) + sorted((ROOT / "bench").glob("*.py"))


def project_imports(path: Path):
    """(module, name) for every `from <ours>... import name` anywhere in the file (also inside functions)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in OURS:
            for alias in node.names:
                yield node.module, alias.name


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_script_imports_resolve(script):
    missing = []
    for module, name in project_imports(script):
        mod = importlib.import_module(module)
        if name != "*" and not hasattr(mod, name):
            try:
                importlib.import_module(f"{module}.{name}")     # a submodule
            except ImportError:
                missing.append(f"from {module} import {name}")
    assert not missing, f"{script.name}: " + "; ".join(missing)


def test_the_check_sees_a_moved_name(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from tvm_swap.pipeline import NoSuchThing\n")
    assert ("tvm_swap.pipeline", "NoSuchThing") in set(project_imports(bad))
    assert not hasattr(importlib.import_module("tvm_swap.pipeline"), "NoSuchThing")
