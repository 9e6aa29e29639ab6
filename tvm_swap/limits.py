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


def percent_of_no_swap(graph, nbytes: int, alignment: int = DEFAULT_ALIGNMENT) -> float | None:
    ref = no_swap_bytes(graph, alignment)
    return round(100.0 * nbytes / ref, 2) if ref else None


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


LAYOUT_KERNELS = ("transpose", "reshape", "layout_transform", "expand_dims", "squeeze")


def _op_parts(graph, op, alignment: int) -> tuple[list, int, int]:
    """(the op's parameter tensors, their aligned bytes, aligned bytes of its other inputs and outputs)."""
    from .graph.dataflow import PERSISTENT_KINDS
    from .plan import aligned_bytes

    ts = [graph.tensors[t] for t in sorted(set(op.inputs) | set(op.outputs))]
    weights = [t for t in ts if t.kind in PERSISTENT_KINDS]
    wbytes = sum(aligned_bytes(t.nbytes, alignment) for t in weights)
    rest = sum(aligned_bytes(t.nbytes, alignment) for t in ts if t.kind not in PERSISTENT_KINDS)
    return weights, wbytes, rest


def _is_layout_copy(graph, op) -> bool:
    """A kernel that only copies one parameter into another layout (a transpose TVM made its own kernel)."""
    from .graph.dataflow import PERSISTENT_KINDS

    base = op.kernel.rstrip("0123456789_")
    return (base in LAYOUT_KERNELS and len(op.inputs) == 1
            and graph.tensors[op.inputs[0]].kind in PERSISTENT_KINDS)


def _slices_to_fit(split: int, fixed: int, room: int | None) -> int | None:
    """The smallest K >= 2 with fixed + split / K <= room (None: no K does, or no room given)."""
    if room is None or split <= 0 or fixed >= room:
        return None
    k = max(2, -(-split // (room - fixed)))
    return k if k <= split else None


def _batch(graph) -> int:
    """The batch size: the leading dimension of the model's inputs (1 when it has none)."""
    dims = [t.shape[0] for t in graph.tensors if t.kind == "input" and t.shape]
    return min(dims) if dims else 1


def floor_hint(graph, pool: str, alignment: int = DEFAULT_ALIGNMENT, limit: int | None = None) -> str:
    """One clause for a refusal: which op sets the floor and what would move that op's floor (Python argument
    names; the command line rewords them into its flags). Only advice that lowers that op's own need: a
    parameter's layout copy is named as such (the weight could not be folded into its compute layout at
    compile time: it is trained, or read by something other than a matmul); a smaller batch or micro-batches
    only where activations are part of the op's need, with the factor that fits `limit` when given; a smaller
    fusion depth only for a fused kernel; the arena for size classes."""
    from .plan import aligned_bytes
    from .units import format_bytes

    name, need, workspace = floor_op(graph, alignment)
    ws = f" plus {format_bytes(workspace)} of kernel workspace" if workspace else ""
    head = f"op {name!r} needs {format_bytes(need)} for its inputs and outputs at once{ws}"
    op = next((o for o in graph.ops if o.name == name), None)
    if op is None:
        return head
    weights, wbytes, rest = _op_parts(graph, op, alignment)
    room = None if limit is None else int(limit) - int(workspace)
    pool_knob = ["pool='arena'"] if pool != "arena" else []
    if _is_layout_copy(graph, op):
        w = graph.tensors[op.inputs[0]]
        why = ("it is updated by training (train_step(..., frozen=[...]) folds a frozen one)"
               if w.id in set(graph.updates.values()) else "not a layout change tvm_swap folds, nor read by a matmul "
               "that reads it in place")
        more = f"; otherwise {', or '.join(pool_knob)}" if pool_knob else ""
        return (f"{head}: it copies parameter {w.name!r} ({format_bytes(w.nbytes)}) into another layout, a weight "
                f"layout that could not be folded at compile time ({why}); no batch size or fusion setting lowers "
                f"that{more}")
    knobs = []
    biggest = max(weights, key=lambda t: t.nbytes) if weights else None
    params_too_big = bool(wbytes) and room is not None and wbytes >= room
    batch = _batch(graph)
    if rest and not params_too_big and batch > 1:
        k = _slices_to_fit(rest, wbytes, room)
        k = k if k is not None and k <= batch else None
        if graph.updates:
            knobs.append(f"a batch {k} times smaller" if k else "a smaller batch")
        else:
            knobs.append(f"micro_batches={k} (its activations in {k} slices of the batch)" if k else
                         "a smaller batch (micro_batches=K runs it in K slices)")
    others = len((set(op.inputs) | set(op.outputs)) - {t.id for t in weights})
    # fewer ops per kernel helps only a kernel holding more than one input and output besides its weights
    if (op.kernel.startswith("fused_") and others >= 3
            and not (biggest is not None and room is not None and biggest.nbytes >= room)):
        knobs.append("fuse_max_depth=2 (or 1: smaller fused kernels hold fewer tensors at once)")
    knobs += pool_knob
    fact = ""
    if params_too_big:
        outs = sum(aligned_bytes(graph.tensors[t].nbytes, alignment) for t in set(op.outputs))
        k = _slices_to_fit(wbytes + outs, need - wbytes - outs, room)
        split = (f"; split by output features into {k} slices (each with 1/{k} of the weight) it would fit" if k
                 else "")
        fact = (f"; its parameters ({format_bytes(wbytes)}, the largest {biggest.name!r}) must be on the device at "
                f"once, which no batch size or fusion setting lowers{split}")
    if not knobs:
        return f"{head}{fact}"
    return f"{head}{fact}; lower that with {', '.join(knobs[:-1]) + ', or ' if len(knobs) > 1 else ''}{knobs[-1]}"
