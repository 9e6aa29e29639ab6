#!/usr/bin/env python
"""The longest functions in tvm_swap/, relay_passes/ and runtime_ext/ (an AST walk; length = lines from
`def` to the function's last line, decorators excluded).

    python scripts/function_sizes.py            # the largest, then every function over the ceiling
    python scripts/function_sizes.py --top 10   # the ten largest

tests/test_house_rules.py runs it: no function may exceed CEILING lines except those in EXCEPTIONS, each
held at the length it has today so that none may grow.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tvm_swap", "relay_passes", "runtime_ext")
CEILING = 120
# function (path:qualified name) -> the lines it may have until it is split, each held at its length then, so
# none can grow. Empty since the arena split (issue 29): a function that needs more lines needs splitting.
EXCEPTIONS: dict[str, int] = {}


def functions(root: Path = ROOT):
    """(qualified name "path:Class.func", lines) of every function and method in the three packages."""
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            rel = path.relative_to(root).as_posix()
            yield from _walk(tree, rel, "")


def _walk(node, rel: str, prefix: str):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            yield f"{rel}:{name}", child.end_lineno - child.lineno + 1
            yield from _walk(child, rel, name + ".")
        elif isinstance(child, ast.ClassDef):
            yield from _walk(child, rel, prefix + child.name + ".")
        else:
            yield from _walk(child, rel, prefix)


def over_ceiling(sizes: dict[str, int]) -> list[str]:
    """What breaks the rule: a function over CEILING that is not an exception, or an exception that grew."""
    bad = []
    for name, n in sorted(sizes.items(), key=lambda kv: -kv[1]):
        allowed = EXCEPTIONS.get(name, CEILING)
        if n > allowed:
            bad.append(f"{name}: {n} lines (allowed {allowed})")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=1, help="print the N largest functions")
    args = ap.parse_args(argv)
    sizes = dict(functions())
    ranked = sorted(sizes.items(), key=lambda kv: -kv[1])
    print(f"{'lines':>6}  function ({len(sizes)} in {', '.join(PACKAGES)})")
    for name, n in ranked[:args.top]:
        print(f"{n:>6}  {name}")
    bad = over_ceiling(sizes)
    for line in bad:
        print(f"over the ceiling of {CEILING}: {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
