"""The one place tests find the fixture files: real MXNet-exported models (2.2 MB) kept in the repository.

    tests/data/mxnet/   MXNet 1.9.1 exports (README.md says how they were made) and the symbols
                        that make_symbols.py writes without MXNet

`needs_fixtures("mxnet")` marks a test that reads that subfolder. The files are in the repository, so a
missing folder is a broken checkout: the test fails saying so, never skips.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "data"


def fixture_dir(name: str) -> Path:
    return FIXTURES / name


def require(name: str) -> Path:
    """The fixture folder `name`; fails the calling test when it is not there."""
    path = fixture_dir(name)
    if not path.is_dir():
        pytest.fail(f"fixtures {name!r} not found at {path}: they are part of the repository; restore the checkout")
    return path


def needs_fixtures(name: str):
    """Decorator for a test that reads fixture folder `name` (see the module docstring)."""
    def deco(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            require(name)
            return fn(*args, **kwargs)
        return run
    return deco
