"""The benchmarks, one package: `python -m bench NAME [ARGS]` from the repository root (`python -m bench` lists
them). Each prints a table and writes its JSON under benchmarks/ through `bench.record` (the commit, the machine
and its load, one writer). Long ones run in pieces (per model or point) so one piece can be refreshed.

Checks and tools that are not measurements stay in scripts/ (fuzz, plan_hashes, error_messages, model_matrix,
the symbol generators, the GPU check).
"""
from __future__ import annotations

import ast
from pathlib import Path

HERE = Path(__file__).resolve().parent
_NOT_BENCHMARKS = {"__init__", "__main__", "record"}


def _modules() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.py") if p.stem not in _NOT_BENCHMARKS)


def summary(module: str) -> str:
    """The first line of a benchmark's docstring, read without importing it (most import TVM)."""
    doc = ast.get_docstring(ast.parse((HERE / f"{module}.py").read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


class _Subcommands(dict):
    """name (dashes) -> (module, summary), the summary read on first use."""

    def __init__(self):
        super().__init__({m.replace("_", "-"): m for m in _modules()})

    def __getitem__(self, name):
        module = super().__getitem__(name)
        return module, summary(module)

    def items(self):
        return [(k, self[k]) for k in self]


SUBCOMMANDS = _Subcommands()
