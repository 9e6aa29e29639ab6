"""scripts/fuzz.py's CPU per case, two runs side by side (same seeds, e.g. base and this tree run at once).

    nice python scripts/fuzz.py --n 150 --start 7000 --workers 1 --json base.json    # in the base checkout
    nice python scripts/fuzz.py --n 150 --start 7000 --workers 1 --json new.json     # here, at the same time
    python -m bench fuzz-cpu base.json new.json

Over the seeds both runs finished (a run cut short with Ctrl-C still writes its JSON): CPU s per case (each
case's process time, as the runs record it), mean and median, for all cases and for the graphs the command
line's split draw splits (--splits 0.3) and the others apart; failures; and the 10^4-case run extrapolated to
2 workers (10^4 x mean / 2: on idle cores, where a case's wall time is its CPU time). Writes
benchmarks/fuzz_cpu.json through bench.record.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def split_seeds(seeds) -> set:
    """The seeds whose graph the command line's split draw splits (scripts/fuzz.py, CLI_SPLIT_PROB)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import fuzz

    fuzz.SPLIT_PROB = fuzz.CLI_SPLIT_PROB
    return {s for s in seeds if "batch_split" in fuzz.draw_graph(s).meta}


def row(name: str, cpu: dict, seeds: list) -> dict:
    xs = [cpu[s] for s in seeds]
    return {"run": name, "cases": len(xs), "mean_s": statistics.fmean(xs) if xs else 0.0,
            "median_s": statistics.median(xs) if xs else 0.0, "total_s": sum(xs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="the base run's --json")
    ap.add_argument("new", help="this tree's run's --json")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "fuzz_cpu.json"))
    args = ap.parse_args(argv)
    from bench import record

    run = record.start()
    runs = {name: json.loads(Path(p).read_text()) for name, p in (("base", args.base), ("new", args.new))}
    cpu = {name: {int(s): v for s, v in d["case_cpu_s"].items()} for name, d in runs.items()}
    seeds = sorted(set(cpu["base"]) & set(cpu["new"]))
    split = split_seeds(seeds)
    groups = {"all": seeds, "split": [s for s in seeds if s in split], "not split": [s for s in seeds if s not in split]}
    rows = []
    print(f"{len(seeds)} seeds both runs finished ({seeds[0] if seeds else '-'}..{seeds[-1] if seeds else '-'})")
    print("| cases | n | base mean | new mean | new/base | base median | new median |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for g, ss in groups.items():
        b, n = row("base", cpu["base"], ss), row("new", cpu["new"], ss)
        rows.append({"group": g, "base": b, "new": n})
        print(f"| {g} | {len(ss)} | {b['mean_s']:.3f} | {n['mean_s']:.3f} | {n['total_s'] / max(b['total_s'], 1e-9):.3f} "
              f"| {b['median_s']:.3f} | {n['median_s']:.3f} |")
    fails = {name: sum(1 for line in d["failures"] if int(line.split("--case ")[1].split()[0]) in set(seeds))
             for name, d in runs.items()}
    extra = {name: 1e4 * row(name, cpu[name], seeds)["mean_s"] / 2 / 60 for name in runs}
    print(f"failures on these seeds: base {fails['base']}, new {fails['new']}; a 10^4-case run on 2 idle cores "
          f"extrapolated: base {extra['base']:.0f} min, new {extra['new']:.0f} min (CPU measured on a loaded machine)")
    record.write(Path(args.json), {"base": {k: runs["base"].get(k) for k in ("commit", "determinism_every", "load_avg")},
                                   "new": {k: runs["new"].get(k) for k in ("commit", "determinism_every", "load_avg")},
                                   "seeds": len(seeds), "groups": rows, "failures": fails,
                                   "extrapolated_10000_min": extra}, run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
