"""scripts/fuzz.py: the planner fuzz finds nothing on a few hundred cases, and it does catch what it checks."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import fuzz  # noqa: E402

from tvm_swap.errors import InfeasibleLimitError  # noqa: E402
from tvm_swap.planner import PLANNERS  # noqa: E402


def _failures(results):
    table, lines = fuzz.summarize(results, list(fuzz.ALL_PLANNERS))
    return lines, table


def test_fuzz_a_few_dozen_cases_every_planner():
    results, _ = fuzz.fuzz(range(1000, 1040), determinism_every=4)
    lines, table = _failures(results)
    assert not lines, "\n".join(lines[:20]) + "\n" + table
    # the cases are wide: tiny and large graphs, planned and refused limits
    ops = [r["ops"] for r in results]
    assert min(ops) <= 5 and max(ops) >= 60
    assert any(o == "refused" for r in results for o in r["outcomes"].values())


@pytest.mark.slow
def test_fuzz_three_hundred_cases():
    results, _ = fuzz.fuzz(range(300), workers=2, determinism_every=3)
    lines, table = _failures(results)
    assert not lines, "\n".join(lines[:20]) + "\n" + table


def test_the_checks_catch_a_false_peak_and_a_plan_faster_than_the_bound():
    case = fuzz.draw_case(7)
    plan = fuzz._plan(case, "swapadvisor-nosearch", case.limit)
    assert fuzz.check_plan_claims(case, plan, case.limit) == []
    plan.predicted["peak_bytes"] = plan.predicted["pool_bytes"] + 1
    plan.predicted["time_s"] = plan.predicted["lower_bound_s"] * 0.5
    checks = {c for c, _ in fuzz.check_plan_claims(case, plan, case.limit)}
    assert checks == {"peak", "bound", "verified"}    # the verifier refuses the false peak too


def test_the_fuzz_reports_a_refusal_of_a_feasible_limit_and_a_nondeterministic_planner(monkeypatch):
    calls = []

    def refuses(ctx):
        raise InfeasibleLimitError(ctx.mem_limit, ctx.mem_limit + 1)

    def flaky(ctx):                       # a search whose result depends on more than its seed
        calls.append(1)
        seed = ctx.seed
        ctx.seed += 1000 * len(calls)
        plan = real(ctx)
        plan.search["seed"] = seed
        return plan

    real = PLANNERS["swapadvisor"]
    monkeypatch.setitem(PLANNERS, "swapadvisor-nosearch", refuses)
    monkeypatch.setitem(PLANNERS, "swapadvisor", flaky)
    r = fuzz.run_case(10, ["swapadvisor-nosearch", "swapadvisor"], determinism=True)
    got = {(pl, check) for pl, check, _ in r["failures"]}
    assert ("swapadvisor-nosearch", "refusal") in got
    assert ("swapadvisor", "same seed") in got
