"""The search's executors (tvm_swap.planner.swapadvisor.executors): the same seed and generation count give the same
plan in-process, with local processes and with Ray, at any number of workers."""
import json

import pytest

from tvm_swap.errors import TvmSwapError
from tvm_swap.planner import plan_graph
from tvm_swap.planner.feasibility import min_feasible_limit
from tvm_swap.testing import random_op_times, random_training_graph


def _comparable(plan):
    d = plan.to_dict()
    d.pop("search")                  # wall-clock times
    return json.dumps(d, sort_keys=True)


@pytest.fixture(scope="module")
def case():
    g = random_training_graph(7, n_layers=10, momentum=True, skip_prob=0.5)
    lo = min_feasible_limit(g)
    full = int(sum(max(256, -(-g.tensors[t].nbytes // 256) * 256) for t in g.used_tensors()))
    return g, lo + int((full - lo) * 0.35), dict(op_time=random_op_times(g), planner="swapadvisor", seed=5,
                                                 generations=3, population=8)


def test_processes_give_the_in_process_plan(case):
    g, limit, kw = case
    a = plan_graph(g, limit, workers=1, **kw)
    b = plan_graph(g, limit, workers=2, executor="processes", **kw)     # forkserver workers
    assert _comparable(a) == _comparable(b)
    assert [h[2] for h in a.search["history"]] == [h[2] for h in b.search["history"]]


@pytest.mark.slow            # starts a local Ray (about 10-20 s on a loaded 2-core machine)
def test_ray_gives_the_same_plan_with_one_and_two_workers(case):
    pytest.importorskip("ray")
    g, limit, kw = case
    want = plan_graph(g, limit, workers=1, **kw)
    for workers in (1, 2):
        got = plan_graph(g, limit, workers=workers, executor="ray", **kw)
        assert _comparable(got) == _comparable(want), f"ray with {workers} workers"
        assert got.search["evaluations"] == want.search["evaluations"]


def test_bad_executor_settings_are_clear_errors(case):
    g, limit, kw = case
    with pytest.raises(TvmSwapError, match="unknown executor 'dask'"):
        plan_graph(g, limit, executor="dask", **kw)
    with pytest.raises(TvmSwapError, match="only for executor='ray'"):
        plan_graph(g, limit, ray_address="auto", **kw)
