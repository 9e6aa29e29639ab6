#!/usr/bin/env python
"""What a split costs (issue 26): time per call of a region's slices against the unsplit kernels (llvm).

For each case (a model, a region of ops, the axis and K): every kernel of the unsplit and of the split
program timed alone (tvm_swap.cost.profile.profile_times, no disk cache), and the sum over the region's ops: the
unsplit kernels vs the slices plus what splitting adds (a slice of each tensor read from before the region,
the join of each tensor read after it). Also the whole call (TVM's own memory plan, median of a few). Prints a
table and writes benchmarks/split_cost.json with the commit. The machine may be shared: read the ratios, each
measured side by side in one run.

    python -m bench split-cost
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

CASES = [   # (label, model, batch, [(first, last, axis, K)])
    ("small_cnn b128, conv0..pool1 by batch x2", "small_cnn", 128, [("lv", "smallcnn_pool1_fwd", 0, 2)]),
    ("small_cnn b128, conv0..pool1 by batch x5", "small_cnn", 128, [("lv", "smallcnn_pool1_fwd", 0, 5)]),
    ("small_cnn b128, conv0..pool0 by channels x4", "small_cnn", 128, [("lv", "smallcnn_pool0_fwd", 1, 4)]),
    ("small_cnn b128, conv0..pool1 by rows x4 (halo)", "small_cnn", 128, [("lv", "smallcnn_pool1_fwd", 2, 4)]),
]


def _lowered(mod):
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax

    low = lower(mod, "llvm")
    return low, graph_from_relax(low, "main", target="llvm")


def _kernel_seconds(low, graph) -> list[float]:
    from tvm_swap.cost.table import CostTable
    from tvm_swap.cost.profile import profile_times

    return [float(t) for t in profile_times(low, graph, "llvm", cache=CostTable())]


def median_call_seconds(fn, args, repeat: int) -> float:
    """Median wall seconds of `fn(*args)` over `repeat` calls after one warm-up call (split_k times its steps
    with it too)."""
    import numpy as np

    fn(*args)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _call_seconds(mod, params: dict, x, repeat: int) -> float:
    import tvm
    from tvm import relax

    from relay_passes.lower import lower_unlimited_build
    from relay_passes.param_layout import folded_layouts

    lay = folded_layouts(mod["main"])
    p = lay.to_compute(params) if lay is not None else params
    vm = relax.VirtualMachine(lower_unlimited_build(mod, "llvm"), tvm.cpu())
    args = [tvm.runtime.tensor(a) for a in [x] + [p[q.name] for q in mod["main"].params[1:]]]
    return median_call_seconds(vm["main"], args, repeat)


def _region_ops(graph_unsplit, graph_split):
    """Op ids of each graph that differ between the two (by kernel and tensor shapes): the region's ops and
    what splitting added; ops outside the region lower to the same kernels on the same shapes."""
    def sig(g, o):
        return (o.kernel.rstrip("0123456789_"), tuple(tuple(g.tensors[t].shape) for t in o.inputs + o.outputs))

    a = [sig(graph_unsplit, o) for o in graph_unsplit.ops]
    b = [sig(graph_split, o) for o in graph_split.ops]
    common = set(a) & set(b)
    return [i for i, s in enumerate(a) if s not in common], [i for i, s in enumerate(b) if s not in common]


def measure(label, model, batch, regions, repeat) -> dict:
    import numpy as np

    from bench.min_limit import mxnet_module
    from relay_passes.split_region import Region, SplitRegions
    from tvm_swap.pipeline import fold_frozen_layouts

    mod, prm = mxnet_module(model, batch)
    prm = {k: (v.numpy() if hasattr(v, "numpy") else np.asarray(v)) for k, v in prm.items()}
    mod = fold_frozen_layouts(mod)[0]
    split = SplitRegions([Region(*r) for r in regions])(mod)
    (lu, gu), (ls, gs) = _lowered(mod), _lowered(split)
    tu, ts = _kernel_seconds(lu, gu), _kernel_seconds(ls, gs)
    ru, rs = _region_ops(gu, gs)
    x = np.random.default_rng(0).standard_normal([batch, 3, 32, 32]).astype("float32")
    cu, cs = _call_seconds(mod, prm, x, repeat), _call_seconds(split, prm, x, repeat)
    row = {"case": label, "regions": regions, "region_ops_unsplit": len(ru), "region_ops_split": len(rs),
           "region_kernels_unsplit_s": sum(tu[i] for i in ru), "region_kernels_split_s": sum(ts[i] for i in rs),
           "all_kernels_unsplit_s": sum(tu), "all_kernels_split_s": sum(ts), "call_unsplit_s": cu,
           "call_split_s": cs}
    row["region_ratio"] = row["region_kernels_split_s"] / row["region_kernels_unsplit_s"]
    row["call_ratio"] = cs / cu
    return row


def render(rows, commit) -> str:
    out = ["# What a split costs (llvm)", "",
           f"Commit {commit}. Kernels timed alone (tvm_swap.cost.profile), the region's kernels summed; the whole call "
           f"with TVM's own memory plan (median). Shared, loaded 2-core machine: read the ratios. "
           f"`bench/split_cost.py`.", "",
           "| case | region kernels unsplit | split (slices + slicing + join) | ratio | call unsplit | split | ratio |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['case']} | {r['region_ops_unsplit']} ops, {r['region_kernels_unsplit_s'] * 1e3:.2f} ms | "
                   f"{r['region_ops_split']} ops, {r['region_kernels_split_s'] * 1e3:.2f} ms | "
                   f"{r['region_ratio']:.2f} | {r['call_unsplit_s'] * 1e3:.2f} ms | {r['call_split_s'] * 1e3:.2f} ms | "
                   f"{r['call_ratio']:.2f} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks"))
    args = ap.parse_args(argv)
    from tvm_swap.provenance import git_commit

    rows = []
    for label, model, batch, regions in CASES:
        rows.append(measure(label, model, batch, regions, args.repeat))
        print(f"{label}: region {rows[-1]['region_ratio']:.2f}x, call {rows[-1]['call_ratio']:.2f}x", flush=True)
    commit = git_commit()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    record.write(out / "split_cost.json", {"commit": commit, "rows": rows})
    (out / "split_cost.md").write_text(render(rows, commit))
    print(render(rows, commit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
