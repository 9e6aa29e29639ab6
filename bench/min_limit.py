#!/usr/bin/env python
"""The smallest memory limit each pool mode can plan, for the bundled examples and the MXNet fixtures.

For each model (inference, and its training step where a model has params) at batch 1, 8 and 128: the
no-swap peak, the arena's and the size-class pool's min feasible limit (bytes and % of the peak), the
largest op's own working set and the kernel workspace reserve. Needs TVM (lowering) but no profiling: both
floors come from the graph alone. Prints a table and writes benchmarks/min_limit.{json,md} with the commit.

    python -m bench min-limit
    python -m bench min-limit --models small_cnn,resnet18_v1 --batches 1,128
    python -m bench min-limit --models small_cnn --micro-batches 2,4   # + inference in K slices
    python -m bench min-limit --models '' --examples '' --imagenet all       # ImageNet-size CNNs only
    python -m bench min-limit --train-only --batches 1,8 --bert 12           # training steps + BERT-base-sized

ImageNet-size CNNs (--imagenet, default all): AlexNet-, VGG-16-, ResNet-50-, MobileNetV2- and DenseNet-121-shaped
symbols written by scripts/make_cnn_symbols.py and scripts/make_resnet50_symbol.py (random weights, as
`--init random` compiles them), batch 1 inference, data 1x3x224x224. --symbols-dir reads the symbol files from
a folder instead of writing them (how a commit without the generators is measured on the same symbols).

A micro-batched row's "no-swap peak" is the unsplit model's (the share a user asks for), its floors the split
model's. So is an inference row's: its arena floor is that of the model with dense layers split by output
features and regions of ops split (tvm_swap.limits.split_to_fit, as `--split-ops` compiles it), beside the floor
without splits (arena_min_unsplit). So is a training step's: its trainable dense weights in row chunks through
the step (tvm_swap.limits.split_train, as `split_dense=True` compiles it; absent before that commit).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent

FIXTURES = ROOT / "tests" / "data" / "mxnet"
MXNET = ["small_cnn", "resnet18_v1", "mlp", "transformer_encoder"]
EXAMPLES = ["mlp", "cnn", "mlp-train", "cnn-train"]
IMAGENET = ["alexnet", "vgg16", "resnet50_v1", "mobilenetv2_1.0", "densenet121"]


def git_commit() -> str:
    from tvm_swap.provenance import git_commit

    return git_commit()


def mxnet_module(name: str, batch: int):
    from tvm_swap.frontends.mxnet import from_mxnet

    info = json.loads((FIXTURES / f"{name}.input.json").read_text())
    shapes = {i["name"]: [batch] + list(i["shape"][1:]) for i in info["inputs"]}
    params = FIXTURES / info["params_file"] if info.get("params_file") else None
    mod, prm = from_mxnet(FIXTURES / f"{name}-symbol.json", str(params) if params else None, shapes)
    return mod, prm


def imagenet_module(name: str, symbols_dir: Path):
    """The ImageNet-size CNN `name` at batch 1 (its symbol written to symbols_dir when not there)."""
    from tvm_swap.frontends.mxnet import from_mxnet

    path = symbols_dir / f"{name}-symbol.json"
    if not path.exists():
        sys.path.insert(0, str(ROOT / "scripts"))
        if name == "resnet50_v1":
            from make_resnet50_symbol import write
            write(symbols_dir)
        else:
            from make_cnn_symbols import write
            write(symbols_dir, name)
    mod, _ = from_mxnet(path, None, {"data": [1, 3, 224, 224]})
    return mod


def graph_of(mod):
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax

    try:             # as tvm_swap.build compiles it (frozen weights folded into their compute layout)
        from tvm_swap.pipeline import fold_frozen_layouts
    except ImportError:  # a commit before the fold (the "before" column)
        return graph_from_relax(lower(mod, "llvm"), "main", target="llvm")
    return graph_from_relax(lower(fold_frozen_layouts(mod)[0], "llvm"), "main", target="llvm")


def split_graph_of(mod):
    """(graph once no dense layer's weight sets the floor (tvm_swap.limits.split_to_fit.split_floor), then with the
    regions of ops split that lower it most (split_regions_floor; absent before that commit), {weight: K},
    [[first, last, axis, K] of each region])."""
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.pipeline import fold_frozen_layouts
    from tvm_swap.limits.split_to_fit import split_floor

    def lower_graph(m):
        low = lower(m, "llvm")
        return low, graph_from_relax(low, "main", target="llvm")

    m, g, splits = split_floor(fold_frozen_layouts(mod)[0], lower_graph)
    if "tvm_swap.updates" in m["main"].attrs:     # a training step: its trainable weights' row chunks only
        return g, splits, []
    try:
        from tvm_swap.limits.split_to_fit import split_regions_floor
    except ImportError:
        return g, splits, []
    _, g, regions = split_regions_floor(m, lower_graph)
    return g, splits, [[r.start, r.end, r.axis, r.k] for r in regions]


def bert_step(symbols_dir: Path, layers: int, seq: int = 128):
    """The BERT-base-sized training step (scripts/make_bert_symbol.py: `layers` encoder layers, hidden 768, the
    masked-LM head; batch 1, `seq` tokens; SGD on cross-entropy over the vocabulary)."""
    from tvm_swap.frontends.mxnet import from_mxnet
    from tvm_swap.training import train_step

    sys.path.insert(0, str(ROOT / "scripts"))
    from make_bert_symbol import write

    path = write(symbols_dir / f"bert_{layers}l", layers)
    mod, _ = from_mxnet(path, None, {"data": [1, seq, 768]})
    return train_step(mod, None, loss="cross_entropy", optimizer="sgd")[0]


def measure(label: str, mod, peak_of=None, split: bool = False) -> dict:
    """peak_of: the module whose no-swap peak the row is a share of (the unsplit model for a micro-batched row)."""
    from tvm_swap.planner.api import feasible_floor
    from tvm_swap.planner.bounds import noswap_peak
    from tvm_swap.planner.graphindex import GraphIndex
    from tvm_swap.planner.swapadvisor.arena import working_set_floor

    splits, regions, unsplit_floor = {}, [], None
    g = unsplit = graph_of(mod)
    if split:       # dense layers and regions of ops split until none lowers the floor (tvm_swap.limits.split_to_fit)
        try:
            split_g, splits, regions = split_graph_of(mod)
        except ImportError:   # a commit before the split
            split_g = None
        if split_g is not None:
            unsplit_floor = int(feasible_floor(g, "arena")[0])
            g = split_g
    gi = GraphIndex.build(g, 256, keep_updated=False)
    # a share of the need of the model the user compiles (unsplit): what a percentage limit resolves against
    peak = noswap_peak(unsplit if peak_of is None else graph_of(peak_of))
    arena, _ = feasible_floor(g, "arena")
    classes, _ = feasible_floor(g, "size-classes")
    row = {"model": label, "ops": g.num_ops, "noswap_peak": int(peak), "arena_min": int(arena),
           "size_classes_min": int(classes), "largest_working_set": int(working_set_floor(gi)),
           "workspace": int(gi.workspace),
           **({"splits": splits, "regions": regions, "arena_min_unsplit": unsplit_floor}
              if unsplit_floor is not None else {})}
    print(f"{label:38s} peak {peak / 1e6:9.2f} MB  arena {arena / peak:6.1%}  size classes {classes / peak:6.1%}  "
          f"(working set {row['largest_working_set'] / 1e6:.2f} MB, workspace {row['workspace'] / 1e6:.2f} MB)",
          flush=True)
    return row


def render(rows: list[dict], commit: str) -> str:
    from tvm_swap.units import format_bytes

    out = ["# Smallest feasible limit: arena vs size classes", "",
           f"No-swap peak (liveness, default schedule) and each pool's min feasible limit, from the graph alone "
           f"(llvm lowering, no profiling). Commit {commit}. `bench/min_limit.py`.", "",
           "| model | ops | no-swap peak | arena min | % of peak | size-classes min | % of peak | largest op | "
           "workspace |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p = r["noswap_peak"]
        out.append(f"| {r['model']} | {r['ops']} | {format_bytes(p)} | {format_bytes(r['arena_min'])} | "
                   f"{r['arena_min'] / p:.1%} | {format_bytes(r['size_classes_min'])} | "
                   f"{r['size_classes_min'] / p:.1%} | {format_bytes(r['largest_working_set'])} | "
                   f"{format_bytes(r['workspace'])} |")
    return "\n".join(out) + "\n"


def _split_words(r: dict) -> str:
    dense = [f"{w} x{k}" for w, k in r["splits"].items()]
    axes = {0: "batch", 1: "channels", 2: "rows"}
    regions = [f"{a}..{b} by {axes.get(ax, ax)} x{k}" for a, b, ax, k in r.get("regions", [])]
    if len(regions) > 3:
        regions = regions[:3] + [f"{len(regions) - 3} more regions"]
    return "; ".join(dense + regions) or "no split"


def render_compared(rows: list[dict], before: dict, commit: str) -> str:
    """One table: each row's arena floor before (`before`: an earlier run's JSON) and now, as bytes and as a
    share of that commit's own no-swap peak (the peak itself moves when the lowering drops kernels)."""
    from tvm_swap.units import format_bytes

    old = {r["model"]: r for r in before["rows"]}
    out = ["# Smallest feasible limit (arena), before and after", "",
           f"Before: commit {before.get('commit', 'unknown')}; after: commit {commit}. Each share is of that commit's "
           f"own no-swap peak. Without splits: the model as lowered (folds, fusion, in-place); with splits: dense "
           f"layers by output features, then regions of ops (a 'before' row has them where that commit split). "
           f"`bench/min_limit.py --before FILE`.", "",
           "| model | no-swap peak before | after | arena min before, no split | after | % of peak before | after | "
           "before, with splits | after, with splits (dense; regions of ops) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = old.get(r["model"])
        if b is None:
            continue
        plain = r.get("arena_min_unsplit", r["arena_min"])      # without splits (fold and fusion only)
        was = b.get("arena_min_unsplit", b["arena_min"])
        split = (f"{r['arena_min'] / r['noswap_peak']:.1%} ({format_bytes(r['arena_min'])}; "
                 f"{_split_words(r)})" if "arena_min_unsplit" in r else "")
        split_before = (f"{b['arena_min'] / b['noswap_peak']:.1%} ({format_bytes(b['arena_min'])})"
                        if "arena_min_unsplit" in b else "")
        out.append(f"| {r['model']} | {format_bytes(b['noswap_peak'])} | {format_bytes(r['noswap_peak'])} | "
                   f"{format_bytes(was)} | {format_bytes(plain)} | "
                   f"{was / b['noswap_peak']:.1%} | {plain / r['noswap_peak']:.1%} | {split_before} | {split} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MXNET), help="MXNet fixtures (comma list)")
    ap.add_argument("--examples", default=",".join(EXAMPLES), help="bundled examples (comma list; '' for none)")
    ap.add_argument("--batches", default="1,8,128")
    ap.add_argument("--no-train", action="store_true", help="inference only")
    ap.add_argument("--micro-batches", default="", help="also inference split into K slices of the batch "
                    "(relay_passes.micro_batch; comma list), as a share of the unsplit model's peak")
    ap.add_argument("--imagenet", default="all", help="ImageNet-size CNNs (comma list of "
                    f"{', '.join(IMAGENET)}; 'all'; '' for none), batch 1 inference")
    ap.add_argument("--train-only", action="store_true", help="training steps only (no inference rows)")
    ap.add_argument("--bert", type=int, default=0, metavar="LAYERS", help="also the BERT-base-sized training step "
                    "with that many encoder layers (12: BERT-base; scripts/make_bert_symbol.py), batch 1, seq 128")
    ap.add_argument("--symbols-dir", default="", help="their symbol files (default: written to a temporary folder)")
    ap.add_argument("--before", default="", help="an earlier run's min_limit.json: also write the two side by "
                    "side (min_limit_compared.md)")
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks"))
    args = ap.parse_args(argv)
    from tvm_swap.examples import get_example
    from tvm_swap.training import train_step

    rows = []
    for name in [x for x in args.examples.split(",") if x]:
        if "train" in name or not args.train_only:   # (training steps split their trainable dense weights)
            rows.append(measure(f"example {name}", get_example(name).mod, split=True))
    for name in [x for x in args.models.split(",") if x]:
        for b in (int(x) for x in args.batches.split(",")):
            mod, prm = mxnet_module(name, b)
            if not args.train_only:
                rows.append(measure(f"{name} batch {b} inference", mod, split=True))
            for k in (int(x) for x in args.micro_batches.split(",") if x and not args.train_only):
                if b % k == 0 and b > 1:
                    from relay_passes.micro_batch import split_batch
                    from tvm_swap.errors import UnsupportedModelError

                    try:
                        split = split_batch(mod, k)
                    except UnsupportedModelError as e:     # an op that mixes batch elements: say so, go on
                        print(f"{name} batch {b} inference, {k} micro-batches: {e}")
                        continue
                    rows.append(measure(f"{name} batch {b} inference, {k} micro-batches", split, peak_of=mod))
            if not args.no_train and b <= 8:          # training steps at batch 128 lower slowly on 2 cores
                try:
                    step, _ = train_step(mod, prm, loss="cross_entropy", optimizer="sgd")
                except Exception as e:  # a model without a gradient path: say so in the table
                    print(f"{name} batch {b} train step: {type(e).__name__}: {str(e).splitlines()[0]}")
                    continue
                rows.append(measure(f"{name} batch {b} train step", step, split=True))
    nets = IMAGENET if args.imagenet == "all" else [x for x in args.imagenet.split(",") if x]
    import tempfile

    symbols = Path(args.symbols_dir or tempfile.mkdtemp(prefix="imagenet-symbols-"))
    if args.bert:
        rows.append(measure(f"bert-base-sized ({args.bert} layers) seq 128 batch 1 train step",
                            bert_step(symbols, args.bert), split=True))
    if nets and not args.train_only:
        for name in nets:
            rows.append(measure(f"{name} batch 1 inference", imagenet_module(name, symbols), split=True))
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    commit = git_commit()
    record.write((out / "min_limit.json"), {"commit": commit, "rows": rows})
    (out / "min_limit.md").write_text(render(rows, commit))
    print(render(rows, commit))
    if args.before:
        before = json.loads(Path(args.before).read_text())
        record.write(out / "min_limit_compared.json", {"commit": commit, "before": before, "rows": rows})
        (out / "min_limit_compared.md").write_text(render_compared(rows, before, commit))
        print(render_compared(rows, before, commit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
