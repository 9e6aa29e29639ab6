#!/usr/bin/env python
"""NasNet-A at R = 1, 2, 3 normal cells per stage at the real sizes (F=168, 331x331), batch 16/64, lowered
for llvm (cheap): ops and memory need are linear in R, so R = 25 is extrapolated from these."""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relay_passes.lower import lower
from tvm_swap.graph import from_relax
from tvm_swap.zoo.models.nasnet import nasnet_a
from tvm_swap.zoo.models.training import train_step_module
from tvm_swap.zoo.stats import memory_stats
from tvm_swap.planner.baselines.noswap import noswap_need
out = {}
# Run from the repository root: python scripts/nasnet_scaling.py   (about 2 minutes per point on a free core)
for R in (1, 2, 3):
    for b in (16, 64):
        t = time.time()
        mod = train_step_module(nasnet_a(repeats=R)(b), optimizer="momentum")
        g = from_relax(lower(mod, "llvm", func_name="train_step"), "train_step")
        s = memory_stats(g)
        s["noswap_need"] = int(noswap_need(g, 256))
        out[f"{R}@{b}"] = s
        print(R, b, s, round(time.time() - t), flush=True)
        json.dump(out, open("benchmarks/nasnet_scaling.json", "w"), indent=1)
