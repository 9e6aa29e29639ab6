#!/usr/bin/env python
"""Fuzz the runtime: random small MLP / CNN models, forward or one SGD training step, built on llvm under a
random feasible limit by a random planner, must give outputs bitwise equal to the unlimited build.

Each case (one seed) draws the model's shape (batch, widths, depth, image size, pooling), a limit between
20% and 120% of its no-swap peak (a refused limit is replaced by the smallest feasible one the refusal
names), a planner and whether the build is poisoned (every dropped object overwritten with NaN, copies
landing late: a missing wait then shows as wrong numbers). Training steps run twice, the second step on
the updated params, and the params are compared too. The device peak must stay within the limit.

    python scripts/fuzz_runtime.py --n 50            # a table line per case and a reproducer per failure
    python scripts/fuzz_runtime.py --case 7
Exit code: 0 when every case matched, 1 otherwise.
"""
from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PLANNERS = ("swapadvisor", "swapadvisor-nosearch", "odswap", "vdnn", "noswap")


def draw_model(seed: int):
    """(description, Example, is a training step) for this seed."""
    from tvm_swap.examples import models

    rng = np.random.default_rng([seed, 11])
    train = bool(rng.random() < 0.5)
    if rng.random() < 0.5:
        kw = dict(batch=int(rng.integers(1, 33)), in_features=int(rng.choice([8, 16, 33, 64])),
                  hidden=tuple(int(rng.choice([16, 24, 64, 128])) for _ in range(int(rng.integers(1, 7)))),
                  classes=int(rng.integers(2, 11)), seed=seed)
        ex = models.mlp_train_step(**kw) if train else models.mlp(**kw)
        return f"mlp{'-train' if train else ''} {kw}", ex, train
    depth = int(rng.integers(1, 7))
    pool_every = int(rng.integers(1, depth + 1))
    image = 2 ** (depth // pool_every) * int(rng.choice([1, 2]))
    kw = dict(batch=int(rng.integers(1, 5)), in_channels=int(rng.integers(1, 5)),
              channels=tuple(int(rng.choice([4, 8, 16])) for _ in range(depth)), image=image,
              classes=int(rng.integers(2, 11)), seed=seed, pool_every=pool_every)
    ex = models.cnn_train_step(**kw) if train else models.small_cnn(**kw)
    return f"cnn{'-train' if train else ''} {kw}", ex, train


def _unlimited(mod):
    import tvm
    from tvm import relax

    from relay_passes.lower import lower_unlimited_build

    vm = relax.VirtualMachine(lower_unlimited_build(mod, "llvm"), tvm.cpu())

    def call(args):
        res = vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(a)) for a in args])
        return _flat(res)
    return call


def _flat(res) -> list:
    import tvm

    if isinstance(res, np.ndarray):
        return [res]
    if isinstance(res, tvm.runtime.Tensor):
        return [res.numpy()]
    return [x for r in res for x in _flat(r)]


def _same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes() for x, y in zip(a, b))


def run_case(seed: int) -> dict:
    """{'seed', 'model', 'planner', 'limit', 'ok', 'why'} for one case."""
    import tvm_swap
    from tvm_swap.errors import InfeasibleLimitError

    rng = np.random.default_rng([seed, 12])
    out = {"seed": seed, "ok": False, "why": ""}
    try:
        desc, ex, train = draw_model(seed)
        out["model"] = desc
        planner = str(rng.choice(PLANNERS))
        poison = bool(rng.random() < 0.5)
        limit = f"{rng.uniform(20, 120):.1f}%"
        kw = dict(planner=planner, generations=int(rng.integers(0, 3)), seed=seed, workers=1, profile=False,
                  debug_poison=poison)
        try:
            m = tvm_swap.build(ex.mod, mem_limit=limit, params=ex.params, **kw)
        except InfeasibleLimitError as e:     # the min it names must be feasible (the planner fuzz checks more)
            limit = e.min_feasible
            m = tvm_swap.build(ex.mod, mem_limit=limit, params=ex.params, **kw)
        out.update(planner=planner, poison=poison, limit=int(m.plan.mem_limit),
                   swaps=sum(a.kind == "swap_in" for a in m.plan.actions))
        ref = _unlimited(ex.mod)
        inputs = list(ex.inputs.values())
        params = list(ex.params.values())
        for step in range(2 if train else 1):
            got = _flat(m(*inputs))
            want = ref([*inputs, *params])
            if not _same(got, want):
                out["why"] = f"step {step}: outputs differ from the unlimited build"
                return out
            if train:
                params = want[1:]
                if not _same(list(m.params().values()), params):
                    out["why"] = f"step {step}: updated params differ from the unlimited build"
                    return out
        st = m.stats()
        if st["device_peak_bytes"] > st["mem_limit_bytes"]:
            out["why"] = f"device peak {st['device_peak_bytes']} > limit {st['mem_limit_bytes']}"
            return out
        m.close()
        out["ok"] = True
    except Exception as e:
        out["why"] = f"{type(e).__name__}: {e} | " + traceback.format_exc(limit=-1).strip().splitlines()[-2].strip()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--case", type=int, default=None)
    args = ap.parse_args(argv)
    seeds = [args.case] if args.case is not None else range(args.start, args.start + args.n)
    t0 = time.perf_counter()
    bad = []
    for s in seeds:
        r = run_case(s)
        status = "ok  " if r["ok"] else "FAIL"
        print(f"{status} seed {s:<5} {r.get('planner', '-'):<21} limit {r.get('limit', '-')!s:<10} "
              f"swap-ins {r.get('swaps', '-')!s:<4} poison {r.get('poison', '-')!s:<5} {r.get('model', '')}"
              + ("" if r["ok"] else f"\n     {r['why']}\n     python scripts/fuzz_runtime.py --case {s}"),
              flush=True)
        if not r["ok"]:
            bad.append(s)
    n = len(list(seeds))
    print(f"{n - len(bad)}/{n} cases bitwise equal to the unlimited build in {time.perf_counter() - t0:.1f} s; "
          f"failures: {bad or 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
