"""The package's import graph: no cycles (lazy imports inside functions count too), relay_passes and
runtime_ext never import each other (they meet only in tvm_swap's contracts), the planner imports no TVM."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tvm_swap", "relay_passes", "runtime_ext")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _resolve(mod: str, is_pkg: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (anywhere in the file; `from P import m` counts P.m when it
    is a module, else P)."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(mod, is_pkg, node.level, node.module)
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in mods else src for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:          # `import a.b.c` of a non-module attribute: its module
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    deps.add(t)
        graph[mod] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _is_package_init(mod: str, target: str) -> bool:
    """A module importing its own package's __init__ (e.g. `from . import x` resolving to the package)."""
    return mod.startswith(target + ".")


def test_no_import_cycles():
    graph = import_graph()
    # A submodule naturally runs its package's __init__; count only the imports it writes.
    graph = {m: {d for d in deps if not _is_package_init(m, d)} for m, deps in graph.items()}
    assert _cycles(graph) == []


def test_relay_passes_and_runtime_ext_never_import_each_other():
    bad = [(m, d) for m, deps in import_graph().items() for d in deps
           if (m.startswith("relay_passes") and d.startswith("runtime_ext"))
           or (m.startswith("runtime_ext") and d.startswith("relay_passes"))]
    assert bad == []


def test_the_detector_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_planner_and_graph_dataflow_import_no_tvm_in_source():
    """Statically: no module of tvm_swap.planner names tvm in an import (the subprocess test in
    tests/planner/test_planner_api.py checks the same at run time)."""
    offenders = []
    for mod, path in _modules().items():
        if not mod.startswith("tvm_swap.planner"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            offenders += [(mod, n) for n in names if n == "tvm" or n.startswith("tvm.")]
    assert offenders == []
