"""Which trainable dense weights to split, and into how many row chunks, so a training step fits (issue 26).

    mod, lowered, graph, splits = split_train_to_fit(mod, limit, lower_graph, "main", "arena")

relay_passes.split_dense_train runs a trainable weight through the whole step (forward, dX, dW and the
optimizer update) as K chunks of its rows. A training step's floor is not always an op reading the weight (a
transformer's batched dW, before its collapse_sum, reads activations only), so K is not derived from the floor
op as for inference (split_to_fit) but from one chunk budget for all weights: each weight larger than the
budget is cut into the smallest K whose chunks fit it. The budget starts at half the largest weight and halves
each round; `split_train_to_fit` stops at the first budget whose lowered graph fits the limit (checked exactly),
`split_train_floor` at the lowest floor (two rounds without a lower one end it). bench/split_k.py weighs
this smallest K against 2x and 4x as many chunks (benchmarks/split_k.md): fastest on small, launch-bound steps
(each slice is a kernel launch), but a large weight (a BERT head's 94 MB) plans faster in 2-4x as many chunks
at limits well above the floor, where the smallest K leaves no room to keep chunks resident or overlap copies.
split_k="auto" (tvm_swap.limits.split_k) plans 1x, 2x and 4x this K and keeps the fastest plan.
The same budget bounds a 2-D input's batch slices (relay_passes.split_input_train: mlp at batch 128, whose
weight-gradient kernels otherwise read the whole input, 29.9% of the step's need); split_k then keeps K.
"""
from __future__ import annotations

ROUNDS = 8
MISSES = 2
MAX_INPUT_SLICES = 8       # an input's batch slices ...
MAX_SLICE_PAIRS = 128      # ... times a weight's row chunks: the step's kernels grow with their product


def is_training(func) -> bool:
    return func.attrs is not None and "tvm_swap.updates" in func.attrs


def _nbytes(shape, dtype_bits: int = 32) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n * dtype_bits // 8


def splits_for_budget(candidates: dict, budget: int) -> dict:
    """{weight: K}: the smallest K whose row chunks are at most `budget` bytes, for each candidate
    ({name: (OUT, IN)}) larger than the budget; K at most OUT."""
    out = {}
    for name, (rows, cols) in candidates.items():
        size = _nbytes((rows, cols))
        if size > budget:
            k = -(-size // max(1, budget))
            out[name] = int(min(k, rows))
    return out


def _budgets(candidates: dict):
    largest = max((_nbytes(s) for s in candidates.values()), default=0)
    budget = largest // 2
    for _ in range(ROUNDS):
        if budget < 1:
            return
        yield budget
        budget //= 2


def input_slices_for_budget(func, budget: int, splits: dict) -> dict:
    """{input: K}: each of the step's inputs (its `num_input` first params) larger than the budget, in the
    fewest batch slices of at most `budget` bytes (relay_passes.split_input_train reads it so where only
    2-D matmuls read it; it refuses the rest), at most MAX_INPUT_SLICES and MAX_SLICE_PAIRS over the most
    chunks of a weight in `splits` (each forward and gradient kernel of a chunk runs once per slice)."""
    from .model_checks import _nbytes

    n = int(func.attrs["num_input"]) if "num_input" in func.attrs else 0
    cap = min(MAX_INPUT_SLICES, max(1, MAX_SLICE_PAIRS // max(splits.values(), default=1)))
    out = {}
    for p in func.params[:n]:
        size, shape = _nbytes(p.ty) or 0, [int(d) for d in p.ty.shape.values] if hasattr(p.ty, "shape") else []
        k = min(-(-size // max(1, budget)), shape[0] if shape else 1, cap)
        if size > budget and len(shape) == 2 and k > 1:
            out[p.name] = int(k)
    return out


def _with_input_slices(split, inputs: dict, func_name: str):
    """`split` with its inputs read in batch slices where every reader allows it, else as it is."""
    from relay_passes.split_input_train import InputSplitRefused, SplitInputBatch

    for name, k in inputs.items():
        try:
            split = SplitInputBatch({name: k}, func_name)(split)
        except InputSplitRefused:
            continue
    return split


def _split_steps(mod, lower_graph, func_name: str):
    """(splits, split module, lowered, graph) for each chunk budget in turn (halved each round), skipping a
    budget that splits nothing or the same as the one before. The budget also bounds an input's batch slices
    (input_slices_for_budget), so the weight-gradient kernels that read it read one slice each."""
    from relay_passes.split_dense_train import SplitTrainableDense, trainable_splittable

    candidates = trainable_splittable(mod[func_name])
    tried = None
    for budget in _budgets(candidates):
        splits = splits_for_budget(candidates, budget)
        inputs = input_slices_for_budget(mod[func_name], budget, splits)
        if not splits or (splits, inputs) == tried:
            continue
        tried = (splits, inputs)
        split = _with_input_slices(SplitTrainableDense(splits, func_name)(mod), inputs, func_name)
        low, g = lower_graph(split)
        yield splits, split, low, g


def fits(graph, limit: int, pool: str, alignment: int, infeasible_floor) -> bool:
    """Whether `limit` is feasible; below the largest op's working set at once, without the floor's search."""
    from ..planner.graphindex import GraphIndex
    from ..planner.swapadvisor.arena import working_set_floor

    gi = GraphIndex.of(graph, alignment, keep_updated=False)
    if limit < working_set_floor(gi) + gi.workspace:
        return False
    return infeasible_floor(graph, limit, pool, alignment) is None


def split_train_to_fit(mod, limit, lower_graph, func_name: str, pool: str, alignment: int = 256, first=None):
    """(mod, lowered, graph, splits): the training step `mod` with its trainable dense weights in the fewest
    row chunks (one budget for all, halved each round) that make `limit` bytes feasible; splits {} when the
    unsplit step fits or no split does (the caller's exact check then refuses, naming the op)."""
    from ..planner.api import infeasible_floor

    lowered, graph = first if first is not None else lower_graph(mod)
    if limit is None or fits(graph, int(limit), pool, alignment, infeasible_floor):
        return mod, lowered, graph, {}
    for splits, split, low, g in _split_steps(mod, lower_graph, func_name):
        if fits(g, int(limit), pool, alignment, infeasible_floor):
            return split, low, g, splits
    return mod, lowered, graph, {}


def split_train_floor(mod, lower_graph, func_name: str = "main", alignment: int = 256):
    """(mod, graph, splits) with the lowest arena floor over the budgets (split_train_to_fit's sequence)."""
    from ..planner.api import feasible_floor

    _, graph = lower_graph(mod)
    best = (int(feasible_floor(graph, "arena", alignment)[0]), mod, graph, {})
    misses = 0
    for splits, split, _, g in _split_steps(mod, lower_graph, func_name):
        floor = int(feasible_floor(g, "arena", alignment)[0])
        if floor < best[0]:
            best, misses = (floor, split, g, splits), 0
        else:
            misses += 1
            if misses >= MISSES:
                break
    return best[1], best[2], best[3]
