"""What a percentage memory limit is a share of, and the numbers every report gives beside a limit.

"100%" means no swapping: a percentage is of what the model uses without tvm_swap, i.e. the device bytes
of TVM's own static memory plan on the default schedule (planner.baselines.noswap.noswap_need: its storage
tokens plus the largest kernel workspace, the pool the unlimited build runs with), not the idealised liveness
peak (planner.bounds.noswap_peak), which no pool meets: TVM's plan reserves 1.16x that peak for a ResNet-50
training step and 1.63x for SqueezeNet (issue 16). So `--planner noswap --mem-limit 100%` is accepted by
construction and "50%" is half of what the model uses today.

No TVM here (the planner imports this module).
"""
from __future__ import annotations

from .errors import TvmSwapError
from .plan import DEFAULT_ALIGNMENT
from .units import parse_limit, percent_at_least  # noqa: F401  (percent_at_least: re-exported)


def no_swap_bytes(graph, alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Device bytes the model needs without tvm_swap (TVM's static plan): what "100%" means."""
    from .planner.baselines.noswap import noswap_need

    return int(noswap_need(graph, alignment))


def liveness_peak_bytes(graph, alignment: int = DEFAULT_ALIGNMENT) -> int:
    """The idealised peak: every tensor exactly from its producer to its last reader, nothing fragmented."""
    from .planner.bounds import noswap_peak

    return int(noswap_peak(graph, alignment=alignment))


def resolve_limit(graph, mem_limit, alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Bytes from an int, '16GB' / '512MiB', or a percentage of no_swap_bytes ('25%')."""
    ref = None
    if isinstance(mem_limit, str) and mem_limit.strip().endswith("%"):
        ref = no_swap_bytes(graph, alignment)
    try:
        limit = parse_limit(mem_limit, ref)
    except (TypeError, ValueError) as e:
        raise TvmSwapError(f"bad memory limit: {e}") from None
    if limit <= 0:
        raise TvmSwapError(f"memory limit must be positive, got {mem_limit!r}")
    return int(limit)


def limit_facts(graph, limit: int, alignment: int = DEFAULT_ALIGNMENT) -> dict:
    """The limit beside its two references, for the JSON of plan, compile and run."""
    ref, peak = no_swap_bytes(graph, alignment), liveness_peak_bytes(graph, alignment)
    return {"no_swap_bytes": ref, "liveness_peak_bytes": peak,
            "limit_vs_no_swap": round(limit / ref, 4) if ref else None,
            "limit_vs_liveness_peak": round(limit / peak, 4) if peak else None}


def floor_op(graph, alignment: int = DEFAULT_ALIGNMENT) -> tuple[str, int, int]:
    """(name, aligned bytes of its inputs and outputs together, largest kernel workspace in the graph) of the
    op that needs the most memory at once: what sets the floor no plan can go below."""
    from .plan import aligned_bytes

    best, name = -1, ""
    for op in graph.ops:
        need = sum(aligned_bytes(graph.tensors[t].nbytes, alignment) for t in set(op.inputs) | set(op.outputs))
        if need > best:
            best, name = need, op.name
    workspace = max((op.workspace for op in graph.ops), default=0)
    return name, max(best, 0), int(workspace)


def floor_hint(graph, pool: str, alignment: int = DEFAULT_ALIGNMENT) -> str:
    """One clause for a refusal: which op sets the floor and the knobs that lower it (Python argument names;
    the command line rewords them into its flags)."""
    from .units import format_bytes

    name, need, workspace = floor_op(graph, alignment)
    knobs = ("fuse_max_depth=2 (or 1: smaller fused kernels hold fewer tensors at once), a smaller batch (for "
             "inference: micro_batches=K runs it in K slices)")
    if pool != "arena":
        knobs += ", or pool='arena'"
    ws = f" plus {format_bytes(workspace)} of kernel workspace" if workspace else ""
    return f"op {name!r} needs {format_bytes(need)} for its inputs and outputs at once{ws}; lower that with {knobs}"


