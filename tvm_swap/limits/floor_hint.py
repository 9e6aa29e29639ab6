"""What would move the floor, for the op that sets it: the clause a refusal ends with (issue 26, item 5).

    hint_text(hint_facts(graph), "arena", limit)

Only advice that lowers that op's own need, with the numbers for this limit:
- a kernel that copies a parameter into another layout (a weight layout tvm_swap could not fold into the
  shipped parameter, nor fuse into the matmul that reads it): named as such, with why; no batch or fusion
  setting moves it;
- parameters bigger than what the limit leaves: named; for an inference dense layer, the split into K slices
  of its output features that fits (split_dense=True); for a training step's, split_dense=True too (its rows
  through forward, gradients and update: relay_passes.split_dense_train); no batch or fusion advice;
- activations: split_ops=True (inference: the op and its neighbours in slices, relay_passes.split_region), the
  micro-batch count (inference) or batch factor (training) that fits, only where the batch is larger than 1; a
  training step's split_dense=True, which also splits its per-sample ops along the batch (the facts cannot tell
  whether the op reduces over the batch: the hint says where it applies);
- a smaller fusion depth only for a fused kernel holding more than one input and output besides its weights;
- the arena for size classes.
The facts are plain data (the bundled examples' floors table stores them, tvm_swap.examples.floors), the
words depend on the limit. No TVM here.
"""
from __future__ import annotations

from ..graph.dataflow import PERSISTENT_KINDS
from ..plan import aligned_bytes

LAYOUT_KERNELS = ("transpose", "reshape", "layout_transform", "expand_dims", "squeeze")


def _batch(graph) -> int:
    """The batch size: the leading dimension of the model's inputs (1 when it has none)."""
    dims = [t.shape[0] for t in graph.tensors if t.kind == "input" and t.shape]
    return min(dims) if dims else 1


def slices_to_fit(split: int, fixed: int, room: int | None) -> int | None:
    """The smallest K >= 2 with fixed + split / K <= room (None: no K does, or no room given)."""
    if room is None or split <= 0 or fixed >= room:
        return None
    k = max(2, -(-split // (room - fixed)))
    return k if k <= split else None


def largest_op(graph, alignment: int = 256, in_place: bool = True):
    """(op, aligned bytes of its inputs and outputs together) of the op that needs the most memory at once (the
    first on a tie; (None, -1) for no ops). in_place: an output the op may write over a dying input counts once
    (the arena runs such ops in place; size classes do not)."""
    best, found = -1, None
    saved = graph.inplace_savings(aligned_bytes(graph.tensor_bytes(), alignment)) if in_place \
        else [0] * graph.num_ops
    for op in graph.ops:
        need = sum(aligned_bytes(graph.tensors[t].nbytes, alignment) for t in set(op.inputs) | set(op.outputs))
        need -= int(saved[op.id])
        if need > best:
            best, found = need, op
    return found, best


def hint_facts(graph, alignment: int = 256, in_place: bool = True) -> dict:
    """What the hint needs to know of the op that needs the most memory at once (JSON-able). in_place: an
    output the op may write over a dying input counts once (the arena runs such ops in place, as
    limits.floor_op counts them; size classes do not)."""
    op, best = largest_op(graph, alignment, in_place)
    workspace = max((o.workspace for o in graph.ops), default=0)
    if op is None:
        return {"op": "", "need": 0, "workspace": int(workspace)}
    ts = [graph.tensors[t] for t in sorted(set(op.inputs) | set(op.outputs))]
    weights = [t for t in ts if t.kind in PERSISTENT_KINDS]
    biggest = max(weights, key=lambda t: t.nbytes) if weights else None
    updated = set(graph.updates.values())
    copy = None
    if (op.kernel.rstrip("0123456789_") in LAYOUT_KERNELS and len(op.inputs) == 1
            and graph.tensors[op.inputs[0]].kind in PERSISTENT_KINDS):
        w = graph.tensors[op.inputs[0]]
        copy = {"name": w.name, "nbytes": int(w.nbytes), "updated": w.id in updated}
    sliceable = [t for t in ts if t.kind == "input" and len(t.shape) == 2 and t.shape[0] > 1]
    batch_input = max(sliceable, key=lambda t: t.nbytes) if sliceable else None
    return {"op": op.name, "need": int(best), "workspace": int(workspace), "layout_copy": copy,
            "batch_input": None if batch_input is None else [batch_input.name, int(batch_input.nbytes)],
            "weights": sum(aligned_bytes(t.nbytes, alignment) for t in weights),
            "activations": sum(aligned_bytes(t.nbytes, alignment) for t in ts if t.kind not in PERSISTENT_KINDS),
            "outputs": sum(aligned_bytes(graph.tensors[t].nbytes, alignment) for t in set(op.outputs)),
            "others": len(ts) - len(weights), "fused": op.kernel.startswith("fused_"),
            "biggest": None if biggest is None else [biggest.name, int(biggest.nbytes), len(biggest.shape)],
            "dense": "matmul" in op.kernel, "training": bool(graph.updates), "batch": int(_batch(graph))}


def _layout_copy_text(head: str, copy: dict, pool_knob: list) -> str:
    from ..units import format_bytes

    why = ("it is updated by training (train_step(..., frozen=[...]) folds a frozen one)" if copy["updated"]
           else "not a layout change tvm_swap folds, nor read by a matmul that reads it in place")
    more = f"; otherwise {', or '.join(pool_knob)}" if pool_knob else ""
    return (f"{head}: it copies parameter {copy['name']!r} ({format_bytes(copy['nbytes'])}) into another layout, a "
            f"weight layout that could not be folded at compile time ({why}); no batch size or fusion setting "
            f"lowers that{more}")


def hint_text(f: dict, pool: str, limit: int | None = None) -> str:
    """The clause for facts `f` (hint_facts) and `limit` (bytes; None: the numbers that need it are left out)."""
    from ..units import format_bytes

    ws = f" plus {format_bytes(f['workspace'])} of kernel workspace" if f["workspace"] else ""
    head = f"op {f['op']!r} needs {format_bytes(f['need'])} for its inputs and outputs at once{ws}"
    if not f["op"]:
        return head
    pool_knob = ["pool='arena'"] if pool != "arena" else []
    if f["layout_copy"] is not None:
        return _layout_copy_text(head, f["layout_copy"], pool_knob)
    room = None if limit is None else int(limit) - f["workspace"]
    wbytes, rest, biggest = f["weights"], f["activations"], f["biggest"]
    params_too_big = bool(wbytes) and room is not None and wbytes >= room
    knobs = []
    if rest and not params_too_big and not f["training"]:
        knobs.append("split_ops=True (it and the ops around it in slices of the batch, channels or rows)")
    if rest and not params_too_big and f["batch"] > 1:
        k = slices_to_fit(rest, wbytes, room)
        k = k if k is not None and k <= f["batch"] else None
        if f["training"] and f.get("batch_input"):     # (relay_passes.split_input_train)
            name, nbytes = f["batch_input"]
            kin = slices_to_fit(aligned_bytes(nbytes, 256), f["need"] - aligned_bytes(nbytes, 256), room)
            knobs.append(f"split_dense=True (input {name!r} in {kin or 'more'} batch slices, the weight gradient "
                         f"summed slice after slice, bitwise)")
        elif f["training"]:      # (per-sample ops only: a parameter gradient or batch statistics stays whole)
            knobs.append(f"split_dense=True (it and the per-sample ops around it in {k} or more slices of the batch, "
                         f"bitwise, where it reduces nothing over the batch)" if k else
                         "split_dense=True (it and the per-sample ops around it in slices of the batch, bitwise, "
                         "where it reduces nothing over the batch)")
        if f["training"]:
            knobs.append(f"a batch {k} times smaller" if k else "a smaller batch")
        else:
            knobs.append(f"micro_batches={k} (its activations in {k} slices of the batch)" if k else
                         "a smaller batch (micro_batches=K runs it in K slices)")
    # fewer ops per kernel helps only a kernel holding more than one input and output besides its weights
    if f["fused"] and f["others"] >= 3 and not (biggest and room is not None and biggest[1] >= room):
        knobs.append("fuse_max_depth=2 (or 1: smaller fused kernels hold fewer tensors at once)")
    knobs += pool_knob
    fact = ""
    if params_too_big:
        k = slices_to_fit(wbytes + f["outputs"], f["need"] - wbytes - f["outputs"], room)
        split = ""
        if k and f["dense"] and biggest[2] == 2:
            split = (f"; split_dense=True runs the weight through the step (forward, gradients, update) in {k} or "
                     f"more chunks of its rows, which may fit" if f["training"] else
                     f"; split_dense=True runs it in {k} slices of its output features (each reading 1/{k} of "
                     f"the weight), which fits")
        fact = (f"; its parameters ({format_bytes(wbytes)}, the largest {biggest[0]!r}) must be on the device at "
                f"once, which no batch size or fusion setting lowers{split}")
    if not knobs:
        return f"{head}{fact}"
    return f"{head}{fact}; lower that with {', '.join(knobs[:-1]) + ', or ' if len(knobs) > 1 else ''}{knobs[-1]}"
