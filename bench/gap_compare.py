#!/usr/bin/env python
"""Two bench/gap.py runs on the same instances (before / after a planner change), side by side.

Prints (and writes as markdown) each run's summary table (bench.gap.render) and, per instance, the ratio of the
swapadvisor plan's simulated time after / before: the planner's own change, whatever the reference ("best")
did meanwhile (the exact model can change between the runs too).

    python -m bench gap-compare --before a.json b.json --after ab.json --out benchmarks/gap_subset
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
from bench.gap import render, summarize  # noqa: E402


def load(paths: list[str]) -> tuple[list[dict], dict]:
    rows, meta = [], None
    for p in paths:
        d = json.loads(Path(p).read_text())
        rows += d["rows"]
        if meta is None:
            meta = dict(d["meta"])
        else:
            meta["commit"] = meta["commit"] if meta["commit"] == d["meta"]["commit"] else \
                meta["commit"] + "+" + d["meta"]["commit"]
    meta["instances"] = len(rows)
    meta["graphs"] = len({r["graph"] for r in rows})
    return rows, meta


def ratio_lines(before: list[dict], after: list[dict]) -> list[str]:
    key = lambda r: (r["graph"], r["frac"])   # noqa: E731
    b = {key(r): r for r in before}
    out = []
    for kind in ("all", "dag", "train"):
        xs = []
        for r in after:
            if kind != "all" and not r["graph"].startswith(kind):
                continue
            rb = b.get(key(r))
            ta = r["planners"]["swapadvisor"].get("time_s")
            tb = rb and rb["planners"]["swapadvisor"].get("time_s")
            if ta and tb:
                xs.append(ta / tb)
        if xs:
            xs = np.array(xs)
            out.append(f"- swapadvisor time after / before, {kind} ({len(xs)} instances): median {np.median(xs):.3f}, "
                       f"best {xs.min():.3f}, worst {xs.max():.3f}; faster on {(xs < 1 - 1e-9).sum()}, slower on "
                       f"{(xs > 1 + 1e-9).sum()}")
    out.append("")
    for kind in ("all", "dag", "train"):
        gb, ga = [], []
        for r in after:
            if kind != "all" and not r["graph"].startswith(kind):
                continue
            rb = b.get(key(r))
            ta = r["planners"]["swapadvisor"].get("time_s")
            tb = rb and rb["planners"]["swapadvisor"].get("time_s")
            refs = [x for x in (r["best_s"], rb and rb["best_s"]) if x]
            if ta and tb and refs:
                gb.append(tb / min(refs) - 1)
                ga.append(ta / min(refs) - 1)
        if gb:
            f = (lambda xs: f"median {100 * np.median(xs):+.1f}%, p90 {100 * np.quantile(xs, 0.9):+.1f}%, worst "
                 f"{100 * max(xs):+.1f}%, within 2% / 10% on {100 * np.mean(np.array(xs) <= 0.02):.0f}% / "
                 f"{100 * np.mean(np.array(xs) <= 0.10):.0f}%")
            out.append(f"- swapadvisor gap to the best plan of both runs, {kind} ({len(gb)} instances): before {f(gb)}; "
                       f"after {f(ga)}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", nargs="+", required=True, help="bench.gap JSON(s) of the first run")
    ap.add_argument("--after", nargs="+", required=True, help="bench.gap JSON(s) of the second run")
    ap.add_argument("--before-commit", default=None, help="the commit the first run measured, if it recorded none")
    ap.add_argument("--out", default=None, help="write OUT.md")
    args = ap.parse_args(argv)
    before, mb = load(args.before)
    after, ma = load(args.after)
    if args.before_commit:
        mb["commit"] = args.before_commit
    text = "\n".join(["# bench.gap before / after on the same instances", "",
                      "## before", "", render(summarize(before), mb).replace("# Gap to optimal", "Gap to optimal"),
                      "## after", "", render(summarize(after), ma).replace("# Gap to optimal", "Gap to optimal"),
                      "## the planner's own change", ""] + ratio_lines(before, after) + [""])
    print(text)
    if args.out:
        Path(args.out).with_suffix(".md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
