#!/usr/bin/env python
"""Write tvm_swap/examples/floors.json: what the exact limit check refuses on each bundled example's lowered
graph, per target and memory model, so `tvm-swap compile EXAMPLE --mem-limit P%` refuses a limit below the
floor before importing TVM (tvm_swap.examples.floors). Run it after changing the lowering, the graph
extraction or the planner (tests/examples/test_example_floors.py fails until then, and the table is not used).

    python scripts/example_floors.py [--check]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tvm_swap.examples.floors import TABLE  # noqa: E402
from tvm_swap.examples.floors_table import make_table  # noqa: E402


def render(doc: dict) -> str:
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the stored table differs from a fresh one")
    args = ap.parse_args()
    text = render(make_table())
    if args.check:
        same = TABLE.exists() and TABLE.read_text() == text
        print(f"{TABLE} is {'up to date' if same else 'stale: run python scripts/example_floors.py'}")
        raise SystemExit(0 if same else 1)
    TABLE.write_text(text)
    doc = json.loads(text)
    print(f"wrote {TABLE} (code version {doc['code_version']}, TVM {doc['tvm']})")
    print("| example | target | no-swap need | arena floor | refused below | size-class floor |")
    print("|---|---|---|---|---|---|")
    for name, e in doc["examples"].items():
        for target, t in e["targets"].items():
            pools = t["pools"]
            a, s = pools.get("arena"), pools.get("size-classes")
            print(f"| {name} | {target} | {t['no_swap_bytes']} | {a and a['floor']} | {a and a['below']} | "
                  f"{s and s['floor']} |")


if __name__ == "__main__":
    main()
