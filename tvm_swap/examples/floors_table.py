"""The table tvm_swap.examples.floors reads: each bundled example lowered for each target the table covers,
and what the exact limit check refuses on that graph (imports TVM; `python scripts/example_floors.py` writes
it, tests/examples/test_example_floors.py compares it with a fresh one)."""
from __future__ import annotations

# the --target strings covered: llvm, and CUDA with an explicit arch (plain "cuda" takes the GPU's arch where
# one is present, so its lowered graph depends on the machine)
TARGETS = ("llvm", "cuda -arch=sm_80", "cuda -arch=sm_90")
POOLS = ("arena", "size-classes")


def lowered_graph(example: str, target: str):
    """The DataflowGraph compile_model lowers for the bundled example on `target` (no fusion cap)."""
    from relay_passes.cuda_build import resolve_target
    from relay_passes.lower import lower

    from ..graph.extract import graph_from_relax
    from . import EXAMPLES

    t = resolve_target(target)
    from ..pipeline import fold_frozen_layouts

    mod, _ = fold_frozen_layouts(EXAMPLES[example]().mod)     # as tvm_swap.build compiles it
    return graph_from_relax(lower(mod, t, fuse_max_depth=None, func_name="main"), "main",
                            target=str(t))


def graph_facts(graph) -> dict:
    """No-swap need and, per memory model, what the exact check refuses (planner.api.sure_refusal, with the
    reason check_feasible gives)."""
    from ..errors import InfeasibleLimitError
    from ..limits.floor_hint import hint_facts
    from ..limits.mem_limit import no_swap_bytes
    from ..planner.api import sure_refusal
    from .floors import ALIGNMENT

    pools = {}
    for pool in POOLS:
        try:
            below, floor, why = sure_refusal(graph, pool, ALIGNMENT)
        except InfeasibleLimitError:
            continue            # no floor found: left to the lowered path
        # the hint's words depend on the limit refused (tvm_swap.limits.floor_hint): its facts here, its words then
        hint = hint_facts(graph, ALIGNMENT, in_place=pool == "arena")
        pools[pool] = {"below": int(below), "floor": int(floor), "reason": why, "hint": hint}
    return {"graph": graph.fingerprint(), "no_swap_bytes": no_swap_bytes(graph, ALIGNMENT), "pools": pools}


def make_table(examples=None, targets=TARGETS, graphs: dict | None = None) -> dict:
    """The whole table; `graphs` collects the lowered graphs by (example, target) when given."""
    from ..limits.model_checks import largest_tensor, splittable_note
    from . import EXAMPLES
    from .floors import ALIGNMENT, versions

    doc = {**versions(), "alignment": ALIGNMENT, "examples": {}}
    for name in examples or sorted(EXAMPLES):
        mod = EXAMPLES[name]().mod
        need, what = largest_tensor(mod)
        entry = {"largest_tensor": [int(need), what, splittable_note(mod, what)], "targets": {}}
        for target in targets:
            g = lowered_graph(name, target)
            if graphs is not None:
                graphs[(name, target)] = g
            entry["targets"][target] = graph_facts(g)
        doc["examples"][name] = entry
    return doc


__all__ = ["TARGETS", "lowered_graph", "graph_facts", "make_table"]
