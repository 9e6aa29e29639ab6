"""SwapAdvisor's own planner (planners.py: `swapadvisor` with the search, `swapadvisor-nosearch` without).

The genetic search over schedule and memory (ga.py; where it evaluates: executors.py) works on one of two
encodings, one per memory model:
- the arena (the default): the package arena/ holds the genome, the walk that turns one genome into swaps,
  drops and recomputes, the decide/place rounds that give every stay a byte offset, and the scorer (its
  __init__ lists the parts); placement.py (compiled: placement_jit.py, placement_clean_jit.py; more orders:
  placement_orders.py) places the stays, slot_usage.py keeps the walk's per-slot bytes; polish.py refines the best genome after the search; islands.py runs the swap-or-recompute
  search as two islands;
- the paper's size-class pool: encoding.py, and the swap planner that turns one genome into a plan
  (swapplan.py, packed_builder.py).
"""
