"""The one place tests find the shared fixture files (real model files too big for the repo).

    $TVM_SWAP_FIXTURES   the fixtures folder (default: ../shared/fixtures beside the repository)

`needs_fixtures("mxnet")` marks a test that reads that subfolder: when it is missing the test is skipped
with a message saying where it looked, except in CI (CI=true), where a missing fixture is a failure, so a
CI run cannot pass by skipping what it was meant to check.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("TVM_SWAP_FIXTURES", REPO.parent / "shared" / "fixtures"))


def fixture_dir(name: str) -> Path:
    return FIXTURES / name


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require(name: str) -> Path:
    """The fixture folder `name`; skips (or fails in CI) the calling test when it is not there."""
    path = fixture_dir(name)
    if not path.is_dir():
        msg = f"fixtures {name!r} not found at {path}; set TVM_SWAP_FIXTURES to the shared fixtures folder"
        if in_ci():
            pytest.fail(msg)
        pytest.skip(msg)
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
