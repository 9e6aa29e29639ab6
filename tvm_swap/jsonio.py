"""The one reader of tvm_swap's versioned JSON files (plan, graph, manifest, zoo, cost table).

Every document carries {"format": "tvm_swap.KIND", "version": N}. `check_versioned` refuses anything else
with a message naming what was expected; `read_json` reads a `.json` or `.json.gz` file and turns missing
or unreadable files into the caller's error type, never a traceback from json or gzip.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from .errors import TvmSwapError


def check_versioned(doc, fmt: str, version, what: str, error: type = TvmSwapError, hint: str = "") -> dict:
    """`doc` if it is a dict of format `fmt` and version `version` (an int, or a tuple of the versions this
    reads); else `error` saying so (+ `hint`)."""
    if not isinstance(doc, dict) or doc.get("format") != fmt:
        raise error(f"not a tvm_swap {what} (expected \"format\": \"{fmt}\")")
    ok = version if isinstance(version, tuple) else (version,)
    if doc.get("version") not in ok:
        this = f"version {ok[0]}" if len(ok) == 1 else "versions " + ", ".join(map(str, ok))
        raise error(f"{what} version {doc.get('version')} is not supported (this reads {this}){hint}")
    return doc


def read_json(path, what: str, error: type = TvmSwapError, missing_hint: str = ""):
    """The parsed JSON of `path` (gzip-compressed when it ends in .gz)."""
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return json.load(f)
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise error(f"{what} {str(path)!r} does not exist{missing_hint}") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, EOFError) as e:
        raise error(f"cannot read {what} {str(path)!r}: {e}") from None


def parse_json(text: str, what: str, error: type = TvmSwapError):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{what} is not valid JSON: {e}") from None
