"""The model matrix: real architectures as their users call them, through import, inference at 50% and chained
Adam training steps at 50% of the no-swap need, each compared bitwise with the unlimited build (TVM's own
memory plan, same kernels) and against PyTorch (same init, same data).

    python scripts/model_matrix.py                 # every row: docs/MODELS.md + benchmarks/model_matrix.json
    python scripts/model_matrix.py --models llama,resnet    # refresh those rows only (the others are kept)

The architectures are tvm_swap.examples.real_models.CASES; the ONNX rows export one of them with
torch.onnx.export and import it with from_onnx (the `-onnx` suffix), and also compile it with
`tvm-swap compile model.onnx --train`. A failing row keeps its one-line reason. Times are CPU seconds of this
process, except the training build's own split (lower, profile, plan, build), which is wall-clock seconds as
tvm_swap.build reports it (on a shared machine, compare the shares, not the seconds).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))           # swap_models: the unlimited build, bitwise comparison

JSON_PATH = ROOT / "benchmarks" / "model_matrix.json"
DOC_PATH = ROOT / "docs" / "MODELS.md"
LIMIT, STEPS, LR = "50%", 2, 1e-3
FAST = dict(planner="swapadvisor", generations=2, workers=1)
# ONNX row -> (the case it exports, its options): BERT's logits, since its own loss would export as
# SoftmaxCrossEntropyLoss, which TVM's ONNX frontend does not convert (refused by name at import)
ONNX_ROWS = {"convnext-onnx": ("convnext", {}), "vit-onnx": ("vit", {"own_loss": False}),
             "bert-onnx": ("bert-mlm", {"own_loss": False})}


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300] if text else ''}"


class Stage:
    """Times a stage in CPU seconds and names it in a failure."""

    def __init__(self, row: dict, name: str):
        self.row, self.name = row, name

    def __enter__(self):
        self.t = time.process_time()
        return self

    def __exit__(self, kind, e, tb):
        self.row.setdefault("cpu_s", {})[self.name] = round(time.process_time() - self.t, 2)
        if e is not None and not isinstance(e, KeyboardInterrupt):
            self.row["status"] = "fail"
            self.row["reason"] = f"{self.name}: {_short(e)}"
            return True
        return False


def _torch_losses(case, steps: int) -> list[float]:
    """torch.optim.Adam on the same module, data and labels (BatchNorm models in train mode: batch
    statistics, as train_step; the others in eval mode: dropout off, as the export)."""
    import torch
    import torch.nn.functional as F

    net = case.module
    has_bn = any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in net.modules())
    net.train(has_bn)
    opt = torch.optim.Adam(net.parameters(), lr=LR)
    xs = [torch.tensor(x) for x in case.inputs]
    out = []
    for _ in range(steps):
        opt.zero_grad()
        pred = net(*xs)
        if case.loss == "output":
            loss = pred
        else:
            loss = F.cross_entropy(pred.reshape(-1, pred.shape[-1]), torch.tensor(case.labels).reshape(-1))
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def _import(row, case, onnx_of: str | None, tmp: Path):
    import torch

    from tvm_swap.frontends import from_onnx, from_torch

    if onnx_of is None:
        row["import"] = "from_torch"
        return from_torch(copy.deepcopy(case.module), tuple(torch.tensor(x) for x in case.inputs))
    # torch's ONNX exporter merges initializers of equal value (LayerNorm weights that are all ones) into
    # one tensor: trained from the file, they would be one parameter. Distinct values keep them apart.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in case.module.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 1e-2)
    path = tmp / f"{row['model']}.onnx"
    names = [f"x{i}" for i in range(len(case.inputs))]
    torch.onnx.export(copy.deepcopy(case.module).eval(), tuple(torch.tensor(x) for x in case.inputs), str(path),
                      dynamo=False, input_names=names, training=torch.onnx.TrainingMode.PRESERVE)
    row["import"] = "torch.onnx.export -> from_onnx"
    row["onnx_path"] = str(path)
    return from_onnx(str(path))


def _inference(row, mod, params, case):
    import tvm_swap
    from swap_models import Unlimited, bitwise_equal, flat

    m = tvm_swap.build(mod, mem_limit=LIMIT, params=params, profile=False, **FAST)
    got = flat(m(*case.inputs))
    want = Unlimited(mod)(case.inputs, list(params.values()))
    st = m.stats()
    row["infer"] = {"bitwise": bitwise_equal(got, want), "peak": st["device_peak_bytes"],
                    "limit": st["mem_limit_bytes"], "no_swap": st["no_swap_bytes"], "swaps": st["swap_out_count"],
                    "torch_rel_err": float(f"{_vs_torch(case, got[0]):.2e}")}
    m.close()


def _vs_torch(case, got) -> float:
    """max |ours - torch| / max(1, max |torch|) of the first output, torch in eval mode (as exported)."""
    import torch

    with torch.no_grad():
        want = copy.deepcopy(case.module).eval()(*[torch.tensor(x) for x in case.inputs])
    want = np.asarray(want.detach().numpy() if hasattr(want, "detach") else want, dtype="float64")
    return float(np.abs(np.asarray(got, "float64") - want).max() / max(1.0, np.abs(want).max()))


def _training(row, mod, params, case, steps, profile=True):
    import tvm_swap
    from swap_models import Unlimited, bitwise_equal, flat
    from tvm_swap.testing import planner_min_limit
    from tvm_swap.training import train_step

    step, state = train_step(mod, params, loss=case.loss, optimizer="adam", lr=LR)
    inputs = list(case.inputs) + ([case.labels] if case.loss != "output" else [])
    m = tvm_swap.build(step, mem_limit=LIMIT, params=state, profile=profile, **FAST)
    info = m.compiled.info
    row["compile_s"] = {k: round(info[k], 2) for k in ("lower_s", "cost_s", "plan_s", "codegen_s")}
    func = step["main"]
    n_in = int(func.attrs["num_input"])
    updates = {int(o): int(p) - n_in for o, p in func.attrs["tvm_swap.updates"]}
    ref = Unlimited(step)
    values, losses, same = list(state.values()), [], True
    for _ in range(steps):
        want = ref(inputs, values)
        got = flat(m(*inputs))
        same = same and bitwise_equal(got, want)
        losses.append(float(got[0]))
        for o, slot in updates.items():
            values[slot] = want[o]
    st = m.stats()
    floor, _ = planner_min_limit(m.compiled.graph, "swapadvisor")
    row["train"] = {"bitwise": same, "losses": losses, "peak": st["device_peak_bytes"],
                    "limit": st["mem_limit_bytes"], "no_swap": st["no_swap_bytes"], "swaps": st["swap_out_count"],
                    "floor_share": round(floor / st["no_swap_bytes"], 4), "ops": m.compiled.graph.num_ops}
    m.close()


def _cli_train(row, path: str, tmp: Path):
    """`tvm-swap compile model.onnx --train` at 50% (a subprocess, as a user runs it)."""
    cmd = [sys.executable, "-m", "tvm_swap.cli", "compile", path, "--train", "--optimizer", "adam",
           "--mem-limit", LIMIT, "-o", str(tmp / "step.so")]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    last = (r.stderr.strip().splitlines() or [""])[-1]
    row["cli"] = {"rc": r.returncode, "wall_s": round(time.time() - t0, 1), "said": last[:200]}
    if r.returncode != 0:
        row["status"] = "fail"
        row.setdefault("reason", f"tvm-swap compile --train: {last[:200]}")


def run_row(name: str, steps: int = STEPS, profile: bool = True) -> dict:
    """One row of the matrix (never raises: a failure is the row's status and one-line reason). profile=False
    plans with roofline times instead of timing the kernels (quicker; the profile column is then ~0)."""
    import torch

    from tvm_swap.examples.real_models import CASES

    onnx_of, options = ONNX_ROWS.get(name, (None, {}))
    torch.manual_seed(0)
    case = CASES[onnx_of or name](**options)
    row = {"model": name, "family": "onnx" if onnx_of else case.family, "call": case.call, "loss": case.loss,
           "status": "ok"}
    t0 = time.process_time()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        with Stage(row, "import"):
            mod, params = _import(row, case, onnx_of, tmp)
        if row["status"] == "ok":
            with Stage(row, "inference"):
                _inference(row, mod, params, case)
        if row["status"] == "ok":
            with Stage(row, "training"):
                _training(row, mod, params, case, steps, profile)
        if row["status"] == "ok":
            with Stage(row, "torch"):
                row["train"]["torch_losses"] = _torch_losses(case, steps)
        if row["status"] == "ok" and onnx_of:
            _cli_train(row, row["onnx_path"], tmp)
        row.pop("onnx_path", None)
    _judge(row)
    row["row_cpu_s"] = round(time.process_time() - t0, 1)
    return row


def _judge(row: dict) -> None:
    """ok only when every claim holds: bitwise, under the limit, losses next to torch's."""
    if row["status"] != "ok":
        return
    bad = []
    for kind in ("infer", "train"):
        r = row[kind]
        if not r["bitwise"]:
            bad.append(f"{kind} differs from the unlimited build")
        if r["peak"] > r["limit"]:
            bad.append(f"{kind} peak over the limit")
    if row["infer"].get("torch_rel_err", 0.0) > 1e-3:
        bad.append(f"inference differs from torch by {row['infer']['torch_rel_err']:.1e}")
    t = row["train"]
    rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(t["losses"], t["torch_losses"]))
    t["loss_rel_err"] = float(f"{rel:.2e}")
    if rel > 1e-4:
        bad.append(f"losses differ from torch's by {rel:.1e}")
    if bad:
        row["status"], row["reason"] = "fail", "; ".join(bad)


# ---------------------------------------------------------------- table
def _kib(n) -> str:
    return f"{n / 1024:.0f}"


def render(rows: list[dict], commit: str, missing=()) -> str:
    head = ["model", "called as", "import", "inference @50% (vs torch)", "training @50% (2 Adam steps)",
            "last loss (ours / torch)",
            "peak / limit KiB", "floor / no-swap", "compile s: lower / profile / plan / build", "status"]
    lines = ["# Models tried", "",
             f"Generated by `python scripts/model_matrix.py` at commit {commit} (tiny random configs on CPU, llvm, "
             "a shared, loaded 2-core machine: the compile split is wall-clock seconds as tvm_swap.build reports "
             "it, so read its shares, not its seconds). Every row imports the model "
             "as its users call it, runs inference at 50% of the no-swap need and chained Adam training steps at "
             "50%, each compared bitwise with the unlimited build (TVM's own memory plan, same kernels); the loss "
             "is next to PyTorch's (same init, same data, torch.optim.Adam). *floor / no-swap*: the smallest limit "
             "the planner can meet for the training step, as a share of the no-swap need. JSON: "
             "`benchmarks/model_matrix.json`. Rows measured at commit(s) "
             f"{', '.join(sorted({str(r.get('commit')) for r in rows}))}.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        inf, tr = r.get("infer", {}), r.get("train", {})
        cs = r.get("compile_s", {})
        cells = [r["model"], f"`{r['call']}`", r.get("import", "")]
        cells.append(("bitwise" if inf.get("bitwise") else "DIFFERS") + f", {inf.get('swaps', 0)} swaps"
                     + (f" ({inf['torch_rel_err']:.0e})" if "torch_rel_err" in inf else "") if inf else "-")
        cells.append(("bitwise" if tr.get("bitwise") else "DIFFERS") + f", {tr.get('swaps', 0)} swaps" if tr else "-")
        cells.append(" / ".join(f"{a:.5f}" for a in (tr["losses"][-1], tr["torch_losses"][-1]))
                     + f" (rel {tr['loss_rel_err']:.0e})" if "loss_rel_err" in tr else "-")
        cells.append(f"{_kib(tr['peak'])} / {_kib(tr['limit'])}" if tr else "-")
        cells.append(f"{tr['floor_share']:.2f}" if tr else "-")
        cells.append(" / ".join(f"{cs[k]:.1f}" for k in ("lower_s", "cost_s", "plan_s", "codegen_s")) if cs else "-")
        status = "ok" if r["status"] == "ok" else f"**fail**: {r.get('reason', '')}"
        if r.get("cli"):
            status += f"; `tvm-swap compile --train`: rc {r['cli']['rc']}"
        cells.append(status)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if missing:
        lines += ["", f"Not measured in this run (refresh with `--models {','.join(missing)}`): "
                  f"{', '.join(missing)}."]
    lines += ["", _dominant(rows), ""]
    return "\n".join(lines)


def _dominant(rows) -> str:
    totals = {"lower_s": 0.0, "cost_s": 0.0, "plan_s": 0.0, "codegen_s": 0.0}
    for r in rows:
        for k in totals:
            totals[k] += r.get("compile_s", {}).get(k, 0.0)
    whole = sum(totals.values()) or 1.0
    names = {"lower_s": "lowering", "cost_s": "profiling kernels", "plan_s": "planning", "codegen_s": "building"}
    parts = ", ".join(f"{names[k]} {v / whole:.0%}" for k, v in sorted(totals.items(), key=lambda kv: -kv[1]))
    return (f"Compile time of the training builds, all rows together: {parts}. Profiling times every kernel "
            "alone on llvm (`profile=False` plans with roofline times instead); a profile time near 0 means the "
            "kernels' times came from tvm_swap's on-disk timing cache (an earlier run timed the same kernels).")


def run_isolated(name: str, steps: int) -> dict:
    """run_row in a child process, so a crash inside TVM (a signal, not an exception) is the row's reason
    instead of the end of the whole matrix."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "row.json"
        code = (f"import sys, json; sys.path.insert(0, {str(ROOT / 'scripts')!r}); import model_matrix as m; "
                f"open({str(out)!r}, 'w').write(json.dumps(m.run_row({name!r}, {steps})))")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        if r.returncode == 0 and out.is_file():
            return json.loads(out.read_text())
    said = [ln for ln in r.stderr.strip().splitlines() if ln.strip() and "Warning" not in ln and "return cls" not in ln]
    why = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
    return {"model": name, "family": "?", "call": "", "status": "fail",
            "reason": f"the process died ({why}): {said[-1][:200] if said else ''}"}


def main(argv=None):
    from tvm_swap.examples.real_models import CASES
    from tvm_swap.provenance import git_commit

    names = list(CASES) + list(ONNX_ROWS)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help=f"comma-separated rows (default all: {','.join(names)})")
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--json", default=str(JSON_PATH), help="the JSON to update (rows not run are kept)")
    ap.add_argument("--merge", default=None, metavar="A.json,B.json",
                    help="only merge these JSONs' rows into --json and render docs/MODELS.md")
    args = ap.parse_args(argv)
    chosen = names if not args.models else [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in names]
    if unknown:
        ap.error(f"unknown models {unknown}; choose from {names}")
    path = Path(args.json)
    old = json.loads(path.read_text()) if path.is_file() else {"rows": []}
    rows = {r["model"]: r for r in old["rows"]}
    commit = git_commit()
    if args.merge:
        for f in args.merge.split(","):
            rows.update({r["model"]: r for r in json.loads(Path(f).read_text())["rows"]})
        chosen = []
    for n in chosen:
        t0 = time.time()
        row = run_isolated(n, args.steps)
        row["commit"], row["row_wall_s"] = commit, round(time.time() - t0, 1)
        rows[n] = row
        print(f"{n:14s} {row['status']:5s} {row['row_wall_s']:7.1f} s  {row.get('reason', '')}", flush=True)
        _write(path, rows, names, commit)
    _write(path, rows, names, commit)
    print(DOC_PATH.read_text())


def _write(path: Path, rows: dict, names: list, commit: str) -> None:
    ordered = [rows[k] for k in names if k in rows]
    path.write_text(json.dumps({"commit": commit, "limit": LIMIT, "rows": ordered}, indent=1) + "\n")
    if path == JSON_PATH:
        DOC_PATH.write_text(render(ordered, commit, [k for k in names if k not in rows]))


if __name__ == "__main__":
    main()
