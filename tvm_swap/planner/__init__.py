"""SwapAdvisor planning (no TVM imports anywhere in this package).

    plan_graph(graph, mem_limit, ...) -> verified Plan      (api.py)
    PlannerName, PLANNERS: the one list of planners          (registry.py: swapadvisor/, baselines/)
    min_feasible_limit(graph, alignment) -> bytes            (feasibility.py)
"""
from .api import plan_graph
from .feasibility import min_feasible_limit
from .registry import PLANNERS, PlannerName

__all__ = ["PLANNERS", "PlannerName", "plan_graph", "min_feasible_limit"]
