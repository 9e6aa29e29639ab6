#!/usr/bin/env python
"""Fuzz the runtime: random small MLP / CNN models, forward or one SGD training step, built on llvm under a
random feasible limit by a random planner, must give outputs bitwise equal to the unlimited build.

Each case (one seed) draws the model's shape (batch, widths, depth, image size, pooling), a planner, a
limit between that planner's own min for the lowered graph (tvm_swap.testing.planner_min_limit: the min its
refusal names) and 1.2x the no-swap need, and whether the build is poisoned (every dropped object overwritten
with NaN, copies landing late: a missing wait then shows as wrong numbers). Training steps run twice, the
second step on the updated params, and the params are compared too. The device peak must stay within the
limit. Then a limit below the min must be refused with a short error naming the min (run_case; not for a case with
host ops, whose device part has a floor of its own). A third of the inference cases also build below that min
with split_ops=True (regions of ops in slices, issue 26), and a third of the training cases without host ops
with split_dense=True (trainable dense weights in row chunks through the step, and regions of its per-sample ops
in slices of the batch, 2 chained steps, the chunks joined into the user's weights): planned, it must be bitwise and within its limit; refused, with a short error.
Failures by kind: refused-at-min, below-min, mismatch, peak, workaround, crash. Known limitations are counted
apart (never as a pass): tvm-codegen, TVM 0.27's LLVM codegen failing on a kernel (tvm_swap KernelCodegenError),
whose advice (fuse_max_depth=1) is then taken and must build and match ('workaround' when it does not).

    python scripts/fuzz_runtime.py --n 50 --json out.json   # a line per case, a reproducer per failure, a table
    python scripts/fuzz_runtime.py --n 100 --workers 2     # cases in 2 processes (lines in the order cases end)
    python scripts/fuzz_runtime.py --case 7
    python scripts/fuzz_runtime.py --n 100 --host-only      # only cases that run optimizer updates on the host
Exit code: 0 when no case failed (known limitations allowed), 1 otherwise; 130 for a run cut short by Ctrl-C or
a timeout's SIGTERM, which still prints and writes the summary of the cases it finished (cut_short.py).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))        # (cut_short, also when imported from a test)

from cut_short import run_cut_short  # noqa: E402

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


def _unlimited(mod, fuse_max_depth=None):
    import tvm
    from tvm import relax

    from relay_passes.lower import build_lowered, lower_unlimited_build

    low = _LOWERED.get((id(mod), fuse_max_depth))
    if low is not None and low[0] is mod:     # lowered_graph lowered this very module: build that lowering
        ex = build_lowered(low[1], "llvm")     # (lower_unlimited_build is build_lowered(lower(mod)))
    else:
        ex = lower_unlimited_build(mod, "llvm", fuse_max_depth=fuse_max_depth)
    vm = relax.VirtualMachine(ex, tvm.cpu())

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


# failure kinds (the run fails) and known limitations (counted apart, never a pass); see run_case
FAILURE_KINDS = ("refused-at-min", "below-min", "split", "mismatch", "peak", "workaround", "crash")
KNOWN_KINDS = {"tvm-codegen": "TVM 0.27's LLVM codegen fails on a kernel (KernelCodegenError)"}


# the last llvm lowering lowered_graph made: {(id(module), fuse_max_depth): (module, lowered)}, which
# _unlimited then builds instead of lowering the same module again (a case's model: one entry at a time)
_LOWERED: dict = {}


def lowered_graph(mod, target: str = "llvm", fuse_max_depth=None):
    """The DataflowGraph tvm_swap.build plans for `mod` (its own lowering and extraction)."""
    from relay_passes.cuda_build import resolve_target
    from relay_passes.lower import lower

    from tvm_swap.graph.extract import graph_from_relax

    tgt = resolve_target(target)
    low = lower(mod, tgt, fuse_max_depth=fuse_max_depth, func_name="main")
    if tgt.kind.name == "llvm":
        _LOWERED.clear()
        _LOWERED[(id(mod), fuse_max_depth)] = (mod, low)
    return graph_from_relax(low, "main", target=str(tgt))


def first_compile(seed: int) -> bool:
    """Whether this case's below-min build runs as a first compile (graph_cache=False): half the cases."""
    return bool(np.random.default_rng([seed, 13]).random() < 0.5)


def draw_limit(rng, lo: int, hi: int) -> int:
    """A limit in [lo, hi]: exactly the min in a tenth of the cases, the top in a twentieth."""
    r = rng.random()
    return lo if r < 0.1 else hi if r < 0.15 else int(rng.integers(lo, hi + 1))


def draws_host_ops(seed: int) -> bool:
    """Whether case `seed` is a training step that runs ops on the host (draw_model's and draw_host_ops' first
    draws, without building the model)."""
    train = np.random.default_rng([seed, 11]).random() < 0.5
    return bool(train and np.random.default_rng([seed, 14]).random() >= 0.5)


def draw_host_ops(seed: int, graph):
    """Ops a training case runs on the host (plan_graph's host_ops), from its own stream of draws (the other
    draws of a seed stay what they were): None (all on the device) in half the cases, "optimizer" (every
    update) in a quarter, else a random subset of the updates (with every op that reads a chosen op's output,
    so no device op reads a host op's output)."""
    from tvm_swap.planner.host_split import optimizer_host_ops

    rng = np.random.default_rng([seed, 14])
    r = rng.random()
    ups = optimizer_host_ops(graph)
    if not draws_host_ops(seed) or not ups:
        return None
    if r < 0.75:
        return "optimizer"
    chosen = {int(o) for o in ups if rng.random() < 0.5} or {int(rng.choice(ups))}
    cons = graph.consumers()
    grew = True
    while grew:
        more = {int(c) for o in chosen for t in graph.ops[o].outputs for c in cons[t]} - chosen
        grew = bool(more)
        chosen |= more
    return sorted(chosen)


def draws_split(seed: int) -> float | None:
    """For a third of the cases (own stream of draws): the share of the min to build at with split_ops=True."""
    rng = np.random.default_rng([seed, 15])
    return float(rng.uniform(0.5, 0.98)) if rng.random() < 1 / 3 else None


def draws_split_dense(seed: int) -> float | None:
    """For a third of the training cases (own stream of draws): the share of the min to build at with
    split_dense=True (the step's trainable dense weights in row chunks: relay_passes.split_dense_train)."""
    rng = np.random.default_rng([seed, 16])
    return float(rng.uniform(0.3, 0.98)) if rng.random() < 1 / 3 else None


def _build_below_min(ex, kw, limit, ref, inputs, params, option: str, train: bool, counts: dict) -> dict:
    """Build at `limit` (below the unsplit min) with `option`=True (split_dense for a training step, split_ops
    for inference): {'limit', 'outcome', 'failure', and each of `counts`: its build_info key's length}: planned
    (bitwise against `ref`, chained steps for training with the chunks joined into the user's weights, within the
    limit) or refused with a short error."""
    import tvm_swap
    from tvm_swap.errors import InfeasibleLimitError, TvmSwapError

    res = {"limit": limit, "outcome": "refused", **dict.fromkeys(counts, 0), "failure": ""}
    try:
        m = tvm_swap.build(ex.mod, mem_limit=limit, params=ex.params, **{option: True}, **kw)
    except (InfeasibleLimitError, TvmSwapError) as e:
        if short_error(e):
            res["failure"] = f"{option} at {limit}: the refusal is not a short error: {short_error(e)}"
        return res
    res.update(outcome="planned", **{k: len(m.build_info.get(key) or ()) for k, key in counts.items()})
    res["failure"] = _compare(m, ref, inputs, params, train)
    m.close()
    return res


def _check_split_dense(ex, kw, limit, ref, inputs, params) -> dict:
    """The training step below its min with split_dense=True (dense weights in row chunks, regions of per-sample
    ops along the batch): {'limit', 'outcome', 'weights', 'regions', 'failure'}."""
    return _build_below_min(ex, kw, limit, ref, inputs, params, "split_dense", True,
                            {"weights": "dense_splits", "regions": "split_regions"})


def _check_split(ex, kw, limit, ref, inputs, params) -> dict:
    """Inference below its min with split_ops=True: {'limit', 'outcome', 'regions', 'dense', 'failure'}."""
    return _build_below_min(ex, kw, limit, ref, inputs, params, "split_ops", False,
                            {"regions": "split_regions", "dense": "dense_splits"})


def short_error(e: Exception) -> str | None:
    """Why an error's message is not a short one (a TVM traceback, a dump), or None when it is."""
    text = str(e)
    if "\n" in text.strip() or "Traceback" in text or 'File "' in text:
        return "not one line (a traceback or a dump)"
    if len(text) > 1500:
        return f"{len(text)} characters"
    return None


def run_case(seed: int) -> dict:
    """One case: {'seed', 'model', 'planner', 'min', 'limit', 'ok', 'kind', 'why', 'below', ...}.

    The limit is drawn between the planner's own min (tvm_swap.testing.planner_min_limit: the min its refusal
    names) and 1.2x the no-swap need; a refusal there is a failure ('refused-at-min'). A limit below the min
    must be refused with a short InfeasibleLimitError naming a min above it (the min itself when exact);
    an arena planner may plan there instead (placement is not monotone), and that plan is run and compared
    too ('below-min' otherwise). kind: None (ok), a FAILURE_KINDS entry, or a KNOWN_KINDS entry."""
    import tvm_swap
    from tvm_swap.errors import InfeasibleLimitError, KernelCodegenError
    from tvm_swap.limits.mem_limit import no_swap_bytes
    from tvm_swap.planner.api import resolve_pool
    from tvm_swap.testing import planner_min_limit

    rng = np.random.default_rng([seed, 12])
    out = {"seed": seed, "ok": False, "kind": None, "why": "", "below": None}

    def fail(kind, why):
        out.update(kind=kind, why=why)
        return out

    try:
        desc, ex, train = draw_model(seed)
        out["model"] = desc
        planner = str(rng.choice(PLANNERS))
        poison = bool(rng.random() < 0.5)
        graph = lowered_graph(ex.mod)
        lo, _ = planner_min_limit(graph, planner)
        hi = max(lo, int(1.2 * no_swap_bytes(graph)))
        limit = draw_limit(rng, lo, hi)
        gens = int(rng.integers(0, 3))
        frac = float(rng.uniform(0.3, 1.0))
        out.update(planner=planner, poison=poison, min=lo, limit=limit, no_swap=no_swap_bytes(graph),
                   pool=resolve_pool(planner, None))
        kw = dict(planner=planner, generations=gens, seed=seed, workers=1, profile=False, debug_poison=poison)
        host = draw_host_ops(seed, graph) if train else None
        out["host_ops_drawn"] = host if isinstance(host, str) or host is None else len(host)
        try:
            m = tvm_swap.build(ex.mod, mem_limit=limit, params=ex.params, **kw,
                               **({} if host is None else {"host_ops": host}))
        except InfeasibleLimitError as e:
            return fail("refused-at-min", f"refused {limit} >= its min {lo}: {e}")
        ref = _unlimited(ex.mod)
        inputs, params = list(ex.inputs.values()), list(ex.params.values())
        out["swaps"] = sum(a.kind == "swap_in" for a in m.plan.actions)
        out["inplace"] = len(m.plan.inplace)            # elementwise ops the plan runs in place
        out["host_ops"] = len(m.plan.host_ops)          # ops the plan runs on the host
        why = _compare(m, ref, inputs, params, train)
        if why:
            return fail("peak" if why.startswith("device peak") else "mismatch", why)
        m.close()
        if host is not None:     # the below-min check is about the all-device floor, which host ops change
            out["ok"] = True
            return out
        share = draws_split_dense(seed) if train else draws_split(seed)
        if share is not None:
            name, check = ("split_dense", _check_split_dense) if train else ("split", _check_split)
            out[name] = check(ex, kw, max(1, int(lo * share)), ref, inputs, params)
            if out[name]["failure"]:
                return fail("split", out[name]["failure"])
        # half the time as a first compile (no graph cache): refused before lowering where tvm_swap.limits.early_floor's
        # bounds prove it (a lower bound then, which must not exceed the min), else after lowering
        first = first_compile(seed)
        out["below"] = _check_below(ex, {**kw, "graph_cache": False} if first else kw, lo, int(lo * frac),
                                    out["pool"], ref, inputs, params, train)
        if out["below"]["failure"]:
            return fail("below-min", out["below"]["failure"])
        out["ok"] = True
    except KernelCodegenError as e:
        if short_error(e):
            return fail("crash", f"KernelCodegenError with a long message ({short_error(e)})")
        out["workaround"] = _check_workaround(e, ex, kw, out, train)
        if out["workaround"].startswith("failed"):
            return fail("workaround", f"{e} | the advice {out['workaround']}")
        return fail("tvm-codegen", f"{e.kernels}: {e}")
    except Exception as e:
        return fail("crash", f"{type(e).__name__}: {e} | "
                    + traceback.format_exc(limit=-1).strip().splitlines()[-2].strip())
    return out


def _check_workaround(e, ex, kw, out, train) -> str:
    """A KernelCodegenError's advice, taken: fuse_max_depth=1 at the same limit (or that graph's min, when
    higher) must build and run bitwise equal to the unlimited build with the same fusion."""
    import tvm_swap
    from tvm_swap.testing import planner_min_limit

    if "fuse_max_depth=1" not in str(e) or "planner" not in kw:
        return "not advised"
    try:
        lo, _ = planner_min_limit(lowered_graph(ex.mod, fuse_max_depth=1), kw["planner"])
        m = tvm_swap.build(ex.mod, mem_limit=max(lo, out.get("limit", lo)), params=ex.params, fuse_max_depth=1,
                           **kw)
        why = _compare(m, _unlimited(ex.mod, 1), list(ex.inputs.values()), list(ex.params.values()), train)
        m.close()
    except Exception as e2:
        return f"failed: fuse_max_depth=1 raised {type(e2).__name__}: {str(e2)[:300]}"
    return f"failed: fuse_max_depth=1 {why}" if why else "fuse_max_depth=1 ok"


def _compare(m, ref, inputs, params, train) -> str:
    """Why the module `m` is not bitwise the unlimited build `ref` (or broke its limit); '' when it is."""
    from tvm_swap.cli.run_steps import _joined, result_groups

    groups = result_groups(m.manifest)
    chunked = any(len(ix) > 1 for _, ix in groups)     # weights in row chunks: joined into the user's layout
    for step in range(2 if train else 1):
        got = _flat(m(*inputs))
        got = _joined(m.manifest, got, groups) if chunked else got
        want = ref([*inputs, *params])
        if not _same(got, want):
            return f"step {step}: outputs differ from the unlimited build"
        if train:
            params = want[1:]
            if not _same(list(m.params().values()), params):
                return f"step {step}: updated params differ from the unlimited build"
    st = m.stats()
    if st["device_peak_bytes"] > st["mem_limit_bytes"]:
        return f"device peak {st['device_peak_bytes']} > limit {st['mem_limit_bytes']}"
    return ""


def _check_below(ex, kw, lo, below, pool, ref, inputs, params, train) -> dict:
    """Build at `below` (< the min `lo`): {'limit', 'outcome', 'named', 'failure'}."""
    import tvm_swap
    from tvm_swap.errors import InfeasibleLimitError

    res = {"limit": below, "outcome": "skipped", "named": None, "exact": None, "failure": "",
           "first_compile": kw.get("graph_cache") is False}
    if not 0 < below < lo:
        return res
    try:
        m = tvm_swap.build(ex.mod, mem_limit=below, params=ex.params, **kw)
    except InfeasibleLimitError as e:
        res.update(outcome="refused", named=int(e.min_feasible), exact=bool(e.exact))
        if short_error(e):
            res["failure"] = f"the refusal of {below} is not a short error: {short_error(e)}"
        elif not e.min_feasible > below:
            res["failure"] = f"refused {below} naming a min {e.min_feasible} that is not above it"
        elif e.exact and e.min_feasible != lo:
            res["failure"] = f"refused {below} naming min {e.min_feasible}, but the planner's min is {lo}"
        elif not e.exact and e.min_feasible > lo:
            res["failure"] = f"refused {below} naming a lower bound {e.min_feasible} above the min {lo}"
        return res
    res["outcome"] = "planned"
    if pool != "arena":
        res["failure"] = f"planned at {below}, below the min {lo} its refusal names"
        m.close()
        return res
    res["failure"] = _compare(m, ref, inputs, params, train)     # an arena plan below the min must still hold
    m.close()
    return res


def _outcomes(results: list[dict], check: str, outcome: str) -> int:
    """How many cases' `check` ('split', 'split_dense') ended in `outcome`."""
    return sum((r.get(check) or {}).get("outcome") == outcome for r in results)


def summarize(results: list[dict], wall_s: float) -> tuple[str, dict]:
    """(the table: cases, passes, failures and known limitations by kind; the same as a dict)."""
    n = len(results)
    counts = {k: sum(r["kind"] == k for r in results) for k in (*FAILURE_KINDS, *KNOWN_KINDS)}
    below = {o: sum((r["below"] or {}).get("outcome") == o for r in results) for o in ("refused", "planned")}
    below["refused before lowering (a lower bound)"] = sum((r["below"] or {}).get("exact") is False for r in results)
    passes = sum(r["ok"] for r in results)
    fails = sum(counts[k] for k in FAILURE_KINDS)
    rows = [("cases", n), ("passed", passes)]
    rows += [(f"failed: {k}", counts[k]) for k in FAILURE_KINDS]
    rows += [(f"known limitation: {k}", counts[k]) for k in KNOWN_KINDS]
    rows += [("known limitation: tvm-codegen, fuse_max_depth=1 then matched",
              sum(r.get("workaround") == "fuse_max_depth=1 ok" for r in results))]
    rows += [(f"below-min check: {o}", c) for o, c in below.items()]
    rows += [("plans with ops run in place", sum(bool(r.get("inplace")) for r in results)),
             ("plans with ops run on the host", sum(bool(r.get("host_ops")) for r in results)),
             ("ops run on the host, all plans", sum(r.get("host_ops") or 0 for r in results)),
             ("split_ops below the min: planned", _outcomes(results, "split", "planned")),
             ("split_ops below the min: refused", _outcomes(results, "split", "refused")),
             ("split_ops plans with regions of ops in slices", sum(bool((r.get("split") or {}).get("regions"))
                                                                   for r in results)),
             ("split_ops plans with dense layers in slices", sum(bool((r.get("split") or {}).get("dense"))
                                                                 for r in results)),
             ("split_dense training below the min: planned", _outcomes(results, "split_dense", "planned")),
             ("split_dense training below the min: refused", _outcomes(results, "split_dense", "refused")),
             ("split_dense training: weights split, all plans", sum((r.get("split_dense") or {}).get("weights", 0)
                                                                    for r in results)),
             ("split_dense training plans with regions in batch slices",
              sum(bool((r.get("split_dense") or {}).get("regions")) for r in results)),
             ("limit at exactly the min", sum(r.get("limit") == r.get("min") for r in results)),
             ("wall s", round(wall_s, 1))]
    width = max(len(k) for k, _ in rows)
    table = "\n".join(f"| {k:<{width}} | {v!s:>7} |" for k, v in rows)
    table = f"| {'':<{width}} | {'count':>7} |\n|{'-' * (width + 2)}|{'-' * 8}:|\n" + table
    return table, {"cases": n, "passed": passes, "failed": fails, "by_kind": counts, "below_min": below,
                   "wall_s": round(wall_s, 1)}


def case_line(r: dict) -> str:
    """One case's line (and, for a failure, its kind, why and reproducer)."""
    status = "ok  " if r["ok"] else ("KNOWN" if r["kind"] in KNOWN_KINDS else "FAIL")
    b = r["below"] or {}
    return (f"{status} seed {r['seed']:<5} {r.get('planner', '-'):<21} min {r.get('min', '-')!s:<9} "
            f"limit {r.get('limit', '-')!s:<9} below {b.get('limit', '-')!s:<8} {b.get('outcome', '-'):<8} "
            f"swap-ins {r.get('swaps', '-')!s:<4} in place {r.get('inplace', '-')!s:<3} "
            f"host {r.get('host_ops', '-')!s:<3} poison {r.get('poison', '-')!s:<5}{_split_note(r)} "
            f"{r.get('model', '')}"
            + ("" if r["ok"] else f"\n     {r['kind']}: {r['why'][:600]}\n     python scripts/fuzz_runtime.py "
               f"--case {r['seed']}"))


def _split_note(r: dict) -> str:
    """' split_ops planned' / ' split_dense refused' ...: the below-min split build's outcome, if one ran."""
    name = "split_dense" if r.get("split_dense") else "split_ops" if r.get("split") else None
    return f" {name} {r[name if name == 'split_dense' else 'split']['outcome']}" if name else ""


def run_cases(seeds, workers: int = 1):
    """The cases' results as they end: in this process, or in `workers` processes started fresh (spawn: TVM
    runs threads, which a fork would copy mid-flight), each importing TVM once and taking one case at a time,
    so a long case (a CNN training step: a minute) never holds up a queue behind it. A worker that dies (a
    crash inside TVM) fails its case as 'crash', and the cases not yet finished with it."""
    if workers <= 1:
        yield from map(run_case, seeds)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    from cut_short import worker_signals

    # (the workers leave Ctrl-C and a timeout's SIGTERM to this process, which ends them when it stops early)
    exe = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=worker_signals)
    finished = False
    try:
        futures = {exe.submit(run_case, s): s for s in seeds}
        for f in as_completed(futures):
            try:
                yield f.result()
            except BrokenProcessPool as e:
                yield {"seed": futures[f], "ok": False, "kind": "crash", "below": None,
                       "why": f"a worker process died while this case was pending or running ({e})"}
        finished = True
    finally:
        if not finished:          # cut short: the cases still running are not waited for
            _end_workers(exe)
        exe.shutdown(wait=finished, cancel_futures=True)


def _end_workers(exe) -> None:
    """Terminate a process pool's workers (Python 3.14 has ProcessPoolExecutor.terminate_workers)."""
    end = getattr(exe, "terminate_workers", None)
    if end is not None:
        end()
        return
    for p in list((getattr(exe, "_processes", None) or {}).values()):
        p.terminate()
    for p in list((getattr(exe, "_processes", None) or {}).values()):
        p.join(timeout=10)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--case", type=int, default=None)
    ap.add_argument("--json", default=None, help="write every case and the counts here")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes running cases side by side (each builds and runs on its own; default 1)")
    ap.add_argument("--host-only", action="store_true",
                    help="only the cases (seeds from --start on) that run ops on the host, --n of them")
    args = ap.parse_args(argv)
    seeds = [args.case] if args.case is not None else list(range(args.start, args.start + args.n))
    if args.host_only and args.case is None:
        seeds = [s for s in range(args.start, args.start + 20 * args.n) if draws_host_ops(s)][:args.n]
    from tvm_swap.provenance import git_commit

    commit = git_commit()        # the code measured: HEAD when the run starts
    t0 = time.perf_counter()
    results = []

    def work(run):
        with contextlib.closing(run_cases(seeds, args.workers)) as cases:
            for r in cases:
                if run.cut:      # (a signal that TVM turned into a case's error: that case was cut, not failed)
                    raise KeyboardInterrupt
                results.append(r)
                print(case_line(r), flush=True)

    def summarize_run(cut):
        results.sort(key=lambda r: r["seed"])
        return _report(args, commit, results, time.perf_counter() - t0, cut, len(seeds))
    # Ctrl-C or a timeout's SIGTERM: the cases finished so far are summarized and written all the same, marked
    # as cut, and the exit code is 130 (cut_short.py)
    return run_cut_short(work, summarize_run)


def _report(args, commit, results, wall, cut, n) -> int:
    """Print the table and the last line, write the JSON; the exit code (130 for a run cut short)."""
    table, counts = summarize(results, wall)
    print(table)
    bad = [r["seed"] for r in results if r["kind"] in FAILURE_KINDS]
    known = [r["seed"] for r in results if r["kind"] in KNOWN_KINDS]
    print(f"{counts['passed']}/{len(results)} cases passed in {wall:.1f} s; failures: {bad or 'none'}; "
          f"known limitations: {known or 'none'}" + (f"; CUT SHORT: {len(results)} of {n} cases" if cut else ""))
    if args.json:
        import json

        Path(args.json).write_text(json.dumps({"commit": commit, "args": vars(args), **counts,
                                               "cases_done": len(results), "cut_short": cut,
                                               "cases": results}, indent=1, default=str) + "\n")
    return 130 if cut else 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
