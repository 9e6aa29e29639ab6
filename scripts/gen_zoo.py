#!/usr/bin/env python
"""Generate tvm_swap/zoo/data/NAME.json.gz: the zoo's training graphs, batch-affine.

For each model: build the Relax train_step (tvm_swap/zoo/models) at three batch sizes; lower it with
relay_passes.lower for cuda sm_70 (the paper's V100: dlight's default GPU schedules inline a fused
kernel's elementwise intermediates, so the kernel workspace is what a GPU build allocates, not llvm's
unscheduled upper bound; nothing is compiled, so this runs on a CPU) and once more for llvm, whose
unscheduled kernels give the flop counts; extract the DataflowGraph (tvm_swap.graph.from_relax); fit
sizes and flops as a*B + b on two batches and check the fit exactly on the third
(tvm_swap.zoo.affine); save it and print its figures at the paper's batches next to the paper's.

    python scripts/gen_zoo.py                       # all models, about 10 minutes on 2 cores
    python scripts/gen_zoo.py --models bert-large --fit-batches 5 7 --check-batch 11

The default batches are odd primes so that no batch-dependent size equals one of the model's own
dimensions (a coincidence could let TVM share or simplify a kernel at one batch but not another).
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tvm_swap.graph import DataflowGraph  # noqa: E402
from tvm_swap.zoo import FORMULA, ZOO, zoo_path  # noqa: E402
from tvm_swap.zoo.affine import fit, instantiate  # noqa: E402
from tvm_swap.zoo.stats import memory_stats  # noqa: E402


DEFAULT_TARGET = '{"kind": "cuda", "arch": "sm_70"}'


def as_target(text: str):
    """'llvm', 'cuda' or a JSON dict such as DEFAULT_TARGET (TVM 0.27 dropped '-arch=' strings)."""
    import tvm

    return tvm.target.Target(json.loads(text) if text.lstrip().startswith("{") else text)


def extract(name: str, batch: int, target: str):
    """The graph lowered for `target`, with each op's flops counted on its unscheduled kernel.

    GPU schedules tile and pad loops, so TVM's flop estimate of a scheduled kernel is neither the
    algorithm's count nor affine in the batch; the llvm lowering has the same kernels unscheduled.
    """
    import dataclasses

    from relay_passes.lower import lower
    from tvm_swap.graph import from_relax
    from tvm_swap.zoo.models import MODELS, entry_function, training_module

    mod = training_module(name, batch)
    depth = MODELS[name].fuse_max_depth
    func = entry_function(name)          # train_step, or forward for an inference model
    g = from_relax(lower(mod, as_target(target), fuse_max_depth=depth, func_name=func),
                   func, name=f"{name}@batch={batch}")
    if as_target(target).kind.name == "llvm":
        return g
    plain = from_relax(lower(mod, "llvm", fuse_max_depth=depth, func_name=func), func)
    if [(o.kernel, o.inputs, o.outputs) for o in plain.ops] != [(o.kernel, o.inputs, o.outputs) for o in g.ops]:
        raise SystemExit(f"{name}@{batch}: the llvm and {target} lowerings have different kernels; "
                         f"cannot take flops from the unscheduled kernels")
    ops = [dataclasses.replace(o, flops=p.flops) for o, p in zip(g.ops, plain.ops)]
    meta = {**g.meta, "flops_from": "unscheduled kernels (llvm lowering)"}
    return DataflowGraph(g.name, g.tensors, ops, g.outputs, g.updates, meta)


def _extract_dict(name: str, batch: int, target: str) -> dict:
    """extract() for a worker process: graphs travel back as their JSON dict."""
    return extract(name, batch, target).to_dict()


def extract_all(name: str, batches, target: str, jobs: int) -> dict[int, DataflowGraph]:
    """The graph at each batch, `jobs` extractions at a time in separate processes (1: in this one)."""
    if jobs <= 1:
        return {b: extract(name, b, target) for b in batches}
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn")) as ex:
        futures = {b: ex.submit(_extract_dict, name, b, target) for b in batches}
        return {b: DataflowGraph.from_dict(f.result()) for b, f in futures.items()}


def generate(name: str, fit_batches, check_batch: int, target: str, out: Path, jobs: int = 1) -> dict:
    from tvm_swap.zoo.models import MODELS, model_config

    t0 = time.time()
    graphs = extract_all(name, (*fit_batches, check_batch), target, jobs)
    doc = fit(graphs, name, fit_batches=list(fit_batches))
    # The file must reproduce every extraction exactly (sizes, flops, structure).
    for b, g in graphs.items():
        back = instantiate(doc, b)
        if back.fingerprint() != g.fingerprint() or [o.flops for o in back.ops] != [o.flops for o in g.ops]:
            raise SystemExit(f"{name}: the affine file does not reproduce the graph at batch {b}")
    spec = MODELS[name]
    doc["meta"].update({
        "description": ZOO[name]["description"],
        "config": model_config(name),
        "optimizer": None if spec.inference else spec.optimizer,
        "inference": spec.inference,
        "fuse_max_depth": spec.fuse_max_depth,
        "generator": "scripts/gen_zoo.py",
        "lowered_for": target,
    })
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, separators=(",", ":"))
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as f:
        f.write(text)
    return {"seconds": time.time() - t0, "file_bytes": out.stat().st_size, "doc": doc}


def report_rows(name: str, doc: dict) -> list[dict]:
    rows = []
    paper = ZOO[name]["paper"] or {}
    for b in ZOO[name]["paper_batches"]:
        s = memory_stats(instantiate(doc, b))
        row = {"model": name, "batch": b, **s}
        if paper.get("batch") == b:
            row["paper_need"] = paper["memory_need_bytes"]
            row["paper_ops"] = paper["ops"]
            row["paper_sizes"] = paper["unique_sizes"]
        rows.append(row)
    return rows


def print_table(rows: list[dict]) -> None:
    gb = lambda v: f"{v / 1e9:8.1f}"  # noqa: E731
    print(f"{'model':<15}{'batch':>6}{'ops':>7}{'tensors':>8}{'sizes':>6}{'peak GB':>9}{'sum GB':>9}"
          f"{'params GB':>10}{'states GB':>10}{'TFLOP':>8}   paper (need GB / ops / sizes) and peak/paper")
    for r in rows:
        tail = ""
        if "paper_need" in r:
            tail = (f"   {r['paper_need'] / 1e9:.0f} / {r['paper_ops']} / {r['paper_sizes']}   "
                    f"peak {r['peak_bytes'] / r['paper_need']:.2f}x, sum {r['total_bytes'] / r['paper_need']:.2f}x")
        print(f"{r['model']:<15}{r['batch']:>6}{r['ops']:>7}{r['tensors']:>8}{r['unique_sizes']:>6}"
              f"{gb(r['peak_bytes'])}{gb(r['total_bytes'])} {gb(r['param_bytes'])}  {gb(r['state_bytes'])} "
              f"{r['gflops'] / 1e3:7.1f}{tail}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=[n for n in ZOO if n not in FORMULA], choices=list(ZOO),
                    help="default: every model with a data file (FORMULA models load without one; naming one "
                         "here still lowers its Relax version, slowly)")
    ap.add_argument("--fit-batches", nargs=2, type=int, default=[5, 7], metavar="B")
    ap.add_argument("--check-batch", type=int, default=11, metavar="B")
    ap.add_argument("--target", default=DEFAULT_TARGET, help=f"TVM target (default: {DEFAULT_TARGET})")
    ap.add_argument("--out-dir", type=Path, default=None, help="default: tvm_swap/zoo/data")
    ap.add_argument("--json", type=Path, help="also write the table as JSON here")
    ap.add_argument("--jobs", type=int, default=1,
                    help="extract the three batches in this many processes (large models: 3)")
    args = ap.parse_args(argv)
    if len({*args.fit_batches, args.check_batch}) != 3 or min(*args.fit_batches, args.check_batch) < 1:
        ap.error("--fit-batches and --check-batch must be three different positive batch sizes")

    rows = []
    for name in args.models:
        out = (args.out_dir / f"{name}.json.gz") if args.out_dir else zoo_path(name)
        res = generate(name, args.fit_batches, args.check_batch, args.target, out, args.jobs)
        print(f"{name}: {len(res['doc']['ops'])} ops, {len(res['doc']['tensors'])} tensors -> {out} "
              f"({res['file_bytes'] / 1e3:.0f} kB, {res['seconds']:.0f} s)", flush=True)
        rows += report_rows(name, res["doc"])
    print()
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
