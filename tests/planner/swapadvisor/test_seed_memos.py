"""What the fuzz's plans recompute less of (issue 28, `scripts/fuzz.py --n 10000` within the hour), each the same
answer as before: the extras' gate times only the seeds it needs (ga.some_seed_within), the memory-greedy seed
schedules are remembered with the index (ga._locality), and predict's host-aware bound with the graph."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))

import fuzz  # noqa: E402

from tvm_swap.cost.devices import get_device  # noqa: E402
from tvm_swap.planner import plan_graph  # noqa: E402
from tvm_swap.planner.bounds import lower_bound, noswap_peak  # noqa: E402
from tvm_swap.planner.swapadvisor import ga  # noqa: E402
from tvm_swap.planner.swapadvisor.encoding import locality_schedule  # noqa: E402
from tvm_swap.planner.swapadvisor.ga import Evaluator, best_seed_time, some_seed_within  # noqa: E402
from tvm_swap.testing import random_op_times, random_training_graph  # noqa: E402


def _evaluator(case, counter=None):
    dev = get_device(case.device)
    g = fuzz.fresh_copy(case.graph)          # nothing remembered: each evaluator times its seeds afresh
    ev = Evaluator(g, case.op_time, dev, case.limit, case.alignment, pool="arena", recompute=True)
    if counter is not None:
        real = ev.time_of
        ev.time_of = lambda s, a: counter.append(1) or real(s, a)
    return g, dev, ev


def test_some_seed_within_answers_as_the_best_seed_time_does_timing_fewer_seeds():
    fewer = 0
    for seed in range(8):
        case = fuzz.draw_case(seed)
        all_calls = []
        g, dev, ev = _evaluator(case, all_calls)
        best = best_seed_time(g, case.op_time, dev, case.limit, case.alignment, 0, ev)
        floor = lower_bound(g, case.op_time, dev, case.limit, case.alignment)
        for limit_s in (floor * 1.03, best * (1 - 1e-12), best, np.inf):
            calls = []
            g2, _, ev2 = _evaluator(case, calls)
            got = some_seed_within(g2, case.op_time, dev, case.limit, case.alignment, 0, ev2, limit_s)
            assert got == (best <= limit_s), (seed, limit_s, best)
            assert len(calls) <= len(all_calls)
            fewer += len(calls) < len(all_calls)
    assert fewer            # (where a seed is within the limit, the seeds after it are not timed)


def test_the_seed_schedules_are_remembered_and_the_same():
    rng = np.random.default_rng(3)
    g = random_training_graph(rng, n_layers=10, width_bytes=[1 << 20, 3 << 20], with_updates=True)
    from tvm_swap.planner.graphindex import GraphIndex

    gi = GraphIndex.of(g, 256, keep_updated=False)
    sched = gi.default_schedule()
    for hot, net in ((1e6, True), (4e6, False), (1e6, False)):
        first = ga._locality(gi, sched, hot, net)
        assert np.array_equal(first, locality_schedule(gi, sched, hot, net=net))
        assert ga._locality(gi, sched.copy(), hot, net) is first           # the same key: remembered
    assert not ga._locality(gi, sched, 1e6, True).flags.writeable           # shared: nobody may write it


def test_host_plans_share_predicts_host_bound_and_report_what_a_fresh_graph_does():
    rng = np.random.default_rng(7)
    g = random_training_graph(rng, n_layers=6, width_bytes=[1 << 20, 2 << 20], with_updates=True, momentum=True)
    op_time = random_op_times(g, rng)
    limit = int(0.7 * noswap_peak(g))

    def plan(graph, planner, host_ops):
        return plan_graph(graph, limit, device="h100", op_time=op_time, planner=planner, seed=0, generations=0,
                          workers=1, host_ops=host_ops)

    a = plan(g, "swapadvisor-nosearch", "optimizer")
    b = plan(g, "swapadvisor", "optimizer")
    assert a.host_ops and b.host_ops
    assert sum(k[0] == "host" for k in g._cache["predict_bounds"]) == 1     # both plans' bound: computed once
    assert a.predicted["lower_bound_s"] == b.predicted["lower_bound_s"]
    fresh = plan(fuzz.fresh_copy(g), "swapadvisor-nosearch", "optimizer")
    assert a.predicted == fresh.predicted
