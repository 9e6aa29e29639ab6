"""Where a plan finds its graph again: what `tvm-swap plan` records and `tvm-swap report` reads.

    plan.search["graph_spec"] = graph_reference(spec)             # zoo:NAME kept, a file made absolute
    graph = graph_of_plan(plan, override=None)                    # from any folder; --graph overrides

A plan stores its graph's fingerprint; the reference says where the graph came from (a zoo name, or the
absolute path of a graph JSON or model file, with the --shape/--params it was read with), so `report` works
from any folder and refuses a graph that changed since (the fingerprint differs). When the graph cannot be
found or read, the error says to pass --graph, and how to make a graph file (`tvm-swap graph MODEL -o G.json`).
"""
from __future__ import annotations

from pathlib import Path

from ..errors import TvmSwapError


def graph_reference(spec: str, shapes: dict | None = None, params: str | None = None) -> dict:
    """{"graph_spec": zoo spec or absolute path, plus "graph_shapes"/"graph_params" when given}: plan.search keys."""
    ref: dict = {"graph_spec": spec}
    if not spec.startswith("zoo:") and Path(spec).exists():
        ref["graph_spec"] = str(Path(spec).resolve())
    if shapes:
        ref["graph_shapes"] = {k: list(v) for k, v in shapes.items()}
    if params:
        ref["graph_params"] = str(Path(params).resolve())
    return ref


def _default_spec(plan) -> str:
    from ..zoo import ZOO

    base = plan.graph_name.split("@")[0].lower()
    return f"zoo:{plan.graph_name}" if base in ZOO else plan.graph_name


def graph_of_plan(plan, override: str | None = None):
    """The DataflowGraph `plan` was made for: `override` (a --graph spec) or the plan's own reference."""
    from .sources import load_graph

    s = plan.search or {}
    spec = override or s.get("graph_spec") or _default_spec(plan)
    shapes = None if override else {k: tuple(v) for k, v in (s.get("graph_shapes") or {}).items()}
    params = None if override else s.get("graph_params")
    how = ("pass the plan's graph with --graph GRAPH (zoo:NAME, a graph JSON that `tvm-swap graph MODEL -o "
           "graph.json` writes, or the model file)")
    if not override and Path(spec).is_absolute() and not Path(spec).exists():
        raise TvmSwapError(f"the plan's graph {spec!r} is not there any more (moved or deleted?); {how}")
    try:
        graph = load_graph(spec, shapes=shapes or None, params=params)
    except TvmSwapError as e:
        if override:
            raise
        raise TvmSwapError(f"cannot read the plan's graph {spec!r} ({e}); {how}") from None
    if graph.fingerprint() != plan.graph_fingerprint:
        raise TvmSwapError(f"the plan was made for graph {plan.graph_name!r} (fingerprint {plan.graph_fingerprint}), "
                           f"but {spec!r} is graph {graph.name!r} (fingerprint {graph.fingerprint()})"
                           + ("" if override else " (changed since the plan was made?)") + f"; {how}")
    return graph


__all__ = ["graph_reference", "graph_of_plan"]
