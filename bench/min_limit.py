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

Two commits in one table (issue 26's must-show): --code-tree measures every row with an earlier checkout's code
as well (a child process with that tree's tvm_swap and relay_passes first on sys.path, running this file's
measure, so both sides are measured the same way on the same symbol files, side by side on a loaded machine).
Each run is a piece (benchmarks/min_limit_both/PIECE.json, rewritten after every row); every run then merges all
pieces into benchmarks/min_limit_both.{json,md}: per row the arena floor before and after, what sets it, the split
used and issue 26's target verdict. A row the earlier tree cannot measure says n/a and why.

    python -m bench min-limit --code-tree /work/base533 --code-tree-commit 533543e --after-tree /work/base71 \
        --after-commit 71c253e --models small_cnn --examples '' --imagenet '' --train-128 --piece small_cnn
    python -m bench min-limit --table-only          # the one table of every piece measured so far
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

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


def imagenet_symbol(name: str, symbols_dir: Path) -> Path:
    """The ImageNet-size CNN `name`'s symbol file in symbols_dir (written by this tree's scripts when not there)."""
    path = symbols_dir / f"{name}-symbol.json"
    if not path.exists():
        sys.path.insert(0, str(ROOT / "scripts"))
        if name == "resnet50_v1":
            from make_resnet50_symbol import write
            write(symbols_dir)
        else:
            from make_cnn_symbols import write
            write(symbols_dir, name)
    return path


def bert_symbol(symbols_dir: Path, layers: int) -> Path:
    """scripts/make_bert_symbol.py's BERT-base-sized symbol with `layers` encoder layers (written when not there)."""
    path = symbols_dir / f"bert_{layers}l" / "bert_base-symbol.json"
    if not path.exists():
        sys.path.insert(0, str(ROOT / "scripts"))
        from make_bert_symbol import write

        path = write(symbols_dir / f"bert_{layers}l", layers)
    return path


def imagenet_module(name: str, symbols_dir: Path):
    """The ImageNet-size CNN `name` at batch 1 (its symbol written to symbols_dir when not there)."""
    from tvm_swap.frontends.mxnet import from_mxnet

    mod, _ = from_mxnet(imagenet_symbol(name, symbols_dir), None, {"data": [1, 3, 224, 224]})
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
    regions of ops split that lower it most (split_regions_floor; absent before that commit; a training step's
    along the batch since train128, a tree before returns it unchanged), {weight: K},
    [[first, last, axis, K] of each region])."""
    from relay_passes.lower import lower
    from tvm_swap.graph.extract import graph_from_relax
    from tvm_swap.pipeline import fold_frozen_layouts
    from tvm_swap.limits.split_to_fit import split_floor

    def lower_graph(m):
        low = lower(m, "llvm")
        return low, graph_from_relax(low, "main", target="llvm")

    m, g, splits = split_floor(fold_frozen_layouts(mod)[0], lower_graph)
    attrs = m["main"].attrs           # a training step's inputs in batch slices (since train128), shown as splits
    if attrs is not None and "tvm_swap.input_splits" in attrs:
        sliced = json.loads(str(attrs["tvm_swap.input_splits"]))
        splits = {**splits, **{f"input {n} by batch": len(p) for n, p in sliced.items()}}
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

    mod, _ = from_mxnet(bert_symbol(symbols_dir, layers), None, {"data": [1, seq, 768]})
    return train_step(mod, None, loss="cross_entropy", optimizer="sgd")[0]


def floor_op(gi) -> dict:
    """The op with the largest own working set in the measured graph (inputs + outputs, aligned, less what
    running in place saves where the tree knows in-place ops): what the arena floor cannot go below, beside the
    workspace reserve. Computed here from the GraphIndex so that a tree without tvm_swap.limits names it too."""
    import numpy as np

    if not len(gi.op_tensors):
        return {}
    per_op = np.add.reduceat(gi.size[gi.op_tensors], gi.op_ptr[:-1])
    per_op = np.where(np.diff(gi.op_ptr) > 0, per_op, 0)
    if hasattr(gi.graph, "inplace_savings"):
        per_op = per_op - gi.graph.inplace_savings(gi.size)
    i = int(np.argmax(per_op))
    op = gi.graph.ops[i]
    biggest = max(op.inputs + op.outputs, key=lambda t: gi.graph.tensors[t].nbytes, default=None)
    return {"op": op.name, "kernel": op.kernel, "bytes": int(per_op[i]),
            "largest_tensor": None if biggest is None else gi.graph.tensors[biggest].name,
            "largest_tensor_bytes": 0 if biggest is None else int(gi.graph.tensors[biggest].nbytes)}


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
           "workspace": int(gi.workspace), "floor_op": floor_op(gi),
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


# ---------------------------------------------------------------- rows as specs (what a child measures)
def row_specs(args) -> list[dict]:
    """The rows asked for, in table order: {"kind": example|mxnet|imagenet|bert, "name", "batch", "train",
    "micro"} (micro: K slices of the batch, inference only)."""
    specs = []
    for name in [x for x in args.examples.split(",") if x]:
        if "train" in name or not args.train_only:
            specs.append({"kind": "example", "name": name, "batch": 0, "train": "train" in name})
    for name in [x for x in args.models.split(",") if x]:
        for b in (int(x) for x in args.batches.split(",")):
            if not args.train_only:
                specs.append({"kind": "mxnet", "name": name, "batch": b, "train": False})
                specs += [{"kind": "mxnet", "name": name, "batch": b, "train": False, "micro": k}
                          for k in (int(x) for x in args.micro_batches.split(",") if x) if b % k == 0 and b > 1]
            if not args.no_train and (b <= 8 or args.train_128):
                specs.append({"kind": "mxnet", "name": name, "batch": b, "train": True})
    if args.bert:
        specs.append({"kind": "bert", "name": f"bert-base-sized ({args.bert} layers)", "layers": args.bert,
                      "batch": 1, "train": True})
    if not args.train_only:
        nets = IMAGENET if args.imagenet == "all" else [x for x in args.imagenet.split(",") if x]
        specs += [{"kind": "imagenet", "name": n, "batch": 1, "train": False} for n in nets]
    return specs


def label_of(spec: dict) -> str:
    if spec["kind"] == "example":
        return f"example {spec['name']}"
    if spec["kind"] == "bert":
        return f"{spec['name']} seq 128 batch 1 train step"
    what = "train step" if spec["train"] else "inference"
    micro = f", {spec['micro']} micro-batches" if spec.get("micro") else ""
    return f"{spec['name']} batch {spec['batch']} {what}{micro}"


def measure_spec(spec: dict, symbols: Path) -> dict:
    """The row of `spec`, measured with whatever tvm_swap / relay_passes come first on sys.path; an error (a model
    or option that tree cannot take) is the row's "error", the first line of what it said."""
    label = label_of(spec)
    try:
        if spec["kind"] == "example":
            from tvm_swap.examples import get_example

            return measure(label, get_example(spec["name"]).mod, split=True)
        if spec["kind"] == "imagenet":
            return measure(label, imagenet_module(spec["name"], symbols), split=True)
        if spec["kind"] == "bert":
            return measure(label, bert_step(symbols, spec["layers"]), split=True)
        mod, prm = mxnet_module(spec["name"], spec["batch"])
        if spec.get("micro"):
            from relay_passes.micro_batch import split_batch

            return measure(label, split_batch(mod, spec["micro"]), peak_of=mod)
        if spec["train"]:
            from tvm_swap.training import train_step

            mod = train_step(mod, prm, loss="cross_entropy", optimizer="sgd")[0]
        return measure(label, mod, split=True)
    except Exception as e:     # noqa: BLE001 (said in the table: a tree that lacks an op, a gradient, an option)
        words = (str(e).strip().splitlines() or [""])[0][:300]
        print(f"{label}: {type(e).__name__}: {words}", file=sys.stderr, flush=True)
        return {"model": label, "error": f"{type(e).__name__}: {words}"}


# ---------------------------------------------------------------- the child: one tree, measuring rows
ROW_MARK = "@@min_limit_row "


def child(tree: str, symbols: str) -> None:
    """Measure the rows sent on stdin (one spec as JSON a line) with `tree`'s tvm_swap and relay_passes first on
    sys.path; answer each on stdout as ROW_MARK + JSON (anything else the tree prints is not an answer)."""
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [tree] + [p for p in sys.path if p not in ("", here)]
    for line in sys.stdin:
        spec = json.loads(line)
        t0 = time.process_time()
        row = measure_spec(spec, Path(symbols))
        row["cpu_s"] = round(time.process_time() - t0, 1)
        row["code_from"] = str(Path(sys.modules["tvm_swap"].__file__).parent.parent)   # the tree it measured
        print(ROW_MARK + json.dumps(row), flush=True)


class TreeChild:
    """A child process measuring rows with one tree's code (restarted after a crash: that row says so)."""

    def __init__(self, tree: str, symbols: Path):
        self.tree, self.symbols, self.proc = str(Path(tree).resolve()), symbols, None

    def _start(self):
        env = {**os.environ, "PYTHONPATH": self.tree}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", self.tree, "--symbols-dir", str(self.symbols)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=self.tree)

    def send(self, spec: dict) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps(spec) + "\n")
        self.proc.stdin.flush()

    def answer(self, spec: dict) -> dict:
        for line in self.proc.stdout:
            if line.startswith(ROW_MARK):
                return json.loads(line[len(ROW_MARK):])
        self.proc = None
        return {"model": label_of(spec), "error": f"the child measuring with {self.tree} stopped (see its stderr)"}

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()


# ---------------------------------------------------------------- two trees side by side: pieces, one table
CNNS = {"small_cnn", "resnet18_v1", "cnn", *IMAGENET}


def target_of(spec: dict) -> float | None:
    """Issue 26's target for the row (a share of the no-swap need), None where it sets none."""
    if spec.get("micro"):
        return None
    if spec["train"]:
        return 0.30
    if spec["name"] == "small_cnn" and spec["batch"] == 128:
        return 0.40
    if spec["name"] in CNNS and spec["batch"] in (0, 1):     # (an example's batch is its own: cnn's is 1)
        return 0.15
    return None


def side_by_side(specs: list[dict], args, symbols: Path, piece_path: Path) -> list[dict]:
    """Each spec measured by both trees at once (a child each, so a loaded machine weighs on both alike), the
    piece's JSON rewritten after every row so that a run cut short keeps what it measured."""
    from bench import record

    run = record.start()
    sides = {"before": TreeChild(args.code_tree, symbols), "after": TreeChild(args.after_tree, symbols)}
    done = []
    try:
        for spec in specs:
            for c in sides.values():
                c.send(spec)
            got = {side: c.answer(spec) for side, c in sides.items()}
            done.append({"spec": spec, **got})
            print(f"  {label_of(spec)}: before {_share(got['before'])}, after {_share(got['after'])}", flush=True)
            record.write(piece_path, {"commit": args.after_commit, "before_commit": args.code_tree_commit,
                                      "before_tree": args.code_tree, "after_tree": args.after_tree,
                                      "rows": done}, run, quiet=True)
    finally:
        for c in sides.values():
            c.close()
    return done


def _share(row: dict) -> str:
    return "n/a" if "error" in row else f"{row['arena_min'] / row['noswap_peak']:.1%}"


def _order(spec: dict) -> tuple:
    kinds = ["example", "mxnet", "imagenet", "bert"]
    names = EXAMPLES + MXNET + IMAGENET
    return (kinds.index(spec["kind"]), names.index(spec["name"]) if spec["name"] in names else 99,
            spec["batch"], spec["train"], spec.get("micro", 0))


KERNEL_NAME_CHARS = 60     # the table's floor kernel names are cut here (the JSON keeps them whole)


def _floor_words(r: dict) -> str:
    f = r.get("floor_op") or {}
    from tvm_swap.units import format_bytes

    ws = f" + workspace {format_bytes(r['workspace'])}" if r.get("workspace") else ""
    name = f.get("kernel", "?")
    name = name if len(name) <= KERNEL_NAME_CHARS else name[:KERNEL_NAME_CHARS] + "..."   # fused names run long
    return f"`{name}` {format_bytes(f.get('bytes', 0))}{ws}" if f else "?"


def _cell(r: dict, split_words: bool) -> str:
    from tvm_swap.units import format_bytes

    if "error" in r:
        return f"n/a ({r['error']})"
    split = f"; split: {_split_words(r)}" if split_words and "arena_min_unsplit" in r else ""
    return f"{_share(r)} ({format_bytes(r['arena_min'])}; floor {_floor_words(r)}{split})"


def _verdict(spec: dict, r: dict) -> str:
    t = target_of(spec)
    if t is None:
        return "-"
    if "error" in r:
        return f"<= {t:.0%}: n/a"
    share = r["arena_min"] / r["noswap_peak"]
    return f"<= {t:.0%}: " + ("met" if share <= t + 1e-12 else f"**OVER** ({share:.1%})")


def render_both(rows: list[dict], before_commit: str, after_commit: str) -> str:
    """One table: every row before and after (each as a share of its own commit's no-swap need) and the verdict
    of issue 26's target on each."""
    from tvm_swap.units import format_bytes

    out = ["# Smallest feasible limit (arena), both commits in one run", "",
           f"Before: {before_commit}; after: {after_commit}, each measured by bench/min_limit.py in a child with "
           f"that tree first on sys.path, on the same symbol files. A share is of that commit's own no-swap need "
           f"(liveness peak of the unsplit model, default schedule, llvm lowering). 'after, no split': the model as "
           f"lowered (folds, fusion, in-place); 'after': with the splits that commit applies when they lower the "
           f"floor (inference: dense layers by output features, then regions of ops, as --split-ops; training: "
           f"split_dense=True: trainable dense weights in row chunks, and from ff1897c on also per-sample regions "
           f"along the batch and a 2-D input in batch slices). 'floor': the op with the largest own working "
           f"set in the graph measured (its kernel, inputs + outputs aligned) and the workspace reserve. "
           f"Targets (issue 26): CNN inference at batch 1 <= 15%, small_cnn batch 128 inference <= 40%, training "
           f"steps <= 30%; judged on 'after'.", "",
           "| model | need before | need after | before | after, no split | after (with its split) | target | after at |",
           "|---|---|---|---|---|---|---|---|"]
    for x in sorted(rows, key=lambda x: _order(x["spec"])):
        b, a = x["before"], x["after"]
        need = [("n/a" if "error" in r else format_bytes(r["noswap_peak"])) for r in (b, a)]
        plain = "n/a" if "error" in a else (f"{a.get('arena_min_unsplit', a['arena_min']) / a['noswap_peak']:.1%}")
        out.append(f"| {label_of(x['spec'])} | {need[0]} | {need[1]} | {_cell(b, False)} | {plain} | "
                   f"{_cell(a, True)} | {_verdict(x['spec'], a)} | {x.get('after_commit', '?')} |")
    return "\n".join(out) + "\n"


def write_table(out: Path, pieces_dir: Path) -> None:
    """Merge every piece under pieces_dir into min_limit_both.json and .md (a later piece's row wins)."""
    from bench import record

    rows, commits = {}, {}
    # by when each piece was measured (its provenance), not file times: a fresh clone's files all date from the
    # checkout, and the order decides which piece's row wins
    docs = [(p, json.loads(p.read_text())) for p in pieces_dir.glob("*.json")]
    for p, doc in sorted(docs, key=lambda pd: (pd[1]["provenance"].get("started_utc", ""), pd[0].name)):
        commits = {"before": doc.get("before_commit"), "after": doc.get("commit")}
        for r in doc["rows"]:
            rows[label_of(r["spec"])] = {**r, "piece": p.stem, "after_commit": doc.get("commit"),
                                         "load": [doc["provenance"]["load_before"],
                                                  doc["provenance"]["load_after"]]}
    if not rows:
        raise SystemExit(f"no pieces under {pieces_dir}: run with --code-tree first")
    merged = list(rows.values())
    record.write(out / "min_limit_both.json", {"commit": commits["after"], "before_commit": commits["before"],
                                               "rows": merged})
    afters = sorted({r["after_commit"] for r in merged if r.get("after_commit")})
    text = render_both(merged, commits["before"], ", ".join(afters) + " (each row's piece: its last column)")
    (out / "min_limit_both.md").write_text(text)
    print(text)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MXNET), help="MXNet fixtures (comma list)")
    ap.add_argument("--examples", default=",".join(EXAMPLES), help="bundled examples (comma list; '' for none)")
    ap.add_argument("--batches", default="1,8,128")
    ap.add_argument("--no-train", action="store_true", help="inference only")
    ap.add_argument("--train-128", action="store_true", help="training steps at batch 128 too (slow to lower)")
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
    ap.add_argument("--code-tree", default="", help="measure every row with this tree's code too (a checkout "
                    "of an earlier commit: its tvm_swap and relay_passes first on sys.path, in a child) beside "
                    "--after-tree's; writes the piece's JSON and the one table of all pieces (min_limit_both.md)")
    ap.add_argument("--code-tree-commit", default="", help="that tree's commit, for the table (a copy without git)")
    ap.add_argument("--after-tree", default=str(ROOT), help="the tree measured as 'after' (default: this one)")
    ap.add_argument("--after-commit", default="", help="its commit (default: git's, of this checkout)")
    ap.add_argument("--piece", default="all", help="with --code-tree: the name of this run's piece "
                    "(min_limit_both/PIECE.json; a piece run again replaces its rows)")
    ap.add_argument("--table-only", action="store_true", help="only merge the pieces into the one table")
    ap.add_argument("--out-dir", default=str(ROOT / "benchmarks"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    import tempfile

    args = parse_args(argv)
    symbols = Path(args.symbols_dir or tempfile.mkdtemp(prefix="imagenet-symbols-"))
    if args.child:
        child(args.child, str(symbols))
        return 0
    out = Path(args.out_dir)
    pieces = out / "min_limit_both"
    if args.table_only:
        write_table(out, pieces)
        return 0
    specs = row_specs(args)
    if args.code_tree:
        for s in specs:           # symbol files written once, by this tree's scripts, read by both trees
            if s["kind"] == "imagenet":
                imagenet_symbol(s["name"], symbols)
            elif s["kind"] == "bert":
                bert_symbol(symbols, s["layers"])
        args.code_tree_commit = args.code_tree_commit or Path(args.code_tree).name
        args.after_commit = args.after_commit or git_commit()
        side_by_side(specs, args, symbols, pieces / f"{args.piece}.json")
        write_table(out, pieces)
        return 0
    return measure_here(specs, args, symbols, out)


def measure_here(specs: list[dict], args, symbols: Path, out: Path) -> int:
    """This tree's code only, in this process (as before --code-tree): min_limit.{json,md}, and with --before
    an earlier run's JSON beside it."""
    from bench import record

    rows = [r for r in (measure_spec(s, symbols) for s in specs) if "error" not in r]
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
