#!/usr/bin/env python
"""Seconds `tvm-swap ...` takes as a user runs it (`python -m tvm_swap.cli ...`, imports and all), this tree
beside an older one, median of N runs, the two trees' runs interleaved so both see the same machine load.
Wall seconds, and the process's own CPU seconds (user + system): on a shared machine wall time counts the
waits for a core, CPU time is close to what the command takes on an idle core.

    python -m bench startup-times --before /tmp/base [--repeat 3] [--out benchmarks/startup_times.json]

--before: a checkout of the commit to compare with (e.g. `git archive BASE | tar -x -C /tmp/base`). Each
command runs with an empty kernel/graph cache of its own. Prints a markdown table; writes JSON with the
commit measured (tvm_swap.provenance.git_commit) and the load average before and after.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parents[1]

from tvm_swap.testing import (write_conv_symbol, write_onnx_with_unconverted_ops,  # noqa: E402
                              write_onnx_without_its_data)


def _mx() -> Path:
    return ROOT / "tests" / "data" / "mxnet"


def _odd_symbol(tmp: Path) -> Path:
    """A symbol with two operators the MXNet importer lacks (as scripts/error_messages.py makes it)."""
    path = tmp / "odd-symbol.json"
    path.write_text(json.dumps({        # a model for the CLI to refuse: an input, not a result
        "nodes": [{"op": "null", "name": "data", "inputs": []},
                  {"op": "FancyOp", "name": "f1", "inputs": [[0, 0, 0]]},
                  {"op": "relu", "name": "r1", "inputs": [[1, 0, 0]]},
                  {"op": "OtherOp", "name": "o1", "inputs": [[2, 0, 0]]}],
        "arg_nodes": [0], "heads": [[3, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}}))
    return path


def cases(tmp: Path) -> list[tuple[str, list[str]]]:
    import numpy

    foreign = sorted(glob.glob(os.path.join(os.path.dirname(numpy.__file__), "**", "*.so"), recursive=True),
                     key=os.path.getsize)[0]
    r18 = str(_mx() / "resnet18_v1-symbol.json")
    out = ["-o", str(tmp / "never.so")]
    conv = write_conv_symbol(tmp / "conv-symbol.json")
    garbage = tmp / "garbage.onnx"
    garbage.write_bytes(b"not a protobuf")
    tf = tmp / "transformer_encoder-symbol.json"         # (a copy: no params file beside it)
    tf.write_text((_mx() / "transformer_encoder-symbol.json").read_text())
    tf = str(tf)
    lstm = str(_mx() / "lstm_lm-symbol.json")
    inception = str(ROOT / "tests" / "data" / "mxnet" / "inception_block-symbol.json")
    lost = write_onnx_without_its_data(tmp / "lost")
    odd_onnx = write_onnx_with_unconverted_ops(tmp / "odd.onnx")
    return [
        ("--help", ["--help"]),
        ("compile --help", ["compile", "--help"]),
        ("zoo", ["zoo"]),
        ("run: not a tvm_swap library", ["run", foreign]),
        ("compile: unknown operators", ["compile", str(_odd_symbol(tmp)), "--shape", "data=2,3", "--mem-limit", "60%",
                                        *out]),
        ("compile: missing params", ["compile", r18, "--shape", "data=1,3,224,224", "--mem-limit", "60%", *out]),
        ("compile: shape rank", ["compile", r18, "--shape", "data=1,3,224", "--init", "random", "--mem-limit", "60%",
                                 *out]),
        ("compile: malformed ONNX", ["compile", str(garbage), "--mem-limit", "60%", *out]),
        ("compile: missing params (1 conv)", ["compile", str(conv), "--shape", "data=1,3,8,8", "--mem-limit", "60%",
                                              *out]),
        ("compile: byte limit below a tensor", ["compile", r18, "--shape", "data=1,3,224,224", "--init", "random",
                                                "--mem-limit", "1MB", *out]),
        ("compile: missing params (transformer)", ["compile", tf, "--shape", "data=2,16,64", "--mem-limit", "60%",
                                                   *out]),
        ("compile: missing params (Inception block)", ["compile", inception, "--shape", "data=2,8,16,16",
                                                       "--mem-limit", "60%", *out]),
        ("compile: byte limit below a tensor (Inception block)", ["compile", inception, "--shape", "data=2,8,16,16",
                                                                  "--init", "random", "--mem-limit", "1KB", *out]),
        ("compile: missing params (LSTM LM)", ["compile", lstm, "--shape", "data=35,20", "--mem-limit", "60%", *out]),
        ("compile: LSTM data of the wrong rank", ["compile", lstm, "--shape", "data=35,20,2", "--init", "random",
                                                  "--mem-limit", "60%", *out]),
        ("compile: byte limit below a tensor (LSTM LM)", ["compile", lstm, "--shape", "data=35,20", "--init",
                                                          "random", "--mem-limit", "1MB", *out]),
        *([("compile: ONNX weights not beside it", ["compile", str(lost), "--mem-limit", "60%", *out])]
          if lost else []),
        *([("compile: ONNX operators TVM does not convert", ["compile", str(odd_onnx), "--mem-limit", "60%", *out])]
          if odd_onnx else []),
        ("compile cnn-train --mem-limit 2% (first)", ["compile", "cnn-train", "--mem-limit", "2%", *out]),
        ("compile cnn-train --target cuda --mem-limit 2% (first)",
         ["compile", "cnn-train", "--target", "cuda -arch=sm_90", "--mem-limit", "2%", *out]),
        ("compile cnn-train --mem-limit 10% (first)", ["compile", "cnn-train", "--mem-limit", "10%", *out]),
        ("compile mlp-train --mem-limit 10% (first)", ["compile", "mlp-train", "--mem-limit", "10%", *out]),
        ("plan cnn-train --mem-limit 2% (first)", ["plan", "cnn-train", "--mem-limit", "2%"]),
    ]




def once(tree: Path, argv: list[str], tmp: Path) -> tuple[float, float, int, str]:
    """(wall s, CPU s, exit code, last line of stderr) of one run."""
    env = {**os.environ, "PYTHONPATH": str(tree),
           "TVM_SWAP_CACHE_DIR": tempfile.mkdtemp(prefix="cache-", dir=tmp)}
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "tvm_swap.cli", *argv], capture_output=True, text=True, env=env,
                       timeout=900, cwd=tmp)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    last = (r.stderr.strip().splitlines() or [""])[-1]
    return wall, cpu, r.returncode, last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="a checkout of the commit to compare with")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="startup_times.json")
    args = ap.parse_args()
    from tvm_swap.provenance import git_commit

    before = Path(args.before).resolve()
    commit = git_commit(short=False)        # read now: the tree measured is the one at the start
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tvm_swap_startup_") as d:
        tmp = Path(d)
        for name, argv in cases(tmp):
            times = {"before": [], "after": []}
            cpus = {"before": [], "after": []}
            codes = {}
            for _ in range(args.repeat):
                for which, tree in (("before", before), ("after", ROOT)):
                    s, cpu, rc, last = once(tree, argv, tmp)
                    times[which].append(round(s, 3))
                    cpus[which].append(round(cpu, 3))
                    codes[which] = (rc, last[:160])
            row = {"command": name, "argv": argv, "before_s": times["before"], "after_s": times["after"],
                   "before_median_s": statistics.median(times["before"]),
                   "after_median_s": statistics.median(times["after"]),
                   "before_cpu_s": cpus["before"], "after_cpu_s": cpus["after"],
                   "before_median_cpu_s": statistics.median(cpus["before"]),
                   "after_median_cpu_s": statistics.median(cpus["after"]),
                   "before_exit": codes["before"], "after_exit": codes["after"]}
            rows.append(row)
            print(f"{name:<45} before {row['before_median_s']:6.2f} s ({row['before_median_cpu_s']:.2f} CPU)  "
                  f"after {row['after_median_s']:6.2f} s ({row['after_median_cpu_s']:.2f} CPU)  "
                  f"(exit {codes['before'][0]} / {codes['after'][0]})", flush=True)
    doc = {"commit": commit, "before": str(before), "repeat": args.repeat,
           "load_avg_start": load0, "load_avg_end": os.getloadavg(), "rows": rows}
    record.write(Path(args.out), doc)
    print(f"\n| `tvm-swap ...` | before s (median of {args.repeat}) | after s | before CPU s | after CPU s | "
          f"runs before | runs after | exit before / after |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['command']} | {r['before_median_s']:.2f} | {r['after_median_s']:.2f} | "
              f"{r['before_median_cpu_s']:.2f} | {r['after_median_cpu_s']:.2f} | "
              f"{', '.join(f'{x:.2f}' for x in r['before_s'])} | {', '.join(f'{x:.2f}' for x in r['after_s'])} | "
              f"{r['before_exit'][0]} / {r['after_exit'][0]} |")
    print(f"\nwrote {args.out} (commit {doc['commit'][:10]}, load average {load0[0]:.1f} -> {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
