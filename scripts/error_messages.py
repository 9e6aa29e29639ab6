#!/usr/bin/env python
"""Each early error of `tvm-swap` triggered from the command line: its message and how long it took.

    python scripts/error_messages.py [--out benchmarks/error_messages.json] [--md benchmarks/error_messages.md]

Every case runs `tvm_swap.cli.main([...])` in a fresh process in which TVM and the MXNet importer's converters
were imported first and `relay_passes.lower.lower` raises: `command s` is the command alone (what a user
waits for beyond starting Python), `process s` that whole process with its imports, `tvm-swap ... s` the
command run as a user runs it (`python -m tvm_swap.cli ...`: only what it needs imported; its CPU seconds, user +
system, are close to what it takes on an idle core, its wall seconds count the waits on a shared one), and
`before lowering`
says the refusal came without lowering anything (the percentage's first compile runs untrapped: it lowers).
Issue 16 asks each within 1 s. Percentages below the floor of a bundled example, against one empty cache folder:
2% and 10% are refused on the first compile from the table of the examples' floors (tvm_swap.examples.floors:
the exact check's own message, before TVM is imported), for llvm and CUDA with an explicit arch (built without a
GPU here); `again` runs the 10% case a second time.

Setup (not timed): a bundled MLP compiled once (for the damaged-library cases), a symbol with two operators
the importer lacks, and numpy's smallest extension module as a shared library that is not ours.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HARNESS = ("import sys, time; import tvm; from tvm_swap.frontends import mxnet as M; M.converters()\n"
           "import relay_passes.lower; L = sys.modules['relay_passes.lower']\n"
           "if {trap}:\n"
           "    def _no(*a, **k): raise SystemExit('LOWERED')\n"
           "    L.lower = _no\n"
           "from tvm_swap.cli import main\n"
           "t0 = time.perf_counter(); rc = main({args!r})\n"
           "sys.stderr.write('\\nELAPSED %.4f\\n' % (time.perf_counter() - t0)); sys.exit(rc)\n")


def fixtures() -> Path:
    return ROOT / "tests" / "data" / "mxnet"


def plain_seconds(args: list[str], env: dict) -> tuple[float, float]:
    """(wall s, CPU s) of `python -m tvm_swap.cli ARGS` as a user runs it: imports and all. CPU seconds (user +
    system) are close to what it takes on an idle core; wall seconds on a shared machine count the waits too."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tvm_swap.cli", *args], capture_output=True, env=env, timeout=900)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(wall, 3), round((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), 3)


def run_case(args: list[str], env: dict, trap: bool = True) -> dict:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", HARNESS.format(args=args, trap=trap)], capture_output=True, text=True,
                       env=env, timeout=900)
    wall = time.perf_counter() - t0
    lowered = "LOWERED" in r.stderr or not trap          # (untrapped: this case is expected to lower)
    elapsed = float(r.stderr.rsplit("ELAPSED", 1)[1].split()[0]) if "ELAPSED" in r.stderr else None
    msg = [ln[len("tvm-swap: error: "):] for ln in r.stderr.splitlines() if ln.startswith("tvm-swap: error: ")]
    return {"args": args, "returncode": r.returncode, "command_s": elapsed, "process_s": round(wall, 3),
            "before_lowering": not lowered, "message": msg[0] if msg else r.stderr.strip()[-400:]}


def setup(d: Path, env: dict) -> dict:
    odd = d / "odd-symbol.json"
    odd.write_text(json.dumps({
        "nodes": [{"op": "null", "name": "data", "inputs": []},
                  {"op": "FancyOp", "name": "f1", "inputs": [[0, 0, 0]]},
                  {"op": "relu", "name": "r1", "inputs": [[1, 0, 0]]},
                  {"op": "OtherOp", "name": "o1", "inputs": [[2, 0, 0]]}],
        "arg_nodes": [0], "heads": [[3, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}}))
    import numpy

    foreign = sorted(glob.glob(os.path.join(os.path.dirname(numpy.__file__), "**", "*.so"), recursive=True),
                     key=os.path.getsize)[0]
    lib = d / "mlp.so"
    r = subprocess.run([sys.executable, "-m", "tvm_swap.cli", "compile", "mlp", "--mem-limit", "60%",
                        "--generations", "1", "--workers", "1", "-o", str(lib), "-q"], capture_output=True, text=True,
                       env=env, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"compiling the MLP failed:\n{r.stderr[-2000:]}")
    data = lib.read_bytes()
    cut = d / "mlp-cut.so"                         # a copy cut short, beside its check file
    cut.write_bytes(data[: len(data) // 2])
    (d / "mlp-cut.so.check.json").write_text((d / "mlp.so.check.json").read_text())
    bare = d / "mlp-cut-alone.so"                  # the same without the check file: the ELF extents catch it
    bare.write_bytes(data[: len(data) // 2])
    garbage = d / "garbage.onnx"
    garbage.write_bytes(b"not a protobuf")
    from tvm_swap.testing import write_onnx_with_unconverted_ops, write_onnx_without_its_data

    lost = write_onnx_without_its_data(d / "lost")
    odd_onnx = write_onnx_with_unconverted_ops(d / "odd.onnx")
    tf = d / "transformer_encoder-symbol.json"     # (a copy: no params file beside it)
    tf.write_text((fixtures() / "transformer_encoder-symbol.json").read_text())
    return {"odd": str(odd), "foreign": str(foreign), "cut": str(cut), "bare": str(bare), "onnx": str(garbage),
            "lost": str(lost) if lost else None, "transformer": str(tf), "odd_onnx": str(odd_onnx) if odd_onnx else None}


def cases(mx: Path, f: dict, d: Path) -> list[tuple[str, list[str], bool]]:
    r18 = str(mx / "resnet18_v1-symbol.json")
    out = ["-o", str(d / "x.so")]
    return [
        ("missing params", ["compile", r18, "--shape", "data=1,3,224,224", "--mem-limit", "60%", *out], True),
        ("shape that does not fit (rank)", ["compile", r18, "--shape", "data=1,3,224", "--init", "random",
                                            "--mem-limit", "60%", *out], True),
        ("shape for an input the model lacks", ["compile", r18, "--shape", "image=1,3,224,224", "--init", "random",
                                                "--mem-limit", "60%", *out], True),
        ("unknown operators", ["compile", f["odd"], "--shape", "data=2,3", "--mem-limit", "60%", *out], True),
        ("not a model (ONNX)", ["compile", f["onnx"], "--mem-limit", "60%", *out], True),
        *([("ONNX weights not beside it", ["compile", f["lost"], "--mem-limit", "60%", *out], True)]
          if f["lost"] else []),
        *([("ONNX operators TVM does not convert", ["compile", f["odd_onnx"], "--mem-limit", "60%", *out], True)]
          if f["odd_onnx"] else []),
        ("missing params (Inception block)", ["compile", str(mx / "inception_block-symbol.json"),
                                              "--shape", "data=2,8,16,16", "--mem-limit", "60%", *out], True),
        ("missing params (transformer)", ["compile", f["transformer"], "--shape", "data=2,16,64", "--mem-limit",
                                          "60%", *out], True),
        ("missing params (LSTM LM)", ["compile", str(mx / "lstm_lm-symbol.json"), "--shape", "data=35,20",
                                      "--mem-limit", "60%", *out], True),
        ("LSTM data of the wrong rank", ["compile", str(mx / "lstm_lm-symbol.json"), "--shape", "data=35,20,2",
                                         "--init", "random", "--mem-limit", "60%", *out], True),
        ("limit below the largest tensor (bytes), LSTM LM", ["compile", str(mx / "lstm_lm-symbol.json"), "--shape",
                                                             "data=35,20", "--init", "random", "--mem-limit", "1MB",
                                                             *out], True),
        ("limit below the largest tensor (bytes)", ["compile", r18, "--shape", "data=1,3,224,224", "--init", "random",
                                                    "--mem-limit", "1MB", *out], True),
        ("limit below the floor (2%), first compile", ["compile", "cnn-train", "--mem-limit", "2%", *out], True),
        ("limit below the floor (2%), first compile, CUDA", ["compile", "cnn-train", "--target", "cuda -arch=sm_90",
                                                            "--mem-limit", "2%", *out], True),
        ("limit below the floor (10%), first compile", ["compile", "cnn-train", "--mem-limit", "10%", *out], True),
        ("limit below the floor (10%), again", ["compile", "cnn-train", "--mem-limit", "10%", *out], True),
        ("limit below the floor (2%), plan", ["plan", "cnn-train", "--mem-limit", "2%"], True),
        ("not a tvm_swap library", ["run", f["foreign"]], True),
        ("truncated library (with its check file)", ["run", f["cut"]], True),
        ("truncated library (alone)", ["run", f["bare"]], True),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="error_messages.json")
    ap.add_argument("--md", default=None, help="also write the table as markdown here")
    args = ap.parse_args()
    from tvm_swap.provenance import git_commit

    commit = git_commit(short=False)        # read now: the tree measured is the one at the start
    mx = fixtures()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tvm_swap_errors_") as tmp:
        d = Path(tmp)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TVM_SWAP_CACHE_DIR": str(d / "cache")}
        f = setup(d, env)
        for name, argv, trap in cases(mx, f, d):
            r = run_case(argv, env, trap)
            if r["returncode"] != 1:
                raise SystemExit(f"{name}: expected exit code 1, got {r['returncode']}: {r['message']}")
            r["plain_s"], r["plain_cpu_s"] = plain_seconds(argv, {**env, "TVM_SWAP_CACHE_DIR": str(d / "cache-plain")})
            rows.append({"case": name, **r})
            print(f"{name:<45} {r['command_s']:>7.3f} s  {r['process_s']:>6.1f} s  {r['plain_s']:>6.1f} s  "
                  f"{r['plain_cpu_s']:>5.2f} CPU s  "
                  f"{'yes' if r['before_lowering'] else 'NO':<4} {r['message'][:90]}", flush=True)
    doc = {"commit": commit, "load_avg": os.getloadavg(), "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    lines = ["| error | command s | process s | `tvm-swap ...` s | `tvm-swap ...` CPU s | before lowering | message |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        msg = (r["message"].replace(str(d), "$TMP").replace(str(mx), "fixtures/mxnet").replace(f"{ROOT}/", "")
               .replace("|", "\\|"))
        msg = msg.replace(os.path.dirname(os.path.dirname(f["foreign"])), "$NUMPY")
        lines.append(f"| {r['case']} | {r['command_s']:.3f} | {r['process_s']:.1f} | {r['plain_s']:.1f} | "
                     f"{r['plain_cpu_s']:.2f} | {'yes' if r['before_lowering'] else 'no'} | {msg} |")
    table = "\n".join(lines)
    print(table)
    if args.md:
        Path(args.md).write_text(table + "\n")
    print(f"wrote {args.out} (commit {commit[:10]}, load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
