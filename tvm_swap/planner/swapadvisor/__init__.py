"""SwapAdvisor's own planner: the genetic search over schedule and pool allocation (ga.py) on its encoding
(encoding.py), and the swap planner that turns one genome into a plan (swapplan.py, packed_builder.py)."""
