"""tvm_swap.testing.planner_min_limit: the min a planner's own refusal names, which the fuzzers draw limits
from. At that min the planner plans (verified); one byte below it refuses, naming that very min."""
import pytest

from tvm_swap.errors import InfeasibleLimitError
from tvm_swap.planner import plan_graph
from tvm_swap.planner.api import feasible_floor, resolve_pool
from tvm_swap.testing import planner_min_limit, random_dag, random_training_graph

PLANNERS = ("swapadvisor", "swapadvisor-nosearch", "odswap", "vdnn", "noswap")
GRAPHS = {"dag": lambda: random_dag(7, n_ops=14), "train": lambda: random_training_graph(3, n_layers=3)}


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("planner", PLANNERS)
def test_the_planner_plans_at_its_min_and_refuses_below_it_naming_it(graph, planner):
    g = GRAPHS[graph]()
    lo, why = planner_min_limit(g, planner, device="v100-16gb")
    assert why
    plan = plan_graph(g, lo, planner=planner, generations=0, workers=1)
    assert plan.verified and plan.predicted["peak_bytes"] <= lo
    # an arena's placement is not monotone in the limit: just below its min a plan may still be found (and
    # then it verifies); below the largest op's own working set a refusal is certain
    below = lo - 1 if resolve_pool(planner, None) != "arena" else _arena_hard_floor(g) - 1
    with pytest.raises(InfeasibleLimitError) as e:
        plan_graph(g, below, planner=planner, generations=0, workers=1)
    assert e.value.exact and e.value.min_feasible == lo


def _arena_hard_floor(g) -> int:
    from tvm_swap.planner.graphindex import GraphIndex
    from tvm_swap.planner.swapadvisor.arena import working_set_floor

    gi = GraphIndex.build(g, 256, keep_updated=False)
    return working_set_floor(gi) + gi.workspace


def test_a_baselines_min_is_its_own_floor_not_the_pools():
    """vdnn and noswap need more than the size-class pool's floor: the min names theirs (a fuzz drawing from
    the pool's floor would draw limits they refuse)."""
    g = random_training_graph(3, n_layers=3)
    pool_floor, _ = feasible_floor(g, "size-classes")
    assert planner_min_limit(g, "noswap")[0] > pool_floor
    assert all(planner_min_limit(g, p)[0] >= pool_floor for p in ("vdnn", "odswap"))
