"""The arena planner's knobs, in one place. Modules read them as `tuning.NAME` at call time, so a test may
switch one (monkeypatch) and every part that reads it sees the change."""
from __future__ import annotations

# ---- decide/place rounds (rounds.py)
MAX_ROUNDS = 12          # decide/place rounds before giving up on a capacity
PAIR_BACKOFF_MAX = 8     # a placement with up to this many kept pairs that does not fit retries with one fewer
# ---- the walk (walk.py)
PREFETCH_WINDOW = 4096   # slots a swap-in may start before its use (bounds the per-swap-in slice)
KEEP_REBUILT_INPUTS = True  # a dead input rebuilt for one rebuild stays for a later one (WalkState.release_extra)
# ---- placement (layout.py)
BY_SIZE_MAX_STAYS = 4000  # greedy-by-size placement is quadratic in stays: only below this many
BY_SIZE_ZONED_MAX_STAYS = 1000  # with kept pairs, greedy by size after every failed sweep below this many
BY_SIZE_ALWAYS_STAYS = 256  # greedy by size after every failed sweep below this many stays (cheap there)
# ---- kept pairs (pairs.py, layout.py)
PAIRS_LAST = True        # at equal next use a kept pair's old value is evicted last (pairs.pairs_last)
ROTATE_KEPT = True       # kept pairs of equal size share equal slots by rotation (False: two zones per pair)
# ---- clean placement (cooling.py)
CLEAN_FIRST = True       # with op times: also try a clean-first placement (cooling.clean_first), keep the faster
CLEAN_ROUNDS = 2         # decisions at a lowered capacity a clean-first placement may take to fit
PARTLY_COOLED_MAX_STAYS = 256  # with op times, below this many stays: also try cooling some stays (partly_cooled)
PARTLY_COOLED_ORDERS = False   # ... placed greedy by size largest first only (the other orders cost ~25 placements)
PARTLY_COOLED_TRIES = 8        # ... the first this many dirty stays in copy order (a placement and a simulation each)
# ---- pinning frozen tensors (decide.py)
PIN_STEPS = 6   # bisection steps over how many kept frozen tensors to pin when pinning all of them fails
# ---- the genome (genes.py)
MAX_KEEP = 2.0           # the keep gene's range (above 1: kept pairs may leave mid-iteration, see pairs.choose_pairs)
MAX_DEPTH_GENE = 12      # the depth gene's range (recomputes per rebuild chain): 1 .. this
DEEP_SEED_DEPTH = 12     # the deep recompute seeds' chain depth (see ArenaSpace.seeds)
# the "recompute-memory-bound" seed: recompute what costs at most this fraction of its copies' link time (a
# memory-bound kernel costs ~2/75 of it on a V100: 900 GB/s against 12 GB/s; a convolution costs far more)
MEMORY_BOUND_FRACTION = 0.1
