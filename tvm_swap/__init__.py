"""tvm_swap: run and train models beyond the GPU memory limit by planned swapping (SwapAdvisor on TVM Relax).

    import tvm_swap
    m = tvm_swap.build(mod, target="cuda", mem_limit="8GB", params=params)
    m.export_library("model.so"); m2 = tvm_swap.load("model.so")

Heavy parts (TVM) are imported lazily so the planner stays usable without them.
"""
from .errors import InfeasibleLimitError, PlanError, TvmSwapError, VerificationError
from .graph import DataflowGraph
from .plan import Plan

__version__ = "0.1.0"
__all__ = ["build", "load", "plan", "DataflowGraph", "Plan", "TvmSwapError", "InfeasibleLimitError",
           "PlanError", "VerificationError"]


def plan(graph, mem_limit, budget_s: float = 60.0, progress: bool | None = None, **kw):
    """Plan a DataflowGraph under `mem_limit` (bytes, '16GB' or '25%'); returns a verified Plan.

    budget_s: seconds the search may take (default 60; `generations=N` instead stops after N generations).
    progress: show the search's progress on stderr; None (the default) shows it when stderr is a terminal.
    Other keywords (device, planner, seed, pool, workers, ...) go to tvm_swap.planner.plan_graph."""
    import sys

    from .planner import plan_graph

    if progress is None:
        progress = sys.stderr.isatty()
    return plan_graph(graph, mem_limit=mem_limit, budget_s=budget_s, progress=progress, **kw)


def build(mod, target="llvm", mem_limit=None, params=None, **kw):
    """Lower, plan, verify, apply and build a Relax module; returns a SwapModule.

    Every keyword (device, planner, budget_s, seed, generations, pool, recompute, graph_cache, ...) is
    documented in tvm_swap.pipeline.build."""
    from .pipeline import build as _build

    return _build(mod, target=target, mem_limit=mem_limit, params=params, **kw)


def load(path, params=None, bandwidth=None, debug_poison=False):
    """Load a module exported by SwapModule.export_library (params default to the saved ones).

    Loading a library runs its code, as loading any shared library does: load only libraries you trust.
    The checks before the first call (runtime_ext.swap_module.load) guard against damage, not attacks."""
    from pathlib import Path

    from runtime_ext.library_check import check_before_load

    checked = Path(path).exists()
    if checked:                  # a damaged file is refused before TVM is imported (which takes seconds)
        check_before_load(str(path))
    from runtime_ext.swap_module import load as _load

    return _load(path, params=params, bandwidth=bandwidth, debug_poison=debug_poison, _checked=checked)
