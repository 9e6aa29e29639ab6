"""Which dense layers to split, and into how many slices, so that a limit fits (inference; issue 26, item 3).

    mod, lowered, graph, splits = split_to_fit(mod, limit, lower_graph, "main", "arena")

The floor of an inference graph at batch 1 is often one dense layer's weight (VGG-16's fc6: 392 MiB of a
553 MiB need). relay_passes.split_dense runs such a layer as K slices of its output features, each reading
1/K of the weight; here K is chosen: the smallest K for which the op that sets the floor fits beside what it
must hold whole (its input), checked exactly on the lowered split graph, and raised again while the same
weight's slice still sets a floor above the limit. Another layer's weight setting the floor next is split
the same way; an op that no split helps ends the search (the exact check refuses, naming that op).
`split_floor` is the same search without a limit: the floor once no dense layer's weight sets it.
A training step's trainable weights are split by tvm_swap.limits.split_train (row chunks through the step).
"""
from __future__ import annotations

from ..graph.dataflow import PERSISTENT_KINDS
from .floor_hint import slices_to_fit as _slices_to_fit
from .mem_limit import floor_op
from .split_train import fits as _fits, is_training, split_train_floor, split_train_to_fit
from ..plan import aligned_bytes

MAX_ROUNDS = 12


def _source(name: str, splits: dict) -> str:
    """The weight a tensor name is a slice of (`W_s3` -> `W` when W is split), else the name."""
    base, sep, idx = name.rpartition("_s")
    return base if sep and idx.isdigit() and base in splits else name


def _need(graph, op, alignment: int) -> int:
    return sum(aligned_bytes(graph.tensors[t].nbytes, alignment) for t in set(op.inputs) | set(op.outputs))


def floor_weight(graph, candidates: dict, splits: dict, alignment: int = 256):
    """(floor op, its need, the splittable weight it reads (or a slice of it), that weight's name) or None."""
    name, need, _ = floor_op(graph, alignment)
    op = next(o for o in graph.ops if o.name == name)
    weights = [graph.tensors[t] for t in set(op.inputs) if graph.tensors[t].kind in PERSISTENT_KINDS]
    weights = [t for t in weights if _source(t.name, splits) in candidates]
    if not weights:
        return None
    w = max(weights, key=lambda t: t.nbytes)
    return op, need, w, _source(w.name, splits)


def next_split(graph, candidates: dict, splits: dict, room: int, alignment: int = 256):
    """(weight, K) that lowers the floor op's need to `room` bytes, or None when the op reads no weight that
    may be split, or no K does. candidates: splittable weights {name: (IN, OUT)} (relay_passes.split_dense)."""
    found = floor_weight(graph, candidates, splits, alignment)
    if found is None:
        return None
    op, need, w, src = found
    old = int(splits.get(src, 1))
    outs = sum(aligned_bytes(graph.tensors[t].nbytes, alignment) for t in set(op.outputs))
    part = aligned_bytes(w.nbytes, alignment) + outs      # what one slice holds of the weight and the result
    k = _slices_to_fit(part * old, need - part, room)
    if k is None:
        return None
    k = max(k, old + 1)
    out_features = candidates[src][1]
    return (src, min(k, out_features)) if old < out_features else None


def split_to_fit(mod, limit: int | None, lower_graph, func_name: str, pool: str, alignment: int = 256, first=None):
    """(mod, lowered, graph, splits): `mod` with the fewest dense slices that make `limit` bytes feasible
    (splits: {weight: K}; {} when the unsplit graph fits, or nothing splittable sets the floor).
    lower_graph(mod) -> (lowered, graph); first: that of `mod` when already lowered."""
    from relay_passes.split_dense import SplitDenseByOutputFeatures, splittable

    from ..planner.api import infeasible_floor

    base = mod
    func = base[func_name]
    if limit is not None and is_training(func):     # trainable weights: row chunks through the whole step
        return split_train_to_fit(mod, limit, lower_graph, func_name, pool, alignment, first)
    lowered, graph = first if first is not None else lower_graph(mod)
    if limit is None or is_training(func):
        return mod, lowered, graph, {}
    candidates = splittable(func)
    splits: dict = {}
    for _ in range(MAX_ROUNDS):
        if not candidates or _fits(graph, limit, pool, alignment, infeasible_floor):
            break
        workspace = max((o.workspace for o in graph.ops), default=0)
        step = next_split(graph, candidates, splits, int(limit) - int(workspace), alignment)
        if step is None:
            break
        splits[step[0]] = step[1]
        mod = SplitDenseByOutputFeatures(splits, func_name)(base)
        lowered, graph = lower_graph(mod)
    return mod, lowered, graph, splits


def split_floor(mod, lower_graph, func_name: str = "main", alignment: int = 256):
    """(mod, graph, splits) once no splittable dense weight sets the floor: each round splits the floor op's
    weight until that op needs no more than the next-largest op (what would set the floor without it)."""
    from relay_passes.split_dense import SplitDenseByOutputFeatures, splittable

    if is_training(mod[func_name]):
        return split_train_floor(mod, lower_graph, func_name, alignment)
    base = mod
    _, graph = lower_graph(mod)
    candidates = splittable(base[func_name])
    splits: dict = {}
    for _ in range(MAX_ROUNDS):
        found = floor_weight(graph, candidates, splits, alignment)
        if found is None:
            break
        src = found[3]       # the room: what the largest op not reading that weight (or a slice of it) needs
        others = [_need(graph, o, alignment) for o in graph.ops
                  if not any(_source(graph.tensors[t].name, splits) == src for t in o.inputs)]
        step = next_split(graph, candidates, splits, max(others, default=0), alignment)
        if step is None:
            break
        splits[step[0]] = step[1]
        mod = SplitDenseByOutputFeatures(splits, func_name)(base)
        _, graph = lower_graph(mod)
    return mod, graph, splits


# ---- regions of activation ops in slices (relay_passes.split_region; batch, channels or rows) -------------

ROOM_STEP = 0.8        # each round asks the regions' ops for this share of the room before


def _arena_floor(graph, alignment: int) -> int:
    from ..planner.api import feasible_floor

    return int(feasible_floor(graph, "arena", alignment)[0])


def split_regions_to_fit(mod, limit: int, lower_graph, func_name: str, pool: str, alignment: int = 256,
                         first=None, rounds: int = 6):
    """(mod, lowered, graph, regions): `mod` with regions of ops split (relay_passes.split_choice) until
    `limit` bytes is feasible, asking each op for less room each round; regions [] when the unsplit graph fits
    or no split does (the caller's exact check then refuses, naming the op). A training step's regions are
    along the batch, of per-sample ops only (relay_passes.split_region.check_training_regions)."""
    from relay_passes.split_choice import choose_regions
    from relay_passes.split_region import SplitRefused, SplitRegions

    from ..planner.api import infeasible_floor

    lowered, graph = first if first is not None else lower_graph(mod)
    func = mod[func_name]
    if limit is None:
        return mod, lowered, graph, []
    if _fits(graph, limit, pool, alignment, infeasible_floor):
        return mod, lowered, graph, []
    workspace = max((o.workspace for o in graph.ops), default=0)
    room, tried = int(limit) - int(workspace), None
    for _ in range(rounds):
        regions = choose_regions(func, room)
        if regions and regions != tried:
            tried = regions
            try:
                split = SplitRegions(regions, func_name)(mod)
            except SplitRefused:          # (an estimate the rewrite refuses: ask for less room)
                room = int(room * ROOM_STEP)
                continue
            low, g = lower_graph(split)
            if _fits(g, limit, pool, alignment, infeasible_floor):
                return split, low, g, regions
        room = int(room * ROOM_STEP)
    return mod, lowered, graph, []


def split_regions_floor(mod, lower_graph, func_name: str = "main", alignment: int = 256, rounds: int = 10):
    """(mod, graph, regions) with the lowest arena floor found by splitting regions of ops (each round asks
    them for ROOM_STEP of the best floor so far; two rounds without a lower floor end the search)."""
    from relay_passes.split_choice import choose_regions
    from relay_passes.split_region import SplitRefused, SplitRegions

    _, graph = lower_graph(mod)
    best = (_arena_floor(graph, alignment), mod, graph, [])
    room, misses, tried = best[0], 0, None
    for _ in range(rounds):
        room = int(room * ROOM_STEP)
        regions = choose_regions(mod[func_name], room)
        if not regions or regions == tried:
            misses += 1
        else:
            tried = regions
            try:
                split = SplitRegions(regions, func_name)(mod)
            except SplitRefused:
                misses += 1
                continue
            _, g = lower_graph(split)
            floor = _arena_floor(g, alignment)
            if floor < best[0]:
                best, misses = (floor, split, g, regions), 0
            else:
                misses += 1
        if misses >= 2:
            break
    return best[1], best[2], best[3]


# ---- the same weights in another number of chunks (tvm_swap.limits.split_k) ------------------------------

def split_maxima(base, func_name: str = "main") -> dict:
    """{weight: the most chunks it can take}: a trainable weight's rows, an inference weight's output features."""
    from relay_passes.split_dense import splittable
    from relay_passes.split_dense_train import trainable_splittable

    func = base[func_name]
    if is_training(func):
        return {w: rows for w, (rows, _) in trainable_splittable(func).items()}
    return {w: out for w, (_, out) in splittable(func).items()}


def resplit(base, splits: dict, func_name: str = "main"):
    """The unsplit module `base` with its dense weights in `splits` chunks (the pass split_to_fit uses)."""
    from relay_passes.split_dense import SplitDenseByOutputFeatures
    from relay_passes.split_dense_train import SplitTrainableDense

    if is_training(base[func_name]):
        return SplitTrainableDense(splits, func_name)(base)
    return SplitDenseByOutputFeatures(splits, func_name)(base)
