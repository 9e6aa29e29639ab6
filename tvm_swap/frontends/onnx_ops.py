"""The ONNX op types TVM's Relax ONNX importer converts: from its convert map (imports TVM, seconds), or from
the list stored beside this module (onnx_ops.json, written by `python scripts/onnx_ops.py`), which is used only
when it was written for the TVM release installed, so an operator TVM lacks is refused before TVM is imported.
tests/frontends/test_onnx_early.py checks the stored list against the live map."""
from __future__ import annotations

import functools
import json
from pathlib import Path

TABLE = Path(__file__).with_name("onnx_ops.json")


def tvm_release() -> str | None:
    """The installed apache-tvm's version (package metadata: no TVM import); None when it is not installed."""
    import importlib.metadata

    try:
        return importlib.metadata.version("apache-tvm")
    except importlib.metadata.PackageNotFoundError:
        return None


def live_converted_ops() -> frozenset | None:
    """The op types of tvm.relax.frontend.onnx's convert map (a private function: None where it is missing,
    and TVM's own check decides)."""
    try:
        from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map
    except ImportError:
        return None
    return frozenset(_get_convert_map())


@functools.lru_cache(maxsize=1)
def stored_converted_ops() -> frozenset | None:
    """The stored list when it was written for the installed TVM release; None otherwise (nothing is known)."""
    try:
        doc = json.loads(TABLE.read_text())
    except (OSError, ValueError):
        return None
    release = tvm_release()
    if release is None or doc.get("tvm") != release:
        return None
    return frozenset(doc["converted_ops"])


def table_text(release: str, ops) -> str:
    """The stored file's text for this release and op list (the script writes it, the test compares it)."""
    return json.dumps({"tvm": release, "converted_ops": sorted(ops)}, indent=1) + "\n"


__all__ = ["TABLE", "live_converted_ops", "stored_converted_ops", "table_text", "tvm_release"]
