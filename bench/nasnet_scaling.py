#!/usr/bin/env python
"""NasNet-A at R = 1, 2, 3 normal cells per stage at the real sizes (F=168, 331x331), batch 16/64, lowered
for llvm (cheap): ops and memory need are linear in R, so R = 25 is extrapolated from these.

    python -m bench nasnet-scaling          # about 2 minutes per point on a free core
"""
import argparse
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "nasnet_scaling.json"))
    args = ap.parse_args(argv)
    from relay_passes.lower import lower
    from tvm_swap.graph import from_relax
    from tvm_swap.planner.baselines.noswap import noswap_need
    from tvm_swap.zoo.models.nasnet import nasnet_a
    from tvm_swap.zoo.models.training import train_step_module
    from tvm_swap.zoo.stats import memory_stats

    run, out = record.start(), {}
    for repeats in (1, 2, 3):
        for batch in (16, 64):
            t = time.time()
            mod = train_step_module(nasnet_a(repeats=repeats)(batch), optimizer="momentum")
            g = from_relax(lower(mod, "llvm", func_name="train_step"), "train_step")
            s = memory_stats(g)
            s["noswap_need"] = int(noswap_need(g, 256))
            out[f"{repeats}@{batch}"] = s
            print(repeats, batch, s, round(time.time() - t), flush=True)
            record.write(args.out, {"points": out}, run)     # after each point: a run cut short keeps what it had
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
