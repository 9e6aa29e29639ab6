#!/usr/bin/env python
"""Write tvm_swap/frontends/onnx_ops.json: the ONNX op types the installed TVM's Relax ONNX importer converts
(its convert map), keyed by the TVM release, so `tvm-swap compile model.onnx` refuses an operator TVM lacks
before importing TVM (tvm_swap.frontends.onnx_ops). Run it after upgrading TVM (until then the list is not used,
and tests/frontends/test_onnx_early.py fails).

    python scripts/onnx_ops.py [--check]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tvm_swap.frontends.onnx_ops import TABLE, live_converted_ops, table_text, tvm_release  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the stored list differs from the live map")
    args = ap.parse_args()
    ops = live_converted_ops()
    if ops is None:
        raise SystemExit("this TVM has no tvm.relax.frontend.onnx convert map (_get_convert_map)")
    text = table_text(tvm_release(), ops)
    if args.check:
        same = TABLE.exists() and TABLE.read_text() == text
        print(f"{TABLE} is {'up to date' if same else 'stale: run python scripts/onnx_ops.py'}")
        raise SystemExit(0 if same else 1)
    TABLE.write_text(text)
    print(f"wrote {TABLE}: {len(ops)} op types for TVM {tvm_release()}")


if __name__ == "__main__":
    main()
