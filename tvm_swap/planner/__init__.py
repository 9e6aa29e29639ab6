"""SwapAdvisor planning (no TVM imports anywhere in this package).

    plan_graph(graph, mem_limit, ...) -> verified Plan      (api.py)
    PLANNERS: name -> planner(ctx) -> Plan                   (swapadvisor[-nosearch], odswap, vdnn, noswap,
                                                             tflms, save-on-cpu[-async])
    min_feasible_limit(graph, alignment) -> bytes            (feasibility.py)
"""
from .api import PLANNERS, plan_graph
from .feasibility import min_feasible_limit

__all__ = ["PLANNERS", "plan_graph", "min_feasible_limit"]
