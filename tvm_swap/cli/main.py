"""`tvm-swap`: plan, compile, run and picture swap plans from compilation scripts.

Exit codes: 0 success, 1 error (a message says what to do), 2 usage error, 130 interrupted by Ctrl-C
(`plan` then still writes the best verified plan found so far, if the search had one).
"""
from __future__ import annotations

import argparse
import json
import sys

from ..errors import InfeasibleLimitError, TvmSwapError
from .train_args import add_model_build_args


class _PlannerNames:
    """The planners' names for argparse's `choices`, read from the registry only when a --planner value is
    checked or a command's help lists them: parsing `--help`, `zoo` or `run` imports no planner (0.2 s)."""

    @staticmethod
    def _names() -> list[str]:
        from ..planner.registry import PlannerName

        return [str(n) for n in PlannerName]

    def __contains__(self, value) -> bool:
        return value in self._names()

    def __iter__(self):
        return iter(self._names())


EPILOG_PLAN = """examples:
  tvm-swap plan zoo:wresnet-152-10@batch=64 --mem-limit 16GB --budget-s 60
  tvm-swap plan zoo:bert-large --mem-limit 25% --planner odswap --json
  tvm-swap plan graph.json --mem-limit 512MiB -o plan.json --report out/
"""
EPILOG_COMPILE = """examples:
  tvm-swap compile mlp-train --target llvm --mem-limit 60% -o mlp.so
  tvm-swap compile model-symbol.json --shape data=1,3,224,224 --mem-limit 2GB -o model.so --json
  tvm-swap compile resnet18_v1-symbol.json --shape data=2,3,224,224 --init random --train
      --optimizer adam --lr 1e-3 --mem-limit 50% -o step.so    # a training step of an untrained architecture
  tvm-swap compile cnn-train --target "cuda -arch=sm_90" --mem-limit 50% -o m.so   # no GPU here: built, not run
"""
EPILOG_GRAPH = """examples:
  tvm-swap graph model-symbol.json --shape data=8,3,224,224 -o model.graph.json
  tvm-swap plan model.graph.json --mem-limit 4GB -o plan.json
"""
EPILOG_RUN = """examples:
  tvm-swap run mlp.so --compare-unlimited
  tvm-swap run model.so --input data=x.npy --bandwidth 12GB/s --json
  tvm-swap run model.so --trace run.trace.json --trace run.pickle   # Perfetto / PyTorch's memory_viz
"""


def _add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", action="append", metavar="NAME=D1,D2,...",
                   help="input shape for model files (repeatable), e.g. data=1,3,224,224")
    p.add_argument("--params", metavar="FILE", help="parameter file for model files (e.g. MXNet .params)")


def _add_planner_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mem-limit", required=True, metavar="LIMIT",
                   help="bytes (17179869184), with units (16GB, 512MiB) or a share of what the model needs without "
                        "swapping, TVM's own static plan (25%%; 100%% = no swapping)")
    p.add_argument("--device", default=None, metavar="NAME",
                   help="device spec for the cost model and the simulator (v100-16gb, h200, h100, cpu)")
    p.add_argument("--planner", default="swapadvisor", choices=_PlannerNames(), metavar="PLANNER",
                   help="one of %(choices)s")
    p.add_argument("--pool", default=None, choices=("arena", "size-classes"),
                   help="device memory model: one arena with a byte offset per stay (default for swapadvisor) or "
                        "the paper's size classes (the baselines' only model)")
    p.add_argument("--recompute", choices=("on", "off"), default=None,
                   help="swapadvisor / swapadvisor-nosearch with --pool arena: an evicted activation may be dropped "
                        "and recomputed instead of copied out and back (the search chooses per tensor). Default: on "
                        "for swapadvisor in the arena pool; off for swapadvisor-nosearch (it would recompute "
                        "everything it may) and with --pool size-classes (not implemented there)")
    p.add_argument("--budget-s", type=float, default=None, metavar="S",
                   help="search time budget in seconds (default: 60 for plan, as tvm_swap.plan; 10 for compile, "
                        "as tvm_swap.build)")
    p.add_argument("--generations", type=int, default=None, metavar="N",
                   help="stop after N generations (with --seed: reproducible plans)")
    p.add_argument("--seed", type=int, default=0, metavar="N")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="processes for the search (default: all cores)")
    p.add_argument("--executor", choices=["processes", "ray"], default="processes",
                   help="where the search evaluates candidates: local processes or Ray actors (same plan either way)")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="Ray cluster to use with --executor ray (e.g. auto or ray://host:10001; default: a local Ray)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="tvm-swap",
        description="Run and train models beyond the GPU memory limit: SwapAdvisor swap planning on TVM Relax.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `tvm-swap COMMAND --help` for each command's options and examples.",
    )
    ap.add_argument("--quiet", "-q", action="store_true", help="no progress bars or chatter (for scripts)")
    ap.add_argument("--verbose", action="store_true", help="let TVM's own log lines through (hidden by default)")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    _orig_add = sub.add_parser

    def add_parser(name, **kw):  # every subcommand also takes --quiet after its name
        sp = _orig_add(name, **kw)
        sp.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS,
                        help="no progress bars or chatter (for scripts)")
        return sp

    sub.add_parser = add_parser

    p = sub.add_parser("plan", help="plan swaps for a graph under a memory limit",
                       epilog=EPILOG_PLAN, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("graph", metavar="GRAPH", help="zoo:NAME[@batch=B], a graph JSON file, an example, or a model file")
    _add_planner_args(p)
    p.set_defaults(budget_s=60.0)      # tvm_swap.plan's
    _add_model_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-o", "--output", metavar="PLAN.json", help="write the verified plan here")
    p.add_argument("--report", metavar="DIR", help="also write pictures of the plan (PNG, SVG, HTML) and where its "
                                                   "link bytes go (NAME-breakdown.txt/.json, also printed) here")
    p.add_argument("--host-ops", choices=("optimizer", "auto"), default=None,
                   help="run the optimizer's update kernels on the host (the device's host spec): all of them, or "
                        "where the search places them (auto); the planner plans the rest (devices with a host: h100, "
                        "h200, cpu)")

    p = sub.add_parser("compile", help="compile a model into a library that runs under the limit",
                       epilog=EPILOG_COMPILE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", help="a bundled example (mlp, cnn, mlp-train, cnn-train), "
                   "a Relax module file (.py defining `mod`/`params`), MXNet -symbol.json, .onnx, module:factory")
    p.add_argument("--target", default="llvm", help="llvm or cuda (cuda -arch=sm_90 etc.)")
    _add_planner_args(p)
    _add_model_args(p)
    p.set_defaults(budget_s=10.0)      # the API's (tvm_swap.build): the same model compiles the same way
    p.add_argument("--fuse-max-depth", type=int, default=None, metavar="N", help="limit operator fusion depth")
    p.add_argument("--micro-batches", type=int, default=None, metavar="K",
                   help="inference: run the batch in K equal slices (relay_passes.micro_batch), so each op holds 1/K "
                        "of its activations; a percentage limit stays a share of the unsplit model's no-swap need, "
                        "and --compare-unlimited compares against the unsplit build")
    p.add_argument("--split-dense", action="store_true",
                   help="below the floor a dense layer's weight sets, run that layer in K slices of its output "
                        "features (the weight cut at compile time, K as small as fits the limit; a training step's "
                        "trainable weights in K row chunks through forward, gradients and update, and regions of "
                        "its per-sample ops (pools, ReLU, their gradients; never a parameter gradient or batch "
                        "statistics) in K slices of the batch, and a 2-D input read by dense layers in batch "
                        "slices, the weight gradient summed slice after slice); results bitwise equal, the params "
                        "file still holds the whole weights and `run` takes the whole input")
    p.add_argument("--split-k", default=None, metavar="fewest|auto",
                   help="with --split-dense: K as the fewest chunks that fit (fewest), or the fastest plan of 1x, 2x "
                        "and 4x that many, each planned on a share of the budget (auto, the default); the output "
                        "says which K was chosen and each one's predicted time")
    p.add_argument("--host-ops", choices=("optimizer", "auto"), default=None,
                   help="run the optimizer's update kernels on the host (all, or where the search places them): "
                        "the library runs them as llvm kernels on host memory, their inputs copied out and the "
                        "updated weights copied back in as the plan says")
    p.add_argument("--split-ops", action="store_true",
                   help="inference: below the floor an op's activations set, run a region of ops around it in K "
                        "slices of the batch, channels or rows (relay_passes.split_region, K as small as fits the "
                        "limit), with --split-dense's dense splits too; results bitwise equal (a training step's "
                        "regions come with --split-dense: along the batch only)")
    p.add_argument("--refresh-timings", action="store_true",
                   help="time every kernel and build the unlimited reference again instead of reusing the disk "
                        "cache ($TVM_SWAP_CACHE_DIR, else $XDG_CACHE_HOME/tvm_swap) from an earlier compile")
    add_model_build_args(p)
    p.add_argument("-o", "--output", required=True, metavar="MODEL.so")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("run", help="run a compiled model and report memory, swaps and time",
                       epilog=EPILOG_RUN, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("library", metavar="MODEL.so")
    p.add_argument("--input", action="append", metavar="NAME=file.npy", help="an input (repeatable); "
                   "missing inputs get the deterministic example inputs stored with the model")
    p.add_argument("--compare-unlimited", action="store_true",
                   help="also run the model built without a limit and check every output is bitwise equal")
    p.add_argument("--bandwidth", default=None, metavar="BW", help="throttle the emulated link, e.g. 12GB/s")
    p.add_argument("--repeat", type=int, default=3, metavar="N", help="timed calls (median reported)")
    p.add_argument("--trace", action="append", metavar="FILE", help="write the last call's measured timeline "
                   "(repeatable): RUN.trace.json (Chrome trace events, for Perfetto) or RUN.pickle (PyTorch memory "
                   "snapshot), the formats of `tvm-swap report PLAN -o ...`")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("graph", help="write the dataflow graph `plan` reads (ops, tensors, sizes) as JSON",
                       epilog=EPILOG_GRAPH, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", metavar="MODEL", help="zoo:NAME[@batch=B], a bundled example, or a model file "
                   "(MXNet -symbol.json, .onnx, a .py defining `mod`, module:factory)")
    _add_model_args(p)
    p.add_argument("--target", default="llvm", help="the target the graph is lowered for (its kernels)")
    p.add_argument("--fuse-max-depth", type=int, default=None, metavar="N", help="limit operator fusion depth")
    p.add_argument("-o", "--output", required=True, metavar="GRAPH.json", help="where to write it (.json or .json.gz)")

    p = sub.add_parser("report", help="draw a plan: memory timeline, stream Gantt, search convergence; or export "
                       "it for Perfetto (.trace.json) or PyTorch's memory visualiser (.pickle)")
    p.add_argument("plan", metavar="PLAN.json")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help=".png, .svg or .html (pictures); .trace.json (Chrome trace events: Perfetto, "
                        "chrome://tracing) or .pickle (PyTorch memory snapshot: pytorch.org/memory_viz)")
    p.add_argument("--graph", metavar="GRAPH", help="the plan's graph (default: the one the plan was made from, "
                   "found by its absolute path or zoo name)")

    p = sub.add_parser("demo", help="compile and run a bundled training step under a limit (the quick start)")
    p.add_argument("--model", default="cnn-train", help="bundled example (mlp, cnn, mlp-train, cnn-train)")
    p.add_argument("--mem-limit", default="50%", metavar="LIMIT")
    p.add_argument("--budget-s", type=float, default=5.0, metavar="S")
    p.add_argument("--bandwidth", default=None, metavar="BW", help="throttle the emulated link, e.g. 2GB/s")

    sub.add_parser("zoo", help="list the bundled workloads of the paper")
    sub.add_parser("devices", help="list the device specs")
    return ap


def main(argv: list[str] | None = None) -> int:
    """The program (argv None: sys.argv) or one command from Python (main([...]))."""
    ap = build_parser()
    args = ap.parse_args(argv)  # exits 2 on usage errors
    if args.command is None:
        ap.print_help()
        return 2
    if argv is None:
        from .startup import command_needs_torch, tvm_without_torch

        if not command_needs_torch(args):
            tvm_without_torch()          # TVM, if the command imports it, without PyTorch (seconds less)
    try:
        from . import commands
        from ..tvm_logs import tvm_logs_filtered

        with tvm_logs_filtered(verbose=args.verbose):
            return getattr(commands, "cmd_" + args.command)(args)
    except InfeasibleLimitError as e:
        from ..limits.mem_limit import percent_at_least

        ref = getattr(e, "reference_bytes", None)     # the no-swap need that percentages are of
        _fail(args, str(e), {"error": "infeasible_limit", "mem_limit_bytes": e.mem_limit,
                             "min_feasible_bytes": e.min_feasible, "min_feasible_is_exact": e.exact,
                             **({"no_swap_bytes": ref, "min_feasible_percent": percent_at_least(e.min_feasible, ref)}
                                if ref else {}),
                             **({"min_feasible_percent": e.min_feasible_percent}     # a lower bound (not exact)
                                if not ref and getattr(e, "min_feasible_percent", None) else {})})
        return 1
    except TvmSwapError as e:
        _fail(args, str(e), {"error": type(e).__name__})
        return 1
    except ValueError as e:  # unit parsing and friends: the message says what to write
        _fail(args, str(e), {"error": "ValueError"})
        return 1
    except KeyboardInterrupt:
        print("tvm-swap: interrupted before a verified plan existed; nothing was written", file=sys.stderr)
        return 130


def _fail(args, message: str, payload: dict) -> None:
    from .wording import cli_message

    message = cli_message(message)     # the API's messages name Python arguments; say the flags
    if getattr(args, "json", False):
        print(json.dumps({**payload, "message": message}))
    print(f"tvm-swap: error: {message}", file=sys.stderr)


__all__ = ["main", "build_parser"]

if __name__ == "__main__":
    sys.exit(main())
